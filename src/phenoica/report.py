"""The report stage: the paper's Tables 3 and 4, summaries, paired tests, figures, report files.

Inputs are the classification stage's tables (see ``phenoica.classify``):

- guide-fold rows: one row per (model, variant, guide, held-out fold) with ``status`` ok/skipped;
- guide scores: per (model, variant, guide), means over the ok folds; ``is_null_guide`` marks the
  pseudo-guides drawn from controls that form the empirical null;
- gene scores: per (model, variant, gene), real guides only;
- the hit calls of ``phenoica.hits`` (p, q and call per guide and gene; the hit table beside the
  mAP readout; the null's calibration summary);
- optionally a mAP table (copairs), a truth table (demo screens) and the transform fit report.

Every variant subset is handled (base, pca, pca_ica, pca_rand, or any other name, which sorts
after the known ones). Tables are computed by small functions a test can call; ``write_report``
writes them all, the figures, ``report.md`` and a self-contained ``index.html`` atomically.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from scipy import stats

from phenoica import hits as H
from phenoica import truth as demo_truth
from phenoica.contract import OK, SKIPPED
from phenoica.io import atomic_path
from phenoica.screen import GENE, GUIDE, ScreenError
from phenoica.stats import bootstrap_mean

VARIANTS: tuple[str, ...] = ("base", "pca", "pca_ica", "pca_rand")
VARIANT_LABELS: dict[str, str] = {
    "base": "Base",
    "pca": "PCA",
    "pca_ica": "PCA + ICA",
    "pca_rand": "PCA + Rand",
}
#: (variant, reference) pairs compared by ``paired_tests``: the ICA gain over whitening alone,
#: over a random rotation (the "any rotation" control), and whitening over the raw embedding.
PAIRS: tuple[tuple[str, str], ...] = (("pca_ica", "pca"), ("pca_ica", "pca_rand"), ("pca", "base"))

ROW_COLUMNS: tuple[str, ...] = (
    "model", "variant", GENE, GUIDE, "is_null_guide", "fold", "n_train_pos", "n_train_neg",
    "n_test_pos", "n_test_neg", "auroc", "sparsity", "concentration", "auroc_top", "auroc_rest",
    "status", "reason",
)
GUIDE_COLUMNS: tuple[str, ...] = (
    "model", "variant", GENE, GUIDE, "is_null_guide", "n_folds_ok", "auroc", "sparsity", "concentration",
)
GENE_COLUMNS: tuple[str, ...] = ("model", "variant", GENE, "n_guides", "auroc", "sparsity", "concentration")
MAP_COLUMNS: tuple[str, ...] = ("model", "variant", GENE, GUIDE, "mean_average_precision", "map_p_value", "map_q_value")
TRUTH_COLUMNS: tuple[str, ...] = (GENE, GUIDE, "has_effect", "efficacy")

FIGURE_DPI = 120
AUROC_LABEL = "Held-out AUROC, guide vs controls (unitless; 0.5 = chance)"
SPARSITY_LABEL = "Sparsity of feature use (unitless; 0 = all features equal)"
CONCENTRATION_LABEL = "Concentration: AUROC(top k) / AUROC(rest) - 1 (unitless)"


# --------------------------------------------------------------------------- input checks


def ordered_variants(values: Iterable[str]) -> list[str]:
    """The distinct variant names in ``values``: known ones in paper order, then others sorted."""
    present = {str(v) for v in values}
    return [v for v in VARIANTS if v in present] + sorted(present - set(VARIANTS))


def variant_label(variant: str) -> str:
    """Display name of a variant as in the paper ("PCA + ICA"); unknown names pass through."""
    return VARIANT_LABELS.get(variant, variant)


def _as_bool(series: pd.Series, column: str, source: str) -> pd.Series:
    """A boolean column from bools, 0/1 or "true"/"false" strings; anything else is an error."""
    if series.dtype == bool:
        return series
    mapping = {"true": True, "false": False, "1": True, "0": False, "1.0": True, "0.0": False}
    text = series.astype(str).str.strip().str.lower()
    bad = ~text.isin(list(mapping))
    if bad.any():
        rows = np.flatnonzero(bad.to_numpy())[:5].tolist()
        raise ScreenError(f"{source}: column {column} must be boolean (True/False); bad value(s) at row(s) {rows}")
    return text.map(mapping).astype(bool)


def _checked(
    df: pd.DataFrame,
    source: str,
    required: Sequence[str],
    numeric: Sequence[str] = (),
    boolean: Sequence[str] = (),
    key: Sequence[str] = (),
) -> pd.DataFrame:
    """Copy of ``df`` with the required columns present, numeric/boolean columns coerced, ``key`` unique.

    Raises ScreenError naming ``source`` and the column or rows at fault.
    """
    if not isinstance(df, pd.DataFrame):
        raise ScreenError(f"{source}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ScreenError(f"{source}: missing column(s) {missing}; expected {list(required)}")
    out = df.reset_index(drop=True).copy()
    for col in ("model", "variant", GENE, GUIDE):
        if col in out.columns:
            if out[col].isna().any():
                rows = np.flatnonzero(out[col].isna().to_numpy())[:5].tolist()
                raise ScreenError(f"{source}: column {col} has missing values at row(s) {rows}")
            out[col] = out[col].astype(str)
    for col in numeric:
        try:
            out[col] = pd.to_numeric(out[col], errors="raise").astype(float)
        except (TypeError, ValueError) as exc:
            raise ScreenError(f"{source}: column {col} must be numeric ({exc})") from None
    for col in boolean:
        out[col] = _as_bool(out[col], col, source)
    if key:
        dup = out.duplicated(list(key), keep=False)
        if dup.any():
            rows = np.flatnonzero(dup.to_numpy())[:5].tolist()
            raise ScreenError(f"{source}: duplicate rows for key {list(key)} at row(s) {rows}")
    return out


def check_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Validate guide-fold rows (status must be ok/skipped); return a normalized copy."""
    out = _checked(
        rows, "guide-fold rows", ROW_COLUMNS,
        numeric=("n_train_pos", "n_train_neg", "n_test_pos", "n_test_neg", "auroc", "sparsity",
                 "concentration", "auroc_top", "auroc_rest"),
        boolean=("is_null_guide",),
    )
    bad = ~out["status"].isin([OK, SKIPPED])
    if bad.any():
        rows_at = np.flatnonzero(bad.to_numpy())[:5].tolist()
        raise ScreenError(f"guide-fold rows: column status must be 'ok' or 'skipped'; bad at row(s) {rows_at}")
    out["reason"] = out["reason"].fillna("").astype(str)
    return out


def check_guides(guides: pd.DataFrame) -> pd.DataFrame:
    """Validate guide scores (unique per model, variant, gene, guide); return a normalized copy."""
    return _checked(
        guides, "guide scores", GUIDE_COLUMNS,
        numeric=("n_folds_ok", "auroc", "sparsity", "concentration"), boolean=("is_null_guide",),
        key=("model", "variant", GENE, GUIDE),
    )


def check_genes(genes: pd.DataFrame) -> pd.DataFrame:
    """Validate gene scores (unique per model, variant, gene); return a normalized copy."""
    return _checked(
        genes, "gene scores", GENE_COLUMNS,
        numeric=("n_guides", "auroc", "sparsity", "concentration"), key=("model", "variant", GENE),
    )


