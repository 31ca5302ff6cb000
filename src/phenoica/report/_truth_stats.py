"""Checks of a run against a simulated screen's ground truth (the demo).

Three questions, each answered per (model, variant) with an effect size and an interval:

- Does the representation see the biology? ``probe_table``: held-out R^2 of a ridge linear
  probe (``phenoica.identifiability.probe_r2``) from the latents to the factors that genes shift
  (``shifted_factors``), read from the ``structural`` table's ``probe_r2_factor_*`` columns.
- Do the scores find the genes with an effect? ``effect_separation``: mean held-out AUROC of
  effect guides minus that of guides of genes without effect, a bootstrap interval over genes
  (genes resampled within each group, each with all its guides), the one-sided Mann-Whitney
  p over guides and its common-language effect size ``U / (n_effect * n_no_effect)``.
- Does a variant separate them better than another? ``variant_contrasts``: for pairs of
  variants of one model, the difference in that separation and the paired difference in mean
  AUROC of effect genes, each with a bootstrap interval over genes, plus the paired
  standardized effect size (Cohen's d_z) over effect genes.

The bootstrap resamples genes, not guides: guides of one gene share its effect, so genes are
the independent units. Pure functions on the workflow's tables; seeds are arguments.
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from phenoica.contract import GENE, GUIDE, ScreenError

EFFECT = "effect"
NO_EFFECT = "no_effect"
OTHER = "other"
PROBE_PREFIX = "probe_r2_"
#: Variant pairs compared by ``variant_contrasts`` (variant, reference): ICA over whitening
#: alone, ICA over a random rotation (the "any rotation" control), and whitening over a random
#: rotation.
CONTRASTS: tuple[tuple[str, str], ...] = (("pca_ica", "pca"), ("pca_ica", "pca_rand"), ("pca", "pca_rand"))
_AFFECTED = re.compile(r"^(factor_\d+)[+-]$")


def shifted_factors(truth: pd.DataFrame) -> list[str]:
    """Names of the factors some gene with an effect shifts (``factor_XX``), sorted.

    Read from the truth table's ``affected_factors`` column (``"factor_01+,factor_07-"``);
    an entry in another form is an error naming its row.
    """
    for col in ("has_effect", "affected_factors"):
        if col not in truth.columns:
            raise ScreenError(
                f"truth table: missing column {col!r}; expected the table phenoica.screen.demo.gene_truth writes"
            )
    names: set[str] = set()
    for row, (effect, text) in enumerate(zip(truth["has_effect"], truth["affected_factors"].fillna(""))):
        if not bool(effect):
            continue
        for item in filter(None, str(text).split(",")):
            match = _AFFECTED.match(item.strip())
            if match is None:
                raise ScreenError(f"truth table row {row}: affected_factors item {item!r} is not like 'factor_01+'")
            names.add(match.group(1))
    return sorted(names)


def probe_table(structural: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """Probe R^2 of the gene-shifted factors per (model, variant), from the structural table.

    Columns: model, variant, n_shifted_factors, probe_r2_shifted (mean over the shifted
    factors), probe_r2_shifted_min, probe_r2_other (mean over factors no gene shifts; NaN if
    none), probe_r2_all.
    """
    shifted = shifted_factors(truth)
    probe_cols = [c for c in structural.columns if str(c).startswith(f"{PROBE_PREFIX}factor_")]
    if not probe_cols:
        raise ScreenError(
            f"structural table: no {PROBE_PREFIX}factor_* columns (run identifiability.structural_scores)"
        )
    factors = [c[len(PROBE_PREFIX) :] for c in probe_cols]
    missing = sorted(set(shifted) - set(factors))
    if missing:
        raise ScreenError(f"structural table: no probe R^2 for shifted factor(s) {missing}")
    on = [f"{PROBE_PREFIX}{f}" for f in shifted]
    off = [c for c in probe_cols if c not in on]
    out = structural[["model", "variant"]].copy()
    out["n_shifted_factors"] = len(on)
    out["probe_r2_shifted"] = structural[on].mean(axis=1) if on else math.nan
    out["probe_r2_shifted_min"] = structural[on].min(axis=1) if on else math.nan
    out["probe_r2_other"] = structural[off].mean(axis=1) if off else math.nan
    out["probe_r2_all"] = structural[probe_cols].mean(axis=1)
    return out.reset_index(drop=True)


def effect_groups(guides: pd.DataFrame, truth: pd.DataFrame, keep: Sequence[str] = ()) -> pd.DataFrame:
    """Real guides (not null pseudo-guides) with finite AUROC, joined to the truth, with ``group``.

    ``group`` is ``effect`` (the guide has a true effect), ``no_effect`` (no guide of its gene
    has one) or ``other`` (a guide without effect of a gene with an effect elsewhere, left out
    of both). Columns: model, variant, gene, guide, is_null_guide, auroc, has_effect, the truth
    columns named in ``keep`` (e.g. ``("efficacy",)``) and group. A real guide the truth table
    has no row for is an error naming it.
    """
    needed = ["model", "variant", GENE, GUIDE, "is_null_guide", "auroc"]
    missing = [c for c in needed if c not in guides.columns]
    if missing:
        raise ScreenError(f"guide scores: missing column(s) {missing}")
    truth_cols = [GENE, GUIDE, "has_effect", *keep]
    missing = [c for c in truth_cols if c not in truth.columns]
    if missing:
        raise ScreenError(f"truth table: missing column(s) {missing}")
    real = guides.loc[~guides["is_null_guide"].astype(bool), needed]
    known = truth[truth_cols].drop_duplicates([GENE, GUIDE])
    merged = real.merge(known, on=[GENE, GUIDE], how="left")
    unknown = merged.loc[merged["has_effect"].isna(), [GENE, GUIDE]].drop_duplicates()
    if len(unknown):
        shown = [f"{g}/{s}" for g, s in unknown.head(5).itertuples(index=False)]
        raise ScreenError(f"truth table: no row for {len(unknown)} scored guide(s), e.g. {shown}")
    merged = merged[np.isfinite(merged["auroc"].to_numpy(dtype=float))].reset_index(drop=True)
    effect = merged["has_effect"].astype(bool)
    gene_has = merged[GENE].map(truth.groupby(GENE)["has_effect"].any()).astype(bool)
    merged["group"] = np.where(effect, EFFECT, np.where(~gene_has, NO_EFFECT, OTHER))
    return merged


def _gene_sums(sel: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per gene: (sum of its guides' AUROC, number of guides)."""
    g = sel.groupby(GENE)["auroc"].agg(["sum", "count"])
    return g["sum"].to_numpy(float), g["count"].to_numpy(float)


