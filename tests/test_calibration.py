"""Calibration of the hit calls end to end: the real classifier, the real null design, the real
p- and q-values, on embedding-level screens with well and batch structure.

A screen where no guide has an effect must give uniform guide p-values and (almost) no calls;
a screen with known effects must call them at an observed FDR near the nominal level.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from phenoica.classify import classify_guides, leave_one_batch_out, null_guide_design
from phenoica.contract import BATCH, CONTROL, GENE, GUIDE, IMAGE_INDEX, PERT_TYPE, PERTURBATION, PLATE, SITE, WELL
from phenoica.hits import _calls as H
from phenoica.hits import _truth as C
from phenoica.hits import summarize_scores
from tests.test_classify import classify_options

CFG = {"num_boost_round": 50, "n_null_guides": 100, "concentration": False, "lightgbm": {"num_threads": 1}}


def null_screen(
    seed: int,
    n_guides: int = 240,
    effect_every: int = 0,
    effect: float = 1.5,
    n_batches: int = 4,
    plates: int = 2,
    control_wells: int = 24,
    sites: int = 2,
    d: int = 16,
) -> pd.DataFrame:
    """Embeddings with batch, plate and well effects; guides of one well per plate.

    Every ``effect_every``-th guide (0 = none) shifts 3 of the ``d`` features by ``effect`` SD.
    Control and guide wells are drawn from the same distribution otherwise.
    """
    rng = np.random.default_rng(seed)
    rows, X = [], []
    for b in range(n_batches):
        batch_shift = 0.8 * rng.standard_normal(d)
        for p in range(plates):
            plate_shift = batch_shift + 0.3 * rng.standard_normal(d)
            wells = [("NTC", "NTC_1", CONTROL, 0.0)] * control_wells
            wells += [
                (
                    f"G{g // 2:04d}",
                    f"G{g // 2:04d}_{g % 2}",
                    PERTURBATION,
                    effect if effect_every and g % effect_every == 0 else 0.0,
                )
                for g in range(n_guides)
            ]
            for w, (gene, guide, ptype, shift) in enumerate(wells):
                well_mean = plate_shift + 0.3 * rng.standard_normal(d)
                well_mean[:3] += shift
                for s in range(sites):
                    rows.append((f"B{b}", f"B{b}P{p}", f"W{w:04d}", s, gene, guide, ptype))
                    X.append(well_mean + rng.laplace(size=d))
    t = pd.DataFrame(rows, columns=[BATCH, PLATE, WELL, SITE, GENE, GUIDE, PERT_TYPE])
    t[IMAGE_INDEX] = t.groupby(PLATE).cumcount()
    X = np.asarray(X, dtype=np.float32)
    return pd.concat([t, pd.DataFrame(X, columns=[f"emb_{j:04d}" for j in range(d)])], axis=1)


def screen_calls(table: pd.DataFrame, seed: int) -> pd.DataFrame:
    folds = leave_one_batch_out(table)
    nulls = null_guide_design(table, CFG["n_null_guides"], seed)
    rows = classify_guides(table, None, folds, classify_options(CFG, seed), "base", "m", nulls=nulls)
    guides, _ = summarize_scores(rows)
    return H.call_guides(guides, "parametric", 0.05)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_guides_without_effect_get_uniform_p_values_and_no_calls(seed):
    """Guides without effect look like the null and are (almost) never called. Their AUROCs are
    compared with the pseudo-guides' by a two-sample test: all 240 p-values are read off one fit
    of 100 pseudo-guides, so a one-sample test of those p-values against the uniform measures the
    null's own draw as much as its calibration (over null draws of this screen its p ranged from
    1e-4 to 0.8), while both samples' variation enters the two-sample test."""
    calls = screen_calls(null_screen(seed), seed)
    real = calls[~calls["is_null_guide"]]
    p = real["p_value"].to_numpy()
    assert len(p) == 240 and np.isfinite(p).all()
    null_auroc = calls.loc[calls["is_null_guide"], "auroc"]
    assert stats.ks_2samp(real["auroc"], null_auroc).pvalue > 0.01
    assert (real["q_value"] < 0.05).mean() <= 0.05
    # the null's own leave-one-out p-values are uniform too, and real no-effect guides look like it
    null = calls[calls["is_null_guide"]]
    assert stats.kstest(null["p_value"], "uniform").pvalue > 0.01
    assert stats.mannwhitneyu(real["auroc"], null["auroc"]).pvalue > 0.01


@pytest.mark.slow
def test_known_effects_are_called_at_the_nominal_fdr():
    """40 of 200 guides shift 3 features by 1.5 SD; at q < 0.1 BH bounds the FDR by 0.1 x 160/200.
    Pooled over three screens (the null fit is shared by a screen's guides, so one screen's
    false calls move together): recall >= 0.6 and observed FDR <= 0.15."""
    tp = fp = n_effects = 0
    for seed in (0, 1, 2):
        table = null_screen(seed, n_guides=200, effect_every=5)
        calls = screen_calls(table, seed)
        truth = table[table[PERT_TYPE] == PERTURBATION][[GENE, GUIDE]].drop_duplicates()
        truth["has_effect"] = truth[GUIDE].map(lambda g: (int(g[1:5]) * 2 + int(g[-1])) % 5 == 0)
        out = C.recall_fdr(calls, truth, (0.1,)).set_index("level").loc["guide"]
        assert out["n_true_effects"] == 40
        tp, fp, n_effects = tp + out["true_positives"], fp + out["false_positives"], n_effects + 40
    assert tp / n_effects >= 0.6 and fp / (tp + fp) <= 0.15, (tp, fp)
