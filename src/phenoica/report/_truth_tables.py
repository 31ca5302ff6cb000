"""The report's checks against a simulated truth (demo screens), reported as measured: effect
guides against no-effect guides and the null, and the truth's recovery end to end (statistics in
:mod:`phenoica.report._truth_stats`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from phenoica.report import _truth_stats as demo_truth
from phenoica.report._checks import check_guides, check_truth, mean_or_nan, model_variants, ordered_variants
from phenoica.utils import finite_values


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
    merged = demo_truth.effect_groups(guides, truth, keep=("efficacy",))
    records = []
    for model, variant in model_variants(guides):
        sel = merged[(merged["model"] == model) & (merged["variant"] == variant)]
        eff = sel.loc[sel["group"] == demo_truth.EFFECT, "auroc"].to_numpy(dtype=float)
        none = sel.loc[sel["group"] == demo_truth.NO_EFFECT, "auroc"].to_numpy(dtype=float)
        nulls = guides[(guides["model"] == model) & (guides["variant"] == variant) & guides["is_null_guide"]]
        null_auroc = finite_values(nulls["auroc"])
        notes = []
        row: dict[str, Any] = {
            "model": model,
            "variant": variant,
            "n_effect": int(eff.size),
            "n_no_effect": int(none.size),
            "auroc_effect_mean": mean_or_nan(eff),
            "auroc_no_effect_mean": mean_or_nan(none),
            "effect_minus_no_effect": mean_or_nan(eff) - mean_or_nan(none),
            "mannwhitney_u": math.nan,
            "mannwhitney_p": math.nan,
            "effect_gt_no_effect": pd.NA,
            "no_effect_vs_half_t": math.nan,
            "no_effect_vs_half_p": math.nan,
            "null_auroc_mean": mean_or_nan(null_auroc),
            "no_effect_vs_null_p": math.nan,
            "efficacy_spearman_rho": math.nan,
            "efficacy_spearman_p": math.nan,
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
        eff_rows = sel[sel["group"] == demo_truth.EFFECT]
        efficacy = eff_rows["efficacy"].to_numpy(dtype=float)
        ok = np.isfinite(efficacy)
        if ok.sum() >= 3 and np.ptp(efficacy[ok]) > 0 and np.ptp(eff[ok]) > 0:
            sp = stats.spearmanr(efficacy[ok], eff[ok])
            row["efficacy_spearman_rho"], row["efficacy_spearman_p"] = float(sp.statistic), float(sp.pvalue)
        else:
            notes.append("fewer than 3 effect guides with varying efficacy and AUROC; no correlation")
        row["note"] = "; ".join(notes)
        records.append(row)
    return pd.DataFrame.from_records(
        records,
        columns=[
            "model",
            "variant",
            "n_effect",
            "n_no_effect",
            "auroc_effect_mean",
            "auroc_no_effect_mean",
            "effect_minus_no_effect",
            "mannwhitney_u",
            "mannwhitney_p",
            "effect_gt_no_effect",
            "no_effect_vs_half_t",
            "no_effect_vs_half_p",
            "null_auroc_mean",
            "no_effect_vs_null_p",
            "efficacy_spearman_rho",
            "efficacy_spearman_p",
            "note",
        ],
    )


def truth_recovery(
    guides_df: pd.DataFrame, truth: pd.DataFrame, structural: pd.DataFrame | None = None, *, seed: int = 0
) -> dict[str, pd.DataFrame]:
    """Demo screens: is the simulated truth recovered end to end? Two tables, as measured
    (statistics in ``phenoica.report._truth_stats``; bootstrap intervals resample genes, seeded by ``seed``).

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
            ["model", "variant", "n_shifted_factors", "probe_r2_shifted", "probe_r2_other"]
        ]
        table = probe.merge(table, on=["model", "variant"], how="outer")
    order = {v: i for i, v in enumerate(ordered_variants(table["variant"]))}
    table = table.sort_values(["model", "variant"], key=lambda c: c.map(order) if c.name == "variant" else c)
    return {
        "truth_recovery": table.reset_index(drop=True),
        "variant_contrasts": demo_truth.variant_contrasts(guides, truth, seed=seed),
    }