def check_truth(truth: pd.DataFrame) -> pd.DataFrame:
    """Validate the demo truth table (unique per gene, guide); return a normalized copy."""
    return _checked(truth, "truth table", TRUTH_COLUMNS, numeric=("efficacy",), boolean=("has_effect",),
                    key=(GENE, GUIDE))


def _model_variants(df: pd.DataFrame) -> list[tuple[str, str]]:
    """The (model, variant) pairs present, models sorted, variants in paper order."""
    pairs = []
    for model in sorted(df["model"].unique()):
        for variant in ordered_variants(df.loc[df["model"] == model, "variant"]):
            pairs.append((model, variant))
    return pairs


def _finite(values: pd.Series | np.ndarray) -> np.ndarray:
    """The finite values of a numeric array, as float."""
    arr = np.asarray(values, dtype=float)
    return arr[np.isfinite(arr)]


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if values.size else math.nan


# --------------------------------------------------------------------------- tables


def table3(genes_df: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 3: one row per (model, gene), mean AUROC and sparsity per variant.

    Columns: ``model``, ``Metadata_Gene``, ``n_guides`` (most guides scored in any variant),
    then ``auroc_{variant}`` and ``sparsity_{variant}`` in paper order. Each model ends with a
    ``mean`` row; its means run over the genes scored in every variant of that model (complete
    cases), so the variants are compared on the same genes; its ``n_guides`` is empty.
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
        block = block.reset_index()
        block.insert(0, "model", model)
        blocks.append(block)
    if not blocks:
        return pd.DataFrame(columns=["model", GENE, "n_guides"])
    out = pd.concat(blocks, ignore_index=True)
    out["n_guides"] = out["n_guides"].astype("Int64")
    ordered = ["model", GENE, "n_guides"]
    for metric in ("auroc", "sparsity"):
        ordered += [f"{metric}_{v}" for v in ordered_variants(genes["variant"]) if f"{metric}_{v}" in out]
    return out[ordered]


def table4(guide_fold_rows: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 4: concentration per (model, variant) over scored real guide-folds.

    Columns: ``model``, ``variant``, ``concentration_mean``, ``concentration_sd`` (ddof 1),
    ``n`` (ok rows of real guides with a finite concentration), ``auroc_top_mean`` and
    ``auroc_rest_mean`` (the two AUROCs the ratio is made of). Null pseudo-guides are left out.
    """
    rows = check_rows(guide_fold_rows)
    records = []
    for model, variant in _model_variants(rows):
        sel = rows[(rows["model"] == model) & (rows["variant"] == variant) & (rows["status"] == OK)
                   & ~rows["is_null_guide"]]
        sel = sel[np.isfinite(sel["concentration"].to_numpy(dtype=float))]
        conc = sel["concentration"].to_numpy(dtype=float)
        records.append({
            "model": model,
            "variant": variant,
            "concentration_mean": _mean(conc),
            "concentration_sd": float(np.std(conc, ddof=1)) if conc.size > 1 else math.nan,
            "n": int(conc.size),
            "auroc_top_mean": _mean(_finite(sel["auroc_top"])),
            "auroc_rest_mean": _mean(_finite(sel["auroc_rest"])),
        })
    return pd.DataFrame.from_records(records, columns=[
        "model", "variant", "concentration_mean", "concentration_sd", "n", "auroc_top_mean", "auroc_rest_mean"])


def variant_summary(guides_df: pd.DataFrame, thresholds: tuple[float, ...] = (0.05, 0.1)) -> pd.DataFrame:
    """Per (model, variant): guide-level AUROC, sparsity, concentration, the null, and hits.

    A real guide is *scored* when it has at least one ok fold and a finite AUROC, otherwise it
    counts as skipped. The null is the pseudo-guides' AUROCs (their count and mean). Hits are
    real guides with a BH q-value (``phenoica.hits``) below each of ``thresholds``; without q-values
    (no null) the counts are empty.
    """
    guides = check_guides(guides_df)
    has_q = "q_value" in guides.columns
    records = []
    for model, variant in _model_variants(guides):
        sub = guides[(guides["model"] == model) & (guides["variant"] == variant)]
        real = sub[~sub["is_null_guide"]]
        scored_mask = (real["n_folds_ok"].to_numpy() > 0) & np.isfinite(real["auroc"].to_numpy())
        scored = real[scored_mask]
        auroc = scored["auroc"].to_numpy(dtype=float)
        null_auroc = _finite(sub.loc[sub["is_null_guide"] & (sub["n_folds_ok"] > 0), "auroc"])
        row: dict[str, Any] = {
            "model": model,
            "variant": variant,
            "n_guides_scored": int(len(scored)),
            "n_guides_skipped": int(len(real) - len(scored)),
            "auroc_mean": _mean(auroc),
            "auroc_median": float(np.median(auroc)) if auroc.size else math.nan,
            "sparsity_mean": _mean(_finite(scored["sparsity"])),
            "concentration_mean": _mean(_finite(scored["concentration"])),
            "n_null_guides": int(null_auroc.size),
            "null_auroc_mean": _mean(null_auroc),
        }
        for t in thresholds:
            q = pd.to_numeric(real["q_value"], errors="coerce").to_numpy(dtype=float) if has_q else np.empty(0)
            row[f"hits_q<{t:g}"] = int(np.sum(q < t)) if (has_q and np.isfinite(q).any()) else pd.NA
        records.append(row)
    out = pd.DataFrame.from_records(records, columns=[
        "model", "variant", "n_guides_scored", "n_guides_skipped", "auroc_mean", "auroc_median",
        "sparsity_mean", "concentration_mean", "n_null_guides", "null_auroc_mean",
        *[f"hits_q<{t:g}" for t in thresholds]])
    for t in thresholds:
        out[f"hits_q<{t:g}"] = out[f"hits_q<{t:g}"].astype("Int64")
    return out


def _wilcoxon_row(diff: np.ndarray, min_pairs: int) -> dict[str, Any]:
    """Wilcoxon signed-rank (two-sided) on paired differences, or NaN and a note why not."""
    out: dict[str, Any] = {
        "n": int(diff.size),
        "median_diff": float(np.median(diff)) if diff.size else math.nan,
        "mean_diff": _mean(diff),
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
    out = pd.DataFrame.from_records(records, columns=[
        "model", "variant", "reference", "metric", "n", "mean_diff", "ci_low", "ci_high", "median_diff",
        "statistic", "p_value", "note"])
    return out


def _effect_groups(guides: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """Real guides joined to the truth, with ``group`` = effect / no_effect / other.

    ``effect``: the guide has a true effect. ``no_effect``: no guide of its gene has one.
    ``other``: a guide without effect of a gene that has an effect elsewhere (left out of both).
    """
    real = guides[~guides["is_null_guide"]]
    known = truth.set_index([GENE, GUIDE])
    keys = pd.MultiIndex.from_frame(real[[GENE, GUIDE]])
    missing = keys.difference(known.index)
    if len(missing):
        shown = [f"{g}/{s}" for g, s in list(missing)[:5]]
        raise ScreenError(f"truth table: no row for {len(missing)} scored guide(s), e.g. {shown}")
    merged = real.merge(truth[[GENE, GUIDE, "has_effect", "efficacy"]], on=[GENE, GUIDE], how="left")
    gene_effect = truth.groupby(GENE)["has_effect"].any()
    gene_has = merged[GENE].map(gene_effect).astype(bool)
    merged["group"] = np.where(merged["has_effect"], "effect", np.where(~gene_has, "no_effect", "other"))
    return merged


def truth_checks(guides_df: pd.DataFrame, truth: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Demo screens: do the scores find the simulated truth? Reported as measured, per (model, variant).

    Over scored real guides (finite AUROC): mean AUROC of guides with a true effect vs guides of
    genes without any effect, one-sided Mann-Whitney U (effect > no effect) and
    ``effect_gt_no_effect`` = its p < ``alpha``; whether no-effect guides sit at chance (their
    mean, a two-sided one-sample t-test against 0.5) and whether they match the empirical null
    (two-sided Mann-Whitney against the null pseudo-guides); Spearman correlation of AUROC with
    guide efficacy among effect guides. Too few values for a test give NaN and a ``note``.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    guides = check_guides(guides_df)
    truth = check_truth(truth)
    merged = _effect_groups(guides, truth)
    records = []
    for model, variant in _model_variants(guides):
        sel = merged[(merged["model"] == model) & (merged["variant"] == variant)]
        sel = sel[np.isfinite(sel["auroc"].to_numpy(dtype=float))]
        eff = sel.loc[sel["group"] == "effect", "auroc"].to_numpy(dtype=float)
        none = sel.loc[sel["group"] == "no_effect", "auroc"].to_numpy(dtype=float)
        nulls = guides[(guides["model"] == model) & (guides["variant"] == variant) & guides["is_null_guide"]]
        null_auroc = _finite(nulls["auroc"])
        notes = []
        row: dict[str, Any] = {
            "model": model, "variant": variant,
            "n_effect": int(eff.size), "n_no_effect": int(none.size),
            "auroc_effect_mean": _mean(eff), "auroc_no_effect_mean": _mean(none),
            "effect_minus_no_effect": _mean(eff) - _mean(none),
            "mannwhitney_u": math.nan, "mannwhitney_p": math.nan, "effect_gt_no_effect": pd.NA,
            "no_effect_vs_half_t": math.nan, "no_effect_vs_half_p": math.nan,
            "null_auroc_mean": _mean(null_auroc), "no_effect_vs_null_p": math.nan,
            "efficacy_spearman_rho": math.nan, "efficacy_spearman_p": math.nan,
        }
        if eff.size and none.size:
            mw = stats.mannwhitneyu(eff, none, alternative="greater")
            row["mannwhitney_u"], row["mannwhitney_p"] = float(mw.statistic), float(mw.pvalue)
            row["effect_gt_no_effect"] = bool(mw.pvalue < alpha)
        else:
            notes.append("no effect or no no-effect guides scored")
        if none.size >= 2 and np.ptp(none) > 0:
            tt = stats.ttest_1samp(none, 0.5)
            row["no_effect_vs_half_t"], row["no_effect_vs_half_p"] = float(tt.statistic), float(tt.pvalue)
        else:
            notes.append("fewer than 2 distinct no-effect AUROCs; no t-test")
        if none.size and null_auroc.size:
            row["no_effect_vs_null_p"] = float(stats.mannwhitneyu(none, null_auroc, alternative="two-sided").pvalue)
        eff_rows = sel[sel["group"] == "effect"]
        efficacy = eff_rows["efficacy"].to_numpy(dtype=float)
        ok = np.isfinite(efficacy)
        if ok.sum() >= 3 and np.ptp(efficacy[ok]) > 0 and np.ptp(eff[ok]) > 0:
            sp = stats.spearmanr(efficacy[ok], eff[ok])
            row["efficacy_spearman_rho"], row["efficacy_spearman_p"] = float(sp.statistic), float(sp.pvalue)
        else:
            notes.append("fewer than 3 effect guides with varying efficacy and AUROC; no correlation")
        row["note"] = "; ".join(notes)
        records.append(row)
    return pd.DataFrame.from_records(records, columns=[
        "model", "variant", "n_effect", "n_no_effect", "auroc_effect_mean", "auroc_no_effect_mean",
        "effect_minus_no_effect", "mannwhitney_u", "mannwhitney_p", "effect_gt_no_effect",
        "no_effect_vs_half_t", "no_effect_vs_half_p", "null_auroc_mean", "no_effect_vs_null_p",
        "efficacy_spearman_rho", "efficacy_spearman_p", "note"])


def truth_recovery(
    guides_df: pd.DataFrame, truth: pd.DataFrame, structural: pd.DataFrame | None = None, *, seed: int = 0
) -> dict[str, pd.DataFrame]:
    """Demo screens: is the simulated truth recovered end to end? Two tables, as measured
    (statistics in ``phenoica.truth``; bootstrap intervals resample genes, seeded by ``seed``).

    ``truth_recovery``, per (model, variant): held-out probe R^2 of the gene-shifted factors
    (when ``structural`` has ``probe_r2_factor_*`` columns) beside effect vs no-effect guide
    AUROC, their difference with its interval, the common-language effect size and the
    one-sided Mann-Whitney p. ``variant_contrasts``: pca_ica vs pca vs pca_rand per model.
    (Hit recall / observed FDR against the truth belongs in this section too, from the
    hit-calling stage.)
    """
    guides = check_guides(guides_df)
    table = demo_truth.effect_separation(guides, truth, seed=seed)
    probe_cols = [] if structural is None else [c for c in structural.columns if str(c).startswith("probe_r2_factor_")]
    if probe_cols:
        probe = demo_truth.probe_table(structural, truth)[
            ["model", "variant", "n_shifted_factors", "probe_r2_shifted", "probe_r2_other"]]
        table = probe.merge(table, on=["model", "variant"], how="outer")
    order = {v: i for i, v in enumerate(ordered_variants(table["variant"]))}
    table = table.sort_values(["model", "variant"], key=lambda c: c.map(order) if c.name == "variant" else c)
    return {"truth_recovery": table.reset_index(drop=True),
            "variant_contrasts": demo_truth.variant_contrasts(guides, truth, seed=seed)}


def skipped_rows(guide_fold_rows: pd.DataFrame) -> pd.DataFrame:
    """All skipped guide-fold rows with their reasons, plus ``n_same_reason``: rows sharing the reason."""
    rows = check_rows(guide_fold_rows)
    skipped = rows[rows["status"] == SKIPPED]
    cols = ["model", "variant", GENE, GUIDE, "is_null_guide", "fold", "n_train_pos", "n_train_neg",
            "n_test_pos", "n_test_neg", "reason"]
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
    return out.sort_values(["model", "_v", "n_rows"], ascending=[True, True, False]).drop(columns="_v").reset_index(drop=True)


def map_summary(map_df: pd.DataFrame, q_threshold: float = 0.05) -> pd.DataFrame:
    """Per (model, variant): the guides' mean average precision (copairs phenotypic activity) and
    how many are active at BH q < ``q_threshold``."""
    mp = _checked(map_df, "mAP table", MAP_COLUMNS,
                  numeric=("mean_average_precision", "map_p_value", "map_q_value"))
    records = []
    for model, variant in _model_variants(mp):
        sub = mp[(mp["model"] == model) & (mp["variant"] == variant)]
        values = _finite(sub["mean_average_precision"])
        n_sig = int((sub["map_q_value"] < q_threshold).sum())
        records.append({
            "model": model, "variant": variant, "n_guides": int(len(sub)), "n_scored": int(values.size),
            "map_mean": _mean(values), "map_median": float(np.median(values)) if values.size else math.nan,
            f"active_q<{q_threshold:g}": n_sig,
            "fraction_active": n_sig / values.size if values.size else math.nan,
        })
    return pd.DataFrame.from_records(records, columns=[
        "model", "variant", "n_guides", "n_scored", "map_mean", "map_median", f"active_q<{q_threshold:g}",
        "fraction_active"])


def classifier_cost(guide_fold_rows: pd.DataFrame) -> pd.DataFrame:
    """Per (model, variant): LightGBM models trained for real guides (3 per scored guide-fold with
    concentration, else 1) and for the null (1 per scored pseudo-guide-fold), and the null's share.

    Model trainings of the same rows and rounds cost about the same, so the share is the null's
    share of the classification time."""
    rows = check_rows(guide_fold_rows)
    ok = rows[rows["status"] == OK]
    records = []
    for model, variant in _model_variants(rows):
        sub = ok[(ok["model"] == model) & (ok["variant"] == variant)]
        real, null = sub[~sub["is_null_guide"]], sub[sub["is_null_guide"]]
        n_real = int(len(real) + 2 * np.isfinite(real["concentration"].to_numpy(dtype=float)).sum())
        total = n_real + len(null)
        records.append({"model": model, "variant": variant, "models_real_guides": n_real,
                        "models_null": int(len(null)), "null_share": len(null) / total if total else math.nan})
    return pd.DataFrame.from_records(records, columns=["model", "variant", "models_real_guides", "models_null",
                                                       "null_share"])


def fit_report_table(fit_report: Mapping[str, Any], max_list: int = 6) -> pd.DataFrame:
    """The transform fit report (nested dict from JSON) as a table.

    Every mapping with a scalar ``variant`` entry (as ``phenoica.variants`` writes them, also
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


# --------------------------------------------------------------------------- figures


def _spread(n: int, width: float) -> np.ndarray:
    """Deterministic horizontal offsets in [-width/2, width/2] for n points (golden-ratio sequence)."""
    return ((np.arange(n) * 0.6180339887) % 1.0 - 0.5) * width


def _variant_panel(
    ax: Axes,
    real: Mapping[str, np.ndarray],
    null: Mapping[str, np.ndarray] | None,
    ylabel: str,
    chance: float | None,
) -> None:
    """Box plot + points per variant of real guides; null pseudo-guides as grey crosses beside."""
    variants = list(real)
    positions = np.arange(len(variants), dtype=float)
    data = [real[v] for v in variants]
    boxed = [i for i, d in enumerate(data) if d.size]
    if boxed:
        ax.boxplot([data[i] for i in boxed], positions=positions[boxed], widths=0.45, showfliers=False,
                   medianprops={"color": "black"}, boxprops={"color": "0.3"})
    for pos, values in zip(positions, data):
        ax.scatter(pos + _spread(values.size, 0.35), values, s=14, color="tab:blue", alpha=0.75, zorder=3)
    handles = [Line2D([], [], marker="o", ls="", color="tab:blue", label="real guides")]
    if null is not None and any(null[v].size for v in variants if v in null):
        for pos, v in zip(positions, variants):
            values = null.get(v, np.empty(0))
            ax.scatter(pos + 0.34 + _spread(values.size, 0.12), values, s=18, marker="x", color="0.45", zorder=3)
        handles.append(Line2D([], [], marker="x", ls="", color="0.45", label="null pseudo-guides (controls)"))
    if chance is not None:
        ax.axhline(chance, ls="--", lw=1, color="tab:red")
        handles.append(Line2D([], [], ls="--", color="tab:red", label="chance (0.5)"))
    ax.set_xticks(positions, [variant_label(v) for v in variants])
    ax.set_xlim(-0.6, len(variants) - 0.4 + (0.3 if null is not None else 0.0))
    ax.set_xlabel("Embedding variant")
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(handles=handles, fontsize=8, loc="best")


def _no_data(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=10, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _save(fig: Figure, path: Path, dpi: int) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight")
    return path


def _models(df: pd.DataFrame) -> list[str]:
    models = sorted(df["model"].unique()) if len(df) else []
    return models or [""]


def _per_variant_figure(
    guides: pd.DataFrame, metric: str, ylabel: str, title: str, path: Path, dpi: int,
    show_null: bool, chance: float | None,
) -> Path:
    """One panel per model: the guide-level ``metric`` per variant."""
    models = _models(guides)
    n_var = max((len(ordered_variants(guides.loc[guides["model"] == m, "variant"])) for m in models), default=1)
    fig = Figure(figsize=(max(5.0, 1.5 * n_var + 1.5) * len(models), 4.8))
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    for ax, model in zip(axes, models):
        sub = guides[guides["model"] == model]
        variants = ordered_variants(sub["variant"])
        real = {v: _finite(sub.loc[(sub["variant"] == v) & ~sub["is_null_guide"], metric]) for v in variants}
        null = {v: _finite(sub.loc[(sub["variant"] == v) & sub["is_null_guide"], metric]) for v in variants}
        if not any(a.size for a in real.values()):
            _no_data(ax, f"no guide has a {metric} score")
        else:
            _variant_panel(ax, real, null if show_null else None, ylabel, chance)
        ax.set_title(f"{title}\nmodel: {model}" if model else title, fontsize=10)
    return _save(fig, path, dpi)


def _paired_figure(
    genes: pd.DataFrame, truth: pd.DataFrame | None, path: Path, dpi: int,
    variant: str = "pca_ica", reference: str = "pca",
) -> Path:
    """Gene-level AUROC, ``variant`` (y) vs ``reference`` (x), one panel per model, diagonal y = x."""
    models = _models(genes)
    fig = Figure(figsize=(5.2 * len(models), 5.0))
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    gene_effect = truth.groupby(GENE)["has_effect"].any() if truth is not None else None
    for ax, model in zip(axes, models):
        sub = genes[genes["model"] == model]
        a = sub[sub["variant"] == variant].set_index(GENE)["auroc"]
        b = sub[sub["variant"] == reference].set_index(GENE)["auroc"]
        joined = pd.concat({"y": a, "x": b}, axis=1, join="inner").dropna()
        title = f"Gene AUROC: {variant_label(variant)} vs {variant_label(reference)}"
        ax.set_title(f"{title}\nmodel: {model}" if model else title, fontsize=10)
        if joined.empty:
            _no_data(ax, f"no gene scored in both {variant} and {reference}")
            continue
        lo = float(min(joined.min().min(), 0.5)) - 0.02
        hi = float(max(joined.max().max(), 0.5)) + 0.02
        ax.plot([lo, hi], [lo, hi], ls="--", lw=1, color="0.4", label="y = x (no change)")
        if gene_effect is not None:
            effect = joined.index.map(gene_effect).to_series(index=joined.index).fillna(False).astype(bool)
            for flag, color, label in ((True, "tab:orange", "gene with true effect"),
                                       (False, "tab:blue", "gene without effect")):
                pts = joined[effect == flag]
                if len(pts):
                    ax.scatter(pts["x"], pts["y"], s=28, color=color, label=label, zorder=3)
        else:
            ax.scatter(joined["x"], joined["y"], s=28, color="tab:blue", label="gene", zorder=3)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        ax.set_xlabel(f"{variant_label(reference)}: mean held-out AUROC (unitless)")
        ax.set_ylabel(f"{variant_label(variant)}: mean held-out AUROC (unitless)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    return _save(fig, path, dpi)


def table1_summary(table1: pd.DataFrame) -> pd.DataFrame:
    """Table 1 rows (one per variant and ordered model pair) with the paper's columns first."""
    first = [c for c in ("variant", "model_a", "model_b", "perm", "rigid", "linear", "ica", "ica_efficiency",
                         "cka", "mutual_knn") if c in table1.columns]
    out = table1[first + [c for c in table1.columns if c not in first]].copy()
    order = {v: i for i, v in enumerate(ordered_variants(out["variant"]))} if "variant" in out else {}
    if order:
        out = out.sort_values(["variant", "model_a", "model_b"], key=lambda c: c.map(order) if c.name == "variant" else c)
    return out.reset_index(drop=True)


def identifiability_figure(
    table1: pd.DataFrame | None, structural: pd.DataFrame | None, path: Path, dpi: int = FIGURE_DPI
) -> Path:
    """Left: Table 1 errors (mean over model pairs) per variant and map; right: MCC and InfoM
    of factor recovery per variant (mean over models). A missing side says so."""
    fig = Figure(figsize=(11.0, 4.6))
    left, right = fig.subplots(1, 2)
    maps = [("perm", "permutation"), ("rigid", "rigid"), ("linear", "linear"), ("ica", "ICA")]
    if table1 is not None and len(table1):
        variants = ordered_variants(table1["variant"])
        means = table1.groupby("variant")[[m for m, _ in maps]].mean()
        width = 0.8 / len(maps)
        for i, (col, label) in enumerate(maps):
            left.bar(np.arange(len(variants)) + (i - 1.5) * width, [means.loc[v, col] for v in variants],
                     width, label=label)
        left.set_xticks(np.arange(len(variants)), [variant_label(v) for v in variants])
        left.set_ylabel("held-out mean l2 error / diameter of B")
        left.set_title("Alignment between models (Table 1)")
        left.legend(title="map", fontsize=8)
    else:
        left.text(0.5, 0.5, "one model only: no alignment", ha="center", va="center", transform=left.transAxes)
        left.set_axis_off()
    if structural is not None and len(structural):
        variants = ordered_variants(structural["variant"])
        means = structural.groupby("variant")[["mcc", "infom", "infoe"]].mean()
        width = 0.8 / 3
        for i, (col, label) in enumerate([("mcc", "MCC"), ("infom", "InfoM"), ("infoe", "InfoE")]):
            right.bar(np.arange(len(variants)) + (i - 1) * width, [means.loc[v, col] for v in variants], width,
                      label=label)
        right.set_xticks(np.arange(len(variants)), [variant_label(v) for v in variants])
        right.set_ylim(0, 1)
        right.set_ylabel("score (1 = factors recovered one-to-one)")
        right.set_title("Recovery of the simulated factors")
        right.legend(fontsize=8)
    else:
        right.text(0.5, 0.5, "no ground-truth factors", ha="center", va="center", transform=right.transAxes)
        right.set_axis_off()
    return _save(fig, path, dpi)


VARIANT_COLORS: dict[str, str] = {"base": "tab:gray", "pca": "tab:blue", "pca_ica": "tab:red", "pca_rand": "tab:green"}


def _has_calls(guides: pd.DataFrame) -> bool:
    return "q_value" in guides.columns and np.isfinite(pd.to_numeric(guides["q_value"], errors="coerce")).any()


def _volcano_figure(
    guides: pd.DataFrame, truth: pd.DataFrame | None, path: Path, dpi: int, q_threshold: float
) -> Path:
    """Per model (rows) and variant (columns): AUROC above the null's median vs -log10 q."""
    models = _models(guides)
    variants = ordered_variants(guides["variant"])
    fig = Figure(figsize=(3.6 * max(1, len(variants)), 3.4 * len(models)), layout="constrained")
    axes = fig.subplots(len(models), max(1, len(variants)), squeeze=False)
    effect = (truth.set_index([GENE, GUIDE])["has_effect"].astype(bool) if truth is not None else None)
    for r, model in enumerate(models):
        for c, variant in enumerate(variants):
            ax = axes[r][c]
            ax.set_title(f"{variant_label(variant)}" + (f" - {model}" if model else ""), fontsize=9)
            sub = guides[(guides["model"] == model) & (guides["variant"] == variant)]
            real = sub[~sub["is_null_guide"]]
            null = _finite(sub.loc[sub["is_null_guide"], "auroc"])
            q = pd.to_numeric(real.get("q_value", pd.Series(np.nan, index=real.index)), errors="coerce")
            ok = np.isfinite(q.to_numpy(dtype=float)) & np.isfinite(real["auroc"].to_numpy(dtype=float))
            if not ok.any() or not null.size:
                _no_data(ax, "no q-values (no null)")
                continue
            pts = real[ok]
            x = pts["auroc"].to_numpy(dtype=float) - float(np.median(null))
            y = -np.log10(np.maximum(q.to_numpy(dtype=float)[ok], 1e-300))
            hit = y > -math.log10(q_threshold)
            if effect is not None:
                truth_flag = np.array([bool(effect.get((g, s), False)) for g, s in zip(pts[GENE], pts[GUIDE])])
                for flag, marker, label in ((True, "o", "true effect"), (False, "X", "no true effect")):
                    m = truth_flag == flag
                    ax.scatter(x[m & hit], y[m & hit], s=22, marker=marker, color="tab:red",
                               label=f"hit, {label}", zorder=3)
                    ax.scatter(x[m & ~hit], y[m & ~hit], s=22, marker=marker, color="0.6",
                               label=f"not called, {label}", zorder=2)
            else:
                ax.scatter(x[hit], y[hit], s=22, color="tab:red", label="hit", zorder=3)
                ax.scatter(x[~hit], y[~hit], s=22, color="0.6", label="not called", zorder=2)
            ax.axhline(-math.log10(q_threshold), ls="--", lw=1, color="0.3", label=f"q = {q_threshold:g}")
            ax.axvline(0.0, ls=":", lw=1, color="0.5")
            ax.set_xlabel("AUROC - null median AUROC (unitless)", fontsize=8)
            ax.set_ylabel("-log10 q (BH)", fontsize=8)
            ax.grid(alpha=0.3)
            if r == 0 and c == 0:
                ax.legend(fontsize=6, loc="upper left")
    return _save(fig, path, dpi)


def _null_qq_figure(guides: pd.DataFrame, path: Path, dpi: int) -> Path:
    """Per model: QQ plot of the pseudo-guides' leave-one-out p-values (observed vs uniform),
    one line per variant, with the 95% band of uniform order statistics."""
    models = _models(guides)
    fig = Figure(figsize=(4.8 * len(models), 4.6))
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    for ax, model in zip(axes, models):
        sub = guides[(guides["model"] == model) & guides["is_null_guide"]]
        ax.set_title("Null calibration: pseudo-guides' p-values" + (f"\nmodel: {model}" if model else ""),
                     fontsize=10)
        drawn = False
        n_max = 0
        for variant in ordered_variants(sub["variant"]):
            p = _finite(pd.to_numeric(sub.loc[sub["variant"] == variant].get("p_value", pd.Series(dtype=float)),
                                      errors="coerce"))
            if not p.size:
                continue
            n = p.size
            n_max = max(n_max, n)
            expected = -np.log10((np.arange(1, n + 1) - 0.5) / n)
            observed = -np.log10(np.sort(np.maximum(p, 1e-300)))
            ax.plot(expected, observed, marker="o", ms=3, lw=1, color=VARIANT_COLORS.get(variant),
                    label=f"{variant_label(variant)} (n = {n})")
            drawn = True
        if not drawn:
            _no_data(ax, "no pseudo-guide p-values")
            continue
        k = np.arange(1, n_max + 1)
        lo, hi = stats.beta.ppf(0.975, k, n_max - k + 1), stats.beta.ppf(0.025, k, n_max - k + 1)
        ex = -np.log10((k - 0.5) / n_max)
        ax.fill_between(ex, -np.log10(lo), -np.log10(hi), color="0.85", label="95% band (uniform)")
        top = float(ex.max()) * 1.05
        ax.plot([0, top], [0, top], ls="--", lw=1, color="0.3", label="y = x (calibrated)")
        ax.set_xlabel("expected -log10 p (uniform)")
        ax.set_ylabel("observed -log10 p (leave-one-out)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    return _save(fig, path, dpi)


def make_figures(
    out_dir: Path | str,
    guides: pd.DataFrame,
    genes: pd.DataFrame,
    truth: pd.DataFrame | None = None,
    dpi: int = FIGURE_DPI,
    q_threshold: float = 0.05,
) -> dict[str, Path]:
    """Write the report's PNG figures into ``out_dir``; return them by name.

    ``auroc_by_variant`` (guide AUROC per variant, null pseudo-guides beside, chance line),
    ``paired_pca_ica_vs_pca`` (gene AUROC, coloured by true effect when ``truth`` is given),
    ``sparsity_by_variant`` and ``concentration_by_variant`` (guide level), ``volcano`` (AUROC
    above the null vs -log10 q per variant, hits in red, true effects by marker when ``truth``
    is given) and ``null_qq`` (calibration of the null). Every figure is always written; a
    panel without data says so, so the set of outputs is fixed.
    """
    out_dir = Path(out_dir)
    guides = check_guides(guides)
    genes = check_genes(genes)
    truth = check_truth(truth) if truth is not None else None
    return {
        "auroc_by_variant": _per_variant_figure(
            guides, "auroc", AUROC_LABEL, "Guide AUROC per variant", out_dir / "auroc_by_variant.png", dpi,
            show_null=True, chance=0.5),
        "volcano": _volcano_figure(guides, truth, out_dir / "volcano.png", dpi, q_threshold),
        "null_qq": _null_qq_figure(guides, out_dir / "null_qq.png", dpi),
        "paired_pca_ica_vs_pca": _paired_figure(genes, truth, out_dir / "paired_pca_ica_vs_pca.png", dpi),
        "sparsity_by_variant": _per_variant_figure(
            guides, "sparsity", SPARSITY_LABEL, "Classifier sparsity per variant (real guides)",
            out_dir / "sparsity_by_variant.png", dpi, show_null=False, chance=None),
        "concentration_by_variant": _per_variant_figure(
            guides, "concentration", CONCENTRATION_LABEL, "Concentration per variant (real guides)",
            out_dir / "concentration_by_variant.png", dpi, show_null=False, chance=None),
    }


# --------------------------------------------------------------------------- report files


def _display(df: pd.DataFrame) -> pd.DataFrame:
    """A copy for humans: p-values to 2 significant digits, other floats to 3 decimals, NaN blank."""
    out = df.copy()
    for col in out.columns:
        series = out[col]
        if pd.api.types.is_float_dtype(series):
            is_p = col.endswith("_p") or col.endswith("p_value")
            fmt = "{:.2g}" if is_p else "{:.3f}"
            out[col] = [("" if pd.isna(x) else fmt.format(x)) for x in series]
        else:
            out[col] = ["" if (x is pd.NA or (isinstance(x, float) and math.isnan(x))) else str(x) for x in series]
    return out


def _markdown(df: pd.DataFrame) -> str:
    if df.empty:
        return "_(no rows)_"
    return _display(df).to_markdown(index=False)


def _html_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "<p><em>(no rows)</em></p>"
    return _display(df).to_html(index=False, escape=True, border=0, classes="tbl")


def _write_text(text: str, path: Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def _write_csv(df: pd.DataFrame, path: Path) -> Path:
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)
    return path


def headline(summary: pd.DataFrame, tests: pd.DataFrame, q_threshold: float = 0.05) -> list[str]:
    """Short sentences with the numbers a reader wants first, per model."""
    lines: list[str] = []
    hit_col = f"hits_q<{q_threshold:g}"
    for model in sorted(summary["model"].unique()):
        sub = summary[summary["model"] == model]
        scored = sub[np.isfinite(sub["auroc_mean"].to_numpy(dtype=float))]
        if scored.empty:
            lines.append(f"- Model `{model}`: no guide was scored.")
            continue
        best = scored.loc[scored["auroc_mean"].idxmax()]
        lines.append(f"- Model `{model}`: highest mean guide AUROC with **{variant_label(best['variant'])}** "
                     f"(`{best['variant']}`, {best['auroc_mean']:.3f} over {best['n_guides_scored']} guides).")
        for _, r in sub.iterrows():
            n_hits = r[hit_col] if hit_col in r.index else pd.NA
            hits = ("no null pseudo-guides, no hit calls" if pd.isna(n_hits) else
                    f"**{n_hits}/{r['n_guides_scored']} guides are hits at q < {q_threshold:g}** "
                    f"(null: {r['n_null_guides']} pseudo-guides, mean AUROC {r['null_auroc_mean']:.3f})")
            lines.append(f"  - `{r['variant']}`: mean AUROC {r['auroc_mean']:.3f}, median {r['auroc_median']:.3f}, "
                         f"{r['n_guides_skipped']} skipped; {hits}.")
        t = tests[(tests["model"] == model) & (tests["metric"] == "auroc")]
        for _, r in t.iterrows():
            if r["n"] == 0:
                continue
            p = "no test" if pd.isna(r["p_value"]) else f"Wilcoxon p = {r['p_value']:.2g}"
            ci = ("" if pd.isna(r["ci_low"]) else f", 95% CI [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]")
            lines.append(f"  - gene AUROC `{r['variant']}` - `{r['reference']}` over {r['n']} genes: "
                         f"mean {r['mean_diff']:+.3f}{ci} ({p}).")
    return lines


def lightgbm_table(params: Mapping[str, Any]) -> pd.DataFrame:
    """The LightGBM parameters every classifier used, one row each, marking Table 6's."""
    table6 = {"is_unbalance", "learning_rate", "num_leaves", "feature_fraction", "lambda_l1", "lambda_l2"}
    return pd.DataFrame({"parameter": list(params), "value": [_format_value(v) for v in params.values()],
                         "source": ["Table 6" if k in table6 else "phenoica (determinism, threads, objective)"
                                    if k in ("deterministic", "force_col_wise", "num_threads", "verbosity",
                                             "objective", "seed") else "override"
                                    for k in params]})


def write_report(
    out_dir: Path | str,
    rows: pd.DataFrame,
    guides: pd.DataFrame,
    genes: pd.DataFrame,
    map_df: pd.DataFrame | None = None,
    truth: pd.DataFrame | None = None,
    fit_report: Mapping[str, Any] | None = None,
    table1: pd.DataFrame | None = None,
    structural: pd.DataFrame | None = None,
    hits: pd.DataFrame | None = None,
    null: pd.DataFrame | None = None,
    lightgbm: Mapping[str, Any] | None = None,
    q_threshold: float = 0.05,
    seed: int = 0,
    title: str = "phenoica report",
    tables_dir: str = "tables",
    figures_dir: str = "figures",
    extra: tuple[list[tuple[str, str, pd.DataFrame]], Mapping[str, tuple[Path, str]]] | None = None,
) -> dict[str, Path]:
    """Write every report file (atomically) and return them by name.

    ``out_dir/report.md`` and ``out_dir/index.html`` link to CSVs in ``out_dir/{tables_dir}``
    and PNGs in ``out_dir/{figures_dir}`` (empty names put everything in ``out_dir``).
    Always: table3, table4, variant_summary, paired_tests, classifier_cost, skips, skip_counts
    (.csv) and the figures of ``make_figures``. When ``guides`` carry hit calls (``q_value``):
    hit_counts and gene_hits; with ``hits`` (``phenoica.hits.hit_table``): the hit table and,
    with ``map_df``, readout_agreement; with ``null``: null_calibration; with ``truth``:
    truth_checks and (with calls) recall_fdr; with ``map_df``: map_summary; with
    ``lightgbm``: the parameters used; with ``fit_report``: transform_fit; with ``table1``
    (model-to-model alignment) and/or ``structural`` (factor recovery): those tables and the
    ``identifiability`` figure.
    """
    out_dir = Path(out_dir)
    rows, guides, genes = check_rows(rows), check_guides(guides), check_genes(genes)
    calls = _has_calls(guides)
    tables: dict[str, pd.DataFrame] = {
        "variant_summary": variant_summary(guides, (q_threshold, 0.1) if q_threshold != 0.1 else (0.05, 0.1)),
        "table3": table3(genes),
        "table4": table4(rows),
        "paired_tests": paired_tests(genes, seed=seed),
        "classifier_cost": classifier_cost(rows),
        "skips": skipped_rows(rows),
        "skip_counts": skip_counts(rows),
    }
    if calls:
        tables["hit_counts"] = H.hit_counts(guides, genes, tuple(sorted({q_threshold, 0.05, 0.1})))
        gene_cols = ["model", "variant", GENE, "n_guides", "n_guides_hit", "auroc", "p_value", "q_value", "hit"]
        tables["gene_hits"] = genes[[c for c in gene_cols if c in genes.columns]].sort_values(
            ["model", "variant", "q_value"], kind="stable").reset_index(drop=True)
    if hits is not None and len(hits):
        tables["hits"] = hits.sort_values(["model", "variant", "q_value"], kind="stable").reset_index(drop=True)
        if map_df is not None and len(map_df):
            tables["readout_agreement"] = H.readout_agreement(hits)
    if null is not None and len(null):
        tables["null_calibration"] = null.copy()
    if map_df is not None and len(map_df):
        tables["map_summary"] = map_summary(map_df, q_threshold)
    if truth is not None:
        tables["truth_checks"] = truth_checks(guides, truth)
        tables.update(truth_recovery(guides, truth, structural, seed=seed))
        if calls:
            tables["recall_fdr"] = H.recall_fdr(guides, check_truth(truth), tuple(sorted({q_threshold, 0.05, 0.1})))
    if lightgbm is not None:
        tables["lightgbm_parameters"] = lightgbm_table(lightgbm)
    if fit_report is not None:
        tables["transform_fit"] = fit_report_table(fit_report)
    if table1 is not None and len(table1):
        tables["table1_alignment"] = table1_summary(table1)
    if structural is not None and len(structural):
        tables["structural"] = structural.copy()

    written: dict[str, Path] = {
        name: _write_csv(df, out_dir / tables_dir / f"{name}.csv") for name, df in tables.items()}
    figures = make_figures(out_dir / figures_dir, guides, genes, truth=truth, q_threshold=q_threshold)
    if "table1_alignment" in tables or "structural" in tables:
        figures["identifiability"] = identifiability_figure(
            tables.get("table1_alignment"), tables.get("structural"), out_dir / figures_dir / "identifiability.png")
    written.update(figures)

    def rel(path: Path) -> str:
        return path.relative_to(out_dir).as_posix()

    n_ok = int((rows["status"] == OK).sum())
    variants = ordered_variants(pd.concat([rows["variant"], guides["variant"], genes["variant"]]))
    intro = (f"Models: {', '.join(f'`{m}`' for m in sorted(set(guides['model']) | set(rows['model'])))}. "
             f"Variants: {', '.join(f'`{v}` ({variant_label(v)})' for v in variants)}. "
             f"Guide-folds: {n_ok} scored, {len(rows) - n_ok} skipped. "
             f"Real guides: {guides.loc[~guides['is_null_guide'], GUIDE].nunique()}; "
             f"genes: {genes[GENE].nunique()}; null pseudo-guides: "
             f"{guides.loc[guides['is_null_guide'], GUIDE].nunique()}.")
    sections: list[tuple[str, str, pd.DataFrame]] = []
    if calls:
        sections.append(("Hit calls", (
            f"A guide's p-value is its held-out AUROC against the AUROCs of the null pseudo-guides (whole control "
            f"wells laid out like real guides, scored by the same classifier) of the same model and variant; "
            f"q-values are Benjamini-Hochberg over guides. A gene's p-value combines its guides' (Cauchy "
            f"combination, ACAT); `n_guides_hit` counts its guides with q < {q_threshold:g}."), tables["hit_counts"]))
        shown = tables.get("hits", pd.DataFrame())
        if len(shown):
            called = shown[shown["hit"] | shown["map_hit"]]
            sections.append(("Hit table (guides called by either readout)",
                             f"Every guide with both readouts is in `{rel(written['hits'])}`; "
                             f"`agreement` compares the classifier's call with the mAP readout's.",
                             called.head(200)))
        sections.append(("Gene calls", f"All genes: `{rel(written['gene_hits'])}`.",
                         tables["gene_hits"][tables["gene_hits"]["hit"]].head(200)))
    if "recall_fdr" in tables:
        sections.append(("Hit calls against the simulated truth (demo)",
                         "Recall of the guides (genes) with a true effect and the observed false discovery rate "
                         "among the calls, at each q threshold. Reported as measured.", tables["recall_fdr"]))
    if "null_calibration" in tables:
        sections.append(("Null calibration",
                         "The null per model and variant: pseudo-guides scored and skipped, their logit-AUROC fit, "
                         "Shapiro-Wilk normality of the logit AUROCs, and the uniformity (Kolmogorov-Smirnov) of "
                         "their leave-one-out p-values; see the QQ figure.", tables["null_calibration"]))
    if "readout_agreement" in tables:
        sections.append(("Agreement between the readouts",
                         "Guides called by the classifier (AUROC q) and by phenotypic activity (mAP q), Cohen's "
                         "kappa of the two calls and the Spearman correlation of AUROC with mAP.",
                         tables["readout_agreement"]))
    sections += [
        ("Variant summary", "Guide-level means per variant, the null's size and mean, and hits per q threshold.",
         tables["variant_summary"]),
        ("Table 3: mean AUROC and sparsity per gene",
         "Gene scores are means over the gene's guides; the `mean` row averages the genes scored in "
         "every variant.", tables["table3"]),
        ("Table 4: concentration per variant",
         "Over scored guide-folds of real guides: AUROC(top-k features) / AUROC(rest) - 1.", tables["table4"]),
        ("Comparisons between variants (over genes)",
         "Effect size = mean gene-level difference (variant - reference) with a 95% percentile-bootstrap interval "
         "over genes; two-sided Wilcoxon signed-rank p; no multiple-testing correction.", tables["paired_tests"]),
    ]
    if "truth_checks" in tables:
        sections.append(("Checks against the simulated truth (demo)",
                         "Reported as measured. Effect guides vs guides of genes without effect (one-sided "
                         "Mann-Whitney); no-effect guides vs 0.5 (t-test) and vs the null pseudo-guides.",
                         tables["truth_checks"]))
    if "truth_recovery" in tables:
        sections += [
            ("Recovery of the simulated truth (demo)",
             "Probe R^2: held-out (5-fold) ridge probe from the latents to the factors genes shift. Separation: "
             "mean AUROC of effect guides minus no-effect guides, 95% bootstrap interval over genes; "
             "auc_effect_vs_no_effect = P(effect guide > no-effect guide); one-sided Mann-Whitney p over guides.",
             tables["truth_recovery"]),
            ("Variant contrasts against the truth (demo)",
             "delta_separation: change in effect - no-effect separation, variant minus reference (paired "
             "bootstrap over genes); delta_effect_auroc: mean paired difference over effect genes, its "
             "interval, Cohen's d_z and Wilcoxon p. Reported as measured.", tables["variant_contrasts"]),
        ]
    if "map_summary" in tables:
        sections.append(("Phenotypic activity (copairs mAP)",
                         "Mean average precision of each guide's wells against the control wells of their plates; "
                         "p-values from copairs' null, BH q-values over guides.", tables["map_summary"]))
    sections.append(("Classification cost",
                     "LightGBM models trained per model and variant: 3 per scored guide-fold with concentration "
                     "(full, top-k, rest), 1 otherwise; the null's pseudo-guides train 1. `null_share` is the null's "
                     "share of the classification work.", tables["classifier_cost"]))
    if "lightgbm_parameters" in tables:
        sections.append(("LightGBM parameters used",
                         "PAPER.md Table 6; every parameter not listed is at LightGBM's own default.",
                         tables["lightgbm_parameters"]))
    if "transform_fit" in tables:
        sections.append(("Transform fit", "", tables["transform_fit"]))
    if "table1_alignment" in tables:
        sections.append(("Table 1: alignment between models",
                         "Held-out mean l2 error of A's embeddings mapped onto B's, divided by the diameter of "
                         "B's; ICA efficiency = (perm - ica) / (perm - rigid). Expected on a real pair: "
                         "linear <= rigid <= ICA <= permutation.", tables["table1_alignment"]))
    if "structural" in tables:
        sections.append(("Structural identifiability: recovery of the simulated factors",
                         "MCC = mean |correlation| after Hungarian matching; R^2 of a linear map latents -> "
                         "factors; InfoM/InfoE/InfoC of Hsu et al. (read InfoM/InfoC only beside a high InfoE).",
                         tables["structural"][[c for c in tables["structural"].columns
                                               if "r2_factor" not in str(c)]]))
    sections.append(("Skipped guide-folds", f"Counts by reason; every skipped row is in `{rel(written['skips'])}`.",
                     tables["skip_counts"]))
    captions = {
        "auroc_by_variant": "Guide AUROC per variant (null pseudo-guides as grey crosses)",
        "volcano": f"Hits per variant: AUROC above the null's median vs -log10 q (dashed: q = {q_threshold:g})",
        "null_qq": "Calibration: the pseudo-guides' leave-one-out p-values against the uniform",
        "paired_pca_ica_vs_pca": "Gene AUROC, PCA + ICA vs PCA",
        "sparsity_by_variant": "Classifier sparsity per variant",
        "concentration_by_variant": "Concentration per variant",
        "identifiability": "Identifiability: model-to-model alignment error and factor recovery per variant",
    }
    if extra is not None:  # issue 15 hook: sections and figures written by phenoica.biomap_report
        sections += extra[0]
        figures.update({name: path for name, (path, _) in extra[1].items()})
        captions.update({name: caption for name, (_, caption) in extra[1].items()})
    lines = headline(tables["variant_summary"], tables["paired_tests"], q_threshold)

    md = [f"# {title}", "", intro, "", "## Headline", ""]
    md += lines or ["No scores."]
    for heading, note, df in sections:
        md += ["", f"## {heading}", ""] + ([note, ""] if note else []) + [_markdown(df)]
    md += ["", "## Figures", ""]
    for name, path in figures.items():
        md += [f"![{captions[name]}]({rel(path)})", ""]
    md += ["## Files", ""] + [f"- [{p.name}]({rel(p)})" for p in written.values() if p.suffix == ".csv"]
    written["report_md"] = _write_text("\n".join(md) + "\n", out_dir / "report.md")

    esc = html.escape
    body = [f"<h1>{esc(title)}</h1>", f"<p>{esc(intro).replace('`', '')}</p>", "<h2>Headline</h2>", "<ul>"]
    body += [f"<li>{esc(line.strip().lstrip('- ')).replace('`', '').replace('**', '')}</li>" for line in lines]
    body.append("</ul>")
    for heading, note, df in sections:
        body += [f"<h2>{esc(heading)}</h2>"] + ([f"<p>{esc(note).replace('`', '')}</p>"] if note else []) + [_html_table(df)]
    body.append("<h2>Figures</h2>")
    for name, path in figures.items():
        body.append(f'<figure><img src="{esc(rel(path))}" alt="{esc(captions[name])}">'
                    f"<figcaption>{esc(captions[name])}</figcaption></figure>")
    body.append("<h2>Files</h2><ul>")
    body += [f'<li><a href="{esc(rel(p))}">{esc(p.name)}</a></li>' for p in written.values() if p.suffix == ".csv"]
    body.append("</ul>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table.tbl{border-collapse:collapse;font-size:0.85em;margin-bottom:1em}"
             "table.tbl td,table.tbl th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
             "img{max-width:100%}figure{margin:1em 0}")
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{style}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")
    written["index_html"] = _write_text(page, out_dir / "index.html")
    return written
