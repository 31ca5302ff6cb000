"""Statistics of the screen's scores: the paper's Tables 3 and 4, per-variant summaries, paired
tests between variants, skips, costs and the parameter tables.

Inputs are the classification stage's tables (see ``phenoica.classify``), checked at the boundary
by :mod:`phenoica.report._checks`:

- guide-fold rows: one row per (model, variant, guide, held-out fold) with ``status`` ok/skipped;
- guide scores: per (model, variant, guide), means over the ok folds; ``is_null_guide`` marks the
  pseudo-guides drawn from controls that form the empirical null;
- gene scores: per (model, variant, gene), real guides only;
- optionally a mAP table (copairs), the transform fit report and the identifiability tables.

Every variant subset is handled (those of :data:`phenoica.transforms.VARIANTS`, or any other
name, which sorts after them). Each table is a small function a test can call. The checks against
a simulated truth are in :mod:`phenoica.report._truth_tables`, drawing in
:mod:`phenoica.report._figures`, the page in :mod:`phenoica.report._write`.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from phenoica.contract import GENE, GUIDE, OK, SCORE_COLUMNS, SKIPPED
from phenoica.identifiability import TABLE_COLUMNS as ALIGNMENT_COLUMNS
from phenoica.report._checks import (
    GENE_COLUMNS,
    MAP_COLUMNS,
    check_genes,
    check_guides,
    check_rows,
    checked_table,
    mean_or_nan,
    model_variants,
    ordered_variants,
)
from phenoica.utils import bootstrap_mean, finite_values

#: (variant, reference) pairs compared by ``paired_tests``: the ICA gain over whitening alone,
#: over a random rotation (the "any rotation" control), and whitening over the raw embedding.
PAIRS: tuple[tuple[str, str], ...] = (("pca_ica", "pca"), ("pca_ica", "pca_rand"), ("pca", "base"))


def variant_widths(fit_report: Mapping[str, Any] | None) -> dict[tuple[str, str], int]:
    """(model, variant) -> D, the number of features the variant's classifiers see, from the
    fit reports (model -> variant -> report): ``n_components`` for whitened variants,
    ``n_features_in`` for base."""
    widths: dict[tuple[str, str], int] = {}
    for model, variants in (fit_report or {}).items():
        for variant, rep in variants.items():
            if not isinstance(rep, Mapping):
                continue
            d = rep.get("n_components", rep.get("n_features_in"))
            if d is not None:
                widths[(str(model), str(variant))] = int(d)
    return widths


def _width_note(widths: Mapping[str, int]) -> str:
    """'' when every variant has the same D, else which variants share which D."""
    if len(set(widths.values())) <= 1:
        return ""
    groups: dict[int, list[str]] = {}
    for v, d in widths.items():
        groups.setdefault(d, []).append(v)
    return "D differs: " + "; ".join(f"{'/'.join(vs)} D={d}" for d, vs in sorted(groups.items()))


def table3(genes_df: pd.DataFrame, n_features: Mapping[tuple[str, str], int] | None = None) -> pd.DataFrame:
    """The paper's Table 3: one row per (model, gene), mean AUROC and sparsity per variant.

    Columns: ``model``, ``Metadata_Gene``, ``n_guides`` (most guides scored in any variant),
    then ``auroc_{variant}`` and ``sparsity_{variant}`` in paper order. Each model ends with a
    ``mean`` row; its means run over the genes scored in every variant of that model (complete
    cases), so the variants are compared on the same genes; its ``n_guides`` is empty.

    With ``n_features`` ((model, variant) -> D, :func:`variant_widths`) each variant's D is
    stated (``D_{variant}``) and ``sparsity_note`` flags every row of a model whose variants
    differ in D: sparsity is ``(sqrt(D) - 1/||c||) / (sqrt(D) - 1)``, whose scale depends on D,
    so it is compared only between variants of equal D (the whitened variants share one D).
    """
    genes = check_genes(genes_df)
    blocks = []
    for model in sorted(genes["model"].unique()):
        sub = genes[genes["model"] == model]
        variants = ordered_variants(sub["variant"])
        block = pd.DataFrame(index=pd.Index(sorted(sub[GENE].unique()), name=GENE))
        block["n_guides"] = sub.groupby(GENE)["n_guides"].max()
        for metric in ("auroc", "sparsity"):
            wide = sub.pivot(index=GENE, columns="variant", values=metric)
            for variant in variants:
                block[f"{metric}_{variant}"] = wide[variant]
        mean_row: dict[str, Any] = {"n_guides": math.nan}
        for metric in ("auroc", "sparsity"):
            cols = [f"{metric}_{v}" for v in variants]
            complete = block[cols].dropna()
            for col in cols:
                mean_row[col] = float(complete[col].mean()) if len(complete) else math.nan
        block.loc["mean"] = pd.Series(mean_row)
        if n_features:
            widths = {v: n_features[(model, v)] for v in variants if (model, v) in n_features}
            for v, d in widths.items():
                block[f"D_{v}"] = d
            block["sparsity_note"] = _width_note(widths)
        block = block.reset_index()
        block.insert(0, "model", model)
        blocks.append(block)
    if not blocks:
        return pd.DataFrame(columns=["model", GENE, "n_guides"])
    out = pd.concat(blocks, ignore_index=True)
    out["n_guides"] = out["n_guides"].astype("Int64")
    ordered = ["model", GENE, "n_guides"]
    for metric in ("auroc", "sparsity", "D"):
        ordered += [f"{metric}_{v}" for v in ordered_variants(genes["variant"]) if f"{metric}_{v}" in out]
    if "sparsity_note" in out:
        ordered.append("sparsity_note")
        out["sparsity_note"] = out["sparsity_note"].fillna("")
    return out[ordered]


def table4(
    guide_fold_rows: pd.DataFrame,
    n_features: Mapping[tuple[str, str], int] | None = None,
    concentration_k: float = 0.25,
) -> pd.DataFrame:
    """The paper's Table 4: concentration per (model, variant) over scored real guide-folds.

    Columns: ``model``, ``variant``, ``concentration_mean``, ``concentration_sd`` (ddof 1),
    ``n`` (ok rows of real guides with a finite concentration), ``auroc_top_mean`` and
    ``auroc_rest_mean`` (the two AUROCs the ratio is made of). Null pseudo-guides are left out.

    With ``n_features`` ((model, variant) -> D): ``D``, ``k_features`` (the top set's size,
    ``ceil(concentration_k * D)`` clipped to 1..D-1, as :func:`phenoica.utils.top_features`)
    and ``d_note``, which flags every row whose model has variants of different D (the top
    share is then a different number of features: compare concentration between equal D).
    """
    rows = check_rows(guide_fold_rows)
    records = []
    for model, variant in model_variants(rows):
        sel = rows[
            (rows["model"] == model) & (rows["variant"] == variant) & (rows["status"] == OK) & ~rows["is_null_guide"]
        ]
        sel = sel[np.isfinite(sel["concentration"].to_numpy(dtype=float))]
        conc = sel["concentration"].to_numpy(dtype=float)
        records.append(
            {
                "model": model,
                "variant": variant,
                "concentration_mean": mean_or_nan(conc),
                "concentration_sd": float(np.std(conc, ddof=1)) if conc.size > 1 else math.nan,
                "n": int(conc.size),
                "auroc_top_mean": mean_or_nan(finite_values(sel["auroc_top"])),
                "auroc_rest_mean": mean_or_nan(finite_values(sel["auroc_rest"])),
                **_width_columns(n_features, model, variant, concentration_k),
            }
        )
    out = pd.DataFrame.from_records(
        records,
        columns=[
            "model",
            "variant",
            "concentration_mean",
            "concentration_sd",
            "n",
            "auroc_top_mean",
            "auroc_rest_mean",
        ]
        + (["D", "k_features"] if n_features else []),
    )
    if n_features:
        out["d_note"] = [
            _width_note({v: n_features[(m, v)] for v in out.loc[out["model"] == m, "variant"] if (m, v) in n_features})
            for m in out["model"]
        ]
    return out


def _width_columns(
    n_features: Mapping[tuple[str, str], int] | None, model: str, variant: str, k: float
) -> dict[str, Any]:
    if not n_features:
        return {}
    d = n_features.get((model, variant))
    if d is None:
        return {"D": math.nan, "k_features": math.nan}
    return {"D": d, "k_features": min(d - 1, max(1, math.ceil(k * d - 1e-9)))}


def variant_summary(guides_df: pd.DataFrame, thresholds: tuple[float, ...] = (0.05, 0.1)) -> pd.DataFrame:
    """Per (model, variant): guide-level AUROC, sparsity, concentration, the null, and hits.

    A real guide is *scored* when it has at least one ok fold and a finite AUROC, otherwise it
    counts as skipped. The null is the pseudo-guides' AUROCs (their count and mean). Hits are
    real guides with a BH q-value (``phenoica.hits._calls``) below each of ``thresholds``; without q-values
    (no null) the counts are empty.
    """
    guides = check_guides(guides_df)
    has_q = "q_value" in guides.columns
    records = []
    for model, variant in model_variants(guides):
        sub = guides[(guides["model"] == model) & (guides["variant"] == variant)]
        real = sub[~sub["is_null_guide"]]
        scored_mask = (real["n_folds_ok"].to_numpy() > 0) & np.isfinite(real["auroc"].to_numpy())
        scored = real[scored_mask]
        auroc = scored["auroc"].to_numpy(dtype=float)
        null_auroc = finite_values(sub.loc[sub["is_null_guide"] & (sub["n_folds_ok"] > 0), "auroc"])
        row: dict[str, Any] = {
            "model": model,
            "variant": variant,
            "n_guides_scored": int(len(scored)),
            "n_guides_skipped": int(len(real) - len(scored)),
            "auroc_mean": mean_or_nan(auroc),
            "auroc_median": float(np.median(auroc)) if auroc.size else math.nan,
            "sparsity_mean": mean_or_nan(finite_values(scored["sparsity"])),
            "concentration_mean": mean_or_nan(finite_values(scored["concentration"])),
            "n_null_guides": int(null_auroc.size),
            "null_auroc_mean": mean_or_nan(null_auroc),
        }
        for t in thresholds:
            q = pd.to_numeric(real["q_value"], errors="coerce").to_numpy(dtype=float) if has_q else np.empty(0)
            row[f"hits_q<{t:g}"] = int(np.sum(q < t)) if (has_q and np.isfinite(q).any()) else pd.NA
        records.append(row)
    out = pd.DataFrame.from_records(
        records,
        columns=[
            "model",
            "variant",
            "n_guides_scored",
            "n_guides_skipped",
            "auroc_mean",
            "auroc_median",
            "sparsity_mean",
            "concentration_mean",
            "n_null_guides",
            "null_auroc_mean",
            *[f"hits_q<{t:g}" for t in thresholds],
        ],
    )
    for t in thresholds:
        out[f"hits_q<{t:g}"] = out[f"hits_q<{t:g}"].astype("Int64")
    return out


def _wilcoxon_row(diff: np.ndarray, min_pairs: int) -> dict[str, Any]:
    """Wilcoxon signed-rank (two-sided) on paired differences, or NaN and a note why not."""
    out: dict[str, Any] = {
        "n": int(diff.size),
        "median_diff": float(np.median(diff)) if diff.size else math.nan,
        "mean_diff": mean_or_nan(diff),
        "statistic": math.nan,
        "p_value": math.nan,
        "note": "",
    }
    if diff.size < min_pairs:
        out["note"] = f"fewer than {min_pairs} paired genes; no test"
        return out
    nonzero = int(np.count_nonzero(diff))
    if nonzero == 0:
        out["p_value"] = 1.0
        out["note"] = "all differences are zero"
        return out
    res = stats.wilcoxon(diff, alternative="two-sided")
    out["statistic"] = float(res.statistic)
    out["p_value"] = float(res.pvalue)
    if nonzero < diff.size:
        out["note"] = f"{diff.size - nonzero} zero difference(s) dropped (zero_method wilcox)"
    return out


def paired_tests(
    genes_df: pd.DataFrame,
    pairs: Sequence[tuple[str, str]] = PAIRS,
    metrics: Sequence[str] = ("auroc", "sparsity", "concentration"),
    min_pairs: int = 5,
    seed: int = 0,
) -> pd.DataFrame:
    """Paired comparisons over genes, per model, of ``variant`` vs ``reference``: effect size,
    bootstrap interval and Wilcoxon signed-rank test.

    Genes are paired on their gene-level score in both variants (genes missing or NaN in
    either are dropped). Differences are variant - reference: the effect size ``mean_diff``
    with its 95% percentile-bootstrap interval over genes (``ci_low``, ``ci_high``; seeded by
    ``seed`` and the comparison), ``median_diff``, the test ``statistic`` and two-sided
    ``p_value``. With fewer than ``min_pairs`` pairs, or a variant absent, the test is NaN and
    ``note`` says why. No multiple-testing correction.
    """
    if min_pairs < 1:
        raise ValueError(f"min_pairs must be at least 1, got {min_pairs}")
    genes = check_genes(genes_df)
    unknown = [m for m in metrics if m not in GENE_COLUMNS]
    if unknown:
        raise ValueError(f"paired_tests: unknown metric(s) {unknown}; expected columns of the gene scores")
    records = []
    for model in sorted(genes["model"].unique()):
        sub = genes[genes["model"] == model]
        present = set(sub["variant"])
        for variant, reference in pairs:
            for metric in metrics:
                base = {"model": model, "variant": variant, "reference": reference, "metric": metric}
                absent = [v for v in (variant, reference) if v not in present]
                if absent:
                    row = _wilcoxon_row(np.empty(0), min_pairs)
                    row["note"] = f"variant(s) {absent} not scored"
                    records.append({**base, **row, "ci_low": math.nan, "ci_high": math.nan})
                    continue
                a = sub[sub["variant"] == variant].set_index(GENE)[metric]
                b = sub[sub["variant"] == reference].set_index(GENE)[metric]
                joined = pd.concat({"a": a, "b": b}, axis=1, join="inner").dropna()
                diff = (joined["a"] - joined["b"]).to_numpy(dtype=float)
                ci = bootstrap_mean(diff, seed, "paired", model, variant, reference, metric)
                records.append({**base, **_wilcoxon_row(diff, min_pairs), "ci_low": ci.low, "ci_high": ci.high})
    out = pd.DataFrame.from_records(
        records,
        columns=[
            "model",
            "variant",
            "reference",
            "metric",
            "n",
            "mean_diff",
            "ci_low",
            "ci_high",
            "median_diff",
            "statistic",
            "p_value",
            "note",
        ],
    )
    return out


def skipped_rows(guide_fold_rows: pd.DataFrame) -> pd.DataFrame:
    """All skipped guide-fold rows with their reasons, plus ``n_same_reason``: rows sharing the reason."""
    rows = check_rows(guide_fold_rows)
    skipped = rows[rows["status"] == SKIPPED]
    cols = [*SCORE_COLUMNS[: SCORE_COLUMNS.index("n_test_neg") + 1], "reason"]  # who, where, how many; why
    out = skipped[cols].sort_values(["model", "variant", GENE, GUIDE, "fold"], kind="stable").reset_index(drop=True)
    out["n_same_reason"] = out.groupby("reason")["reason"].transform("size").astype(int)
    return out


def skip_counts(guide_fold_rows: pd.DataFrame) -> pd.DataFrame:
    """Skipped guide-folds counted per (model, variant, reason): rows and distinct guides."""
    skipped = skipped_rows(guide_fold_rows)
    if skipped.empty:
        return pd.DataFrame(columns=["model", "variant", "reason", "n_rows", "n_guides"])
    grouped = skipped.groupby(["model", "variant", "reason"], sort=False)
    out = grouped.agg(n_rows=(GUIDE, "size"), n_guides=(GUIDE, "nunique")).reset_index()
    order = {v: i for i, v in enumerate(ordered_variants(out["variant"]))}
    out["_v"] = out["variant"].map(order)
    return (
        out.sort_values(["model", "_v", "n_rows"], ascending=[True, True, False])
        .drop(columns="_v")
        .reset_index(drop=True)
    )


def map_summary(map_df: pd.DataFrame, q_threshold: float = 0.05) -> pd.DataFrame:
    """Per (model, variant): the guides' mean average precision (copairs phenotypic activity) and
    how many are active at BH q < ``q_threshold``."""
    mp = checked_table(
        map_df, "mAP table", MAP_COLUMNS, numeric=("mean_average_precision", "map_p_value", "map_q_value")
    )
    records = []
    for model, variant in model_variants(mp):
        sub = mp[(mp["model"] == model) & (mp["variant"] == variant)]
        values = finite_values(sub["mean_average_precision"])
        n_sig = int((sub["map_q_value"] < q_threshold).sum())
        records.append(
            {
                "model": model,
                "variant": variant,
                "n_guides": int(len(sub)),
                "n_scored": int(values.size),
                "map_mean": mean_or_nan(values),
                "map_median": float(np.median(values)) if values.size else math.nan,
                f"active_q<{q_threshold:g}": n_sig,
                "fraction_active": n_sig / values.size if values.size else math.nan,
            }
        )
    return pd.DataFrame.from_records(
        records,
        columns=[
            "model",
            "variant",
            "n_guides",
            "n_scored",
            "map_mean",
            "map_median",
            f"active_q<{q_threshold:g}",
            "fraction_active",
        ],
    )


def classifier_cost(guide_fold_rows: pd.DataFrame) -> pd.DataFrame:
    """Per (model, variant): LightGBM models trained for real guides (3 per scored guide-fold with
    concentration, else 1) and for the null (1 per scored pseudo-guide-fold), and the null's share.

    Model trainings of the same rows and rounds cost about the same, so the share is the null's
    share of the classification time."""
    rows = check_rows(guide_fold_rows)
    ok = rows[rows["status"] == OK]
    records = []
    for model, variant in model_variants(rows):
        sub = ok[(ok["model"] == model) & (ok["variant"] == variant)]
        real, null = sub[~sub["is_null_guide"]], sub[sub["is_null_guide"]]
        n_real = int(len(real) + 2 * np.isfinite(real["concentration"].to_numpy(dtype=float)).sum())
        total = n_real + len(null)
        records.append(
            {
                "model": model,
                "variant": variant,
                "models_real_guides": n_real,
                "models_null": int(len(null)),
                "null_share": len(null) / total if total else math.nan,
            }
        )
    return pd.DataFrame.from_records(
        records, columns=["model", "variant", "models_real_guides", "models_null", "null_share"]
    )


def fit_report_table(fit_report: Mapping[str, Any], max_list: int = 6) -> pd.DataFrame:
    """The transform fit report (nested dict from JSON) as a table.

    Every mapping with a scalar ``variant`` entry (as ``phenoica.transforms`` writes them, also
    nested under model names) becomes one row: ``model`` (the keys above it, joined with ".",
    the variant's own key left out), ``variant``, then its fields, nested ones joined with "."
    (``ica.converged``). A report without such records is flattened into ``setting``/``value``
    rows instead. Lists longer than ``max_list`` are summarized by their length and first values.
    """
    if not isinstance(fit_report, Mapping):
        raise ValueError(f"fit report: expected a mapping (JSON object), got {type(fit_report).__name__}")

    def flat(node: Any, prefix: str, out: dict[str, str]) -> dict[str, str]:
        if isinstance(node, Mapping) and node:
            for key, value in node.items():
                flat(value, f"{prefix}.{key}" if prefix else str(key), out)
        elif isinstance(node, (list, tuple)) and len(node) > max_list:
            out[prefix] = f"{len(node)} values: " + ", ".join(_format_value(v) for v in node[:3]) + ", ..."
        elif isinstance(node, (list, tuple)):
            out[prefix] = "[" + ", ".join(_format_value(v) for v in node) + "]"
        else:
            out[prefix] = "{}" if isinstance(node, Mapping) else _format_value(node)
        return out

    records: list[dict[str, str]] = []

    def find(node: Any, path: list[str]) -> None:
        if not isinstance(node, Mapping):
            return
        variant = node.get("variant")
        if variant is not None and not isinstance(variant, (Mapping, list, tuple)):
            parents = path[:-1] if path and path[-1] == str(variant) else path
            fields = flat({k: v for k, v in node.items() if k != "variant"}, "", {})
            records.append({"model": ".".join(parents), "variant": str(variant), **fields})
            return
        for key, value in node.items():
            find(value, [*path, str(key)])

    find(fit_report, [])
    if records:
        table = pd.DataFrame.from_records(records)
        return table.fillna("")
    rows = flat(fit_report, "", {})
    return pd.DataFrame({"setting": list(rows), "value": list(rows.values())})


def _format_value(value: Any) -> str:
    """A scalar as short text: floats with 4 significant digits, nested things as JSON."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.4g}"
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(value, default=str)[:80]
    return str(value)


def table1_summary(table1: pd.DataFrame) -> pd.DataFrame:
    """Table 1 rows (one per variant and ordered model pair) with the paper's columns first."""
    paper = ("variant", *ALIGNMENT_COLUMNS[: ALIGNMENT_COLUMNS.index("mutual_knn") + 1])
    first = [c for c in paper if c in table1.columns]
    out = table1[first + [c for c in table1.columns if c not in first]].copy()
    order = {v: i for i, v in enumerate(ordered_variants(out["variant"]))} if "variant" in out else {}
    if order:
        out = out.sort_values(
            ["variant", "model_a", "model_b"], key=lambda c: c.map(order) if c.name == "variant" else c
        )
    return out.reset_index(drop=True)


def lightgbm_table(params: Mapping[str, Any]) -> pd.DataFrame:
    """The LightGBM parameters every classifier used, one row each, marking Table 6's."""
    table6 = {"is_unbalance", "learning_rate", "num_leaves", "feature_fraction", "lambda_l1", "lambda_l2"}
    return pd.DataFrame(
        {
            "parameter": list(params),
            "value": [_format_value(v) for v in params.values()],
            "source": [
                "Table 6"
                if k in table6
                else "phenoica (determinism, threads, objective)"
                if k in ("deterministic", "force_col_wise", "num_threads", "verbosity", "objective", "seed")
                else "override"
                for k in params
            ],
        }
    )


def has_calls(guides: pd.DataFrame) -> bool:
    """Whether the guide scores carry hit calls (a finite ``q_value``: the null was scored)."""
    return "q_value" in guides.columns and np.isfinite(pd.to_numeric(guides["q_value"], errors="coerce")).any()