def _boot_mean(sums: np.ndarray, counts: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Guide-level mean AUROC of resampled genes (rows of ``idx`` index genes)."""
    return sums[idx].sum(axis=1) / counts[idx].sum(axis=1)


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def effect_separation(
    guides: pd.DataFrame, truth: pd.DataFrame, *, n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Effect vs no-effect guides per (model, variant): means, difference with a bootstrap
    interval over genes, one-sided Mann-Whitney (effect > no effect) over guides and its
    common-language effect size ``auc_effect_vs_no_effect`` = U / (n_effect * n_no_effect)
    (the probability that an effect guide outscores a no-effect guide; 0.5 = none)."""
    merged = effect_groups(guides, truth)
    rng = np.random.default_rng(seed)
    records = []
    for (model, variant), sel in merged.groupby(["model", "variant"], sort=True):
        eff, none = sel[sel["group"] == EFFECT], sel[sel["group"] == NO_EFFECT]
        row: dict[str, Any] = {
            "model": model,
            "variant": variant,
            "n_effect_genes": eff[GENE].nunique(),
            "n_no_effect_genes": none[GENE].nunique(),
            "n_effect_guides": len(eff),
            "n_no_effect_guides": len(none),
            "auroc_effect": eff["auroc"].mean() if len(eff) else math.nan,
            "auroc_no_effect": none["auroc"].mean() if len(none) else math.nan,
        }
        row["separation"] = row["auroc_effect"] - row["auroc_no_effect"]
        row["separation_lo"] = row["separation_hi"] = math.nan
        row["auc_effect_vs_no_effect"] = row["mannwhitney_p"] = math.nan
        if len(eff) and len(none):
            (se, ce), (sn, cn) = _gene_sums(eff), _gene_sums(none)
            boot = _boot_mean(se, ce, rng.integers(0, len(se), (n_boot, len(se)))) - _boot_mean(
                sn, cn, rng.integers(0, len(sn), (n_boot, len(sn)))
            )
            row["separation_lo"], row["separation_hi"] = _interval(boot, level)
            mw = stats.mannwhitneyu(eff["auroc"], none["auroc"], alternative="greater")
            row["auc_effect_vs_no_effect"] = float(mw.statistic) / (len(eff) * len(none))
            row["mannwhitney_p"] = float(mw.pvalue)
        records.append(row)
    return pd.DataFrame.from_records(records)


def variant_contrasts(
    guides: pd.DataFrame,
    truth: pd.DataFrame,
    pairs: Sequence[tuple[str, str]] = CONTRASTS,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Variant vs reference per model (pairs absent from the scores are skipped).

    ``delta_separation``: (effect - no-effect mean AUROC) in the variant minus the same in the
    reference, with a bootstrap interval over genes (the same resampled genes for both
    variants, so the interval is paired). ``delta_effect_auroc``: mean over effect genes of
    the variant's minus the reference's gene AUROC (mean of the gene's effect guides), with its
    bootstrap interval, Cohen's d_z (mean / SD of the per-gene differences) and the two-sided
    Wilcoxon signed-rank p.
    """
    merged = effect_groups(guides, truth)
    records = []
    for model, by_model in merged.groupby("model", sort=True):
        present = set(by_model["variant"])
        for variant, reference in pairs:
            if variant not in present or reference not in present:
                continue
            rng = np.random.default_rng(seed)
            gene_auroc = (
                by_model[by_model["group"].isin([EFFECT, NO_EFFECT])]
                .groupby([GENE, "group", "variant"])["auroc"]
                .agg(["sum", "count"])
                .reset_index()
            )
            wide = gene_auroc.pivot_table(index=[GENE, "group"], columns="variant", values=["sum", "count"])
            wide = wide.dropna(subset=[("sum", variant), ("sum", reference)])
            group = wide.index.get_level_values("group").to_numpy()
            row: dict[str, Any] = {
                "model": model,
                "variant": variant,
                "reference": reference,
                "n_effect_genes": int((group == EFFECT).sum()),
                "n_no_effect_genes": int((group == NO_EFFECT).sum()),
            }
            sums = {v: wide[("sum", v)].to_numpy(float) for v in (variant, reference)}
            counts = {v: wide[("count", v)].to_numpy(float) for v in (variant, reference)}
            e_idx, n_idx = np.flatnonzero(group == EFFECT), np.flatnonzero(group == NO_EFFECT)

            def separation(v: str, e: np.ndarray, n: np.ndarray) -> np.ndarray:
                return _boot_mean(sums[v], counts[v], e) - _boot_mean(sums[v], counts[v], n)

            row.update(delta_separation=math.nan, delta_separation_lo=math.nan, delta_separation_hi=math.nan)
            if e_idx.size and n_idx.size:
                point = (
                    separation(variant, e_idx[None], n_idx[None]) - separation(reference, e_idx[None], n_idx[None])
                )[0]
                e_boot = e_idx[rng.integers(0, e_idx.size, (n_boot, e_idx.size))]
                n_boot_idx = n_idx[rng.integers(0, n_idx.size, (n_boot, n_idx.size))]
                boot = separation(variant, e_boot, n_boot_idx) - separation(reference, e_boot, n_boot_idx)
                row["delta_separation"] = float(point)
                row["delta_separation_lo"], row["delta_separation_hi"] = _interval(boot, level)
            diff = (sums[variant] / counts[variant] - sums[reference] / counts[reference])[e_idx]
            row.update(
                delta_effect_auroc=math.nan,
                delta_effect_auroc_lo=math.nan,
                delta_effect_auroc_hi=math.nan,
                cohens_dz=math.nan,
                wilcoxon_p=math.nan,
            )
            if diff.size:
                row["delta_effect_auroc"] = float(diff.mean())
                boot = diff[rng.integers(0, diff.size, (n_boot, diff.size))].mean(axis=1)
                row["delta_effect_auroc_lo"], row["delta_effect_auroc_hi"] = _interval(boot, level)
            if diff.size >= 2 and diff.std(ddof=1) > 0:
                row["cohens_dz"] = float(diff.mean() / diff.std(ddof=1))
                row["wilcoxon_p"] = float(stats.wilcoxon(diff).pvalue)
            records.append(row)
    return pd.DataFrame.from_records(records)


def paired_effect_contrast(
    guides: pd.DataFrame,
    truth: pd.DataFrame,
    metric: str,
    pairs: Sequence[tuple[str, str]] = CONTRASTS,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Variant minus reference in ``metric`` (a guide-level column: ``auroc``,
    ``concentration``, ``sparsity``) over the effect genes, paired: per gene the mean over its
    effect guides, the mean of the per-gene differences with a bootstrap interval over genes.
    Genes missing or non-finite in either variant are left out (``n_genes`` counts the rest).
    Columns: model, variant, reference, metric, n_genes, mean_variant, mean_reference, delta,
    delta_lo, delta_hi."""
    if metric not in guides.columns:
        raise ScreenError(f"guide scores: no column {metric!r}")
    merged = effect_groups(guides, truth)
    values = guides.set_index(["model", "variant", GENE, GUIDE])[metric]
    merged["value"] = values.reindex(pd.MultiIndex.from_frame(merged[["model", "variant", GENE, GUIDE]])).to_numpy()
    eff = merged[(merged["group"] == EFFECT) & np.isfinite(merged["value"].to_numpy(dtype=float))]
    per_gene = eff.groupby(["model", GENE, "variant"])["value"].mean().unstack("variant")
    records = []
    for model in sorted(eff["model"].unique()):
        wide = per_gene.loc[model]
        for variant, reference in pairs:
            if variant not in wide.columns or reference not in wide.columns:
                continue
            both = wide[[variant, reference]].dropna()
            diff = (both[variant] - both[reference]).to_numpy(float)
            row: dict[str, Any] = {
                "model": model,
                "variant": variant,
                "reference": reference,
                "metric": metric,
                "n_genes": int(diff.size),
                "mean_variant": float(both[variant].mean()) if diff.size else math.nan,
                "mean_reference": float(both[reference].mean()) if diff.size else math.nan,
                "delta": float(diff.mean()) if diff.size else math.nan,
                "delta_lo": math.nan,
                "delta_hi": math.nan,
            }
            if diff.size >= 2:
                rng = np.random.default_rng(seed)
                boot = diff[rng.integers(0, diff.size, (n_boot, diff.size))].mean(axis=1)
                row["delta_lo"], row["delta_hi"] = _interval(boot, level)
            records.append(row)
    return pd.DataFrame.from_records(records)


def source_mcc(components: np.ndarray, sources: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean correlation coefficient (MCC) between latent components and true sources: the
    absolute Pearson correlation of every (source, component) pair, sources matched one-to-one
    to components by the Hungarian algorithm (maximum total |correlation|), then the mean over
    the sources. A source left without a component (fewer components than sources) scores 0.
    Returns (MCC, the matched |correlation| of each source)."""
    from scipy.optimize import linear_sum_assignment

    Z = np.asarray(components, dtype=np.float64)
    S = np.asarray(sources, dtype=np.float64)
    if Z.shape[0] != S.shape[0] or Z.ndim != 2 or S.ndim != 2:
        raise ValueError(f"source_mcc: components {Z.shape} and sources {S.shape} must be (rows x k) of equal rows")
    Zs = (Z - Z.mean(0)) / np.where(Z.std(0) > 0, Z.std(0), 1.0)
    Ss = (S - S.mean(0)) / np.where(S.std(0) > 0, S.std(0), 1.0)
    corr = np.abs(Ss.T @ Zs) / Z.shape[0]
    rows, cols = linear_sum_assignment(corr, maximize=True)
    matched = np.zeros(S.shape[1])
    matched[rows] = corr[rows, cols]
    return float(matched.mean()), matched
