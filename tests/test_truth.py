"""Checks against a simulated truth: gene-shifted factors, probe table, effect separation and
variant contrasts with bootstrap intervals over genes (known answers on hand-made tables)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from phenoica.contract import GENE, GUIDE, ScreenError, validate_config
from phenoica.report import _truth_stats as truth
from phenoica.report import _truth_tables as truth_tables
from phenoica.screen import DemoOptions
from phenoica.screen.demo import _design as sim_design


def truth_table(n_genes=10, null_genes=(6, 7, 8, 9), guides_per_gene=3) -> pd.DataFrame:
    rows = []
    for g in range(n_genes):
        effect = g not in null_genes
        for s in range(guides_per_gene):
            rows.append(
                {
                    GENE: f"G{g}",
                    GUIDE: f"G{g}_{s}",
                    "Metadata_PertType": "perturbation",
                    "has_effect": effect,
                    "efficacy": 0.5,
                    "affected_factors": f"factor_0{g % 3}+,factor_0{3 + g % 2}-" if effect else "",
                }
            )
    rows.append(
        {
            GENE: "non-targeting",
            GUIDE: "NTC_01",
            "Metadata_PertType": "control",
            "has_effect": False,
            "efficacy": 0.0,
            "affected_factors": "",
        }
    )
    return pd.DataFrame(rows)


def _distance(auroc: float) -> dict[str, float]:
    """A held-out distance and its interval that grow with the AUROC (the score table's effect size)."""
    d = 4.0 * (auroc - 0.5)
    return {"distance_sd": d, "distance_sd_low": d - 1.0, "distance_sd_high": d + 1.0}


def guide_scores(score, truth_df, variants=("pca", "pca_ica", "pca_rand"), model="mae") -> pd.DataFrame:
    """Guide table: ``score(variant, gene_index, guide_index)``; two null pseudo-guides per variant."""
    rows = []
    pert = truth_df[truth_df["Metadata_PertType"] == "perturbation"]
    for variant in variants:
        for _, r in pert.iterrows():
            g, s = int(r[GENE][1:]), int(r[GUIDE].split("_")[1])
            rows.append(
                {
                    "model": model,
                    "variant": variant,
                    GENE: r[GENE],
                    GUIDE: r[GUIDE],
                    "is_null_guide": False,
                    "n_folds_ok": 3,
                    "auroc": score(variant, g, s),
                    **_distance(score(variant, g, s)),
                    "sparsity": 0.1,
                    "concentration": 0.1,
                }
            )
        for k in range(2):
            rows.append(
                {
                    "model": model,
                    "variant": variant,
                    GENE: "NULL",
                    GUIDE: f"null_{k}",
                    "is_null_guide": True,
                    "n_folds_ok": 3,
                    "auroc": 0.5,
                    **_distance(0.5),
                    "sparsity": 0.1,
                    "concentration": 0.1,
                }
            )
    return pd.DataFrame(rows)


def test_shifted_factors_from_the_simulator_truth():
    demo = DemoOptions.from_config(
        validate_config({"demo": {"n_genes": 6, "n_null_genes": 2, "n_factors": 8}, "seed": 3})
    )
    t = sim_design.gene_truth(demo)
    shifts = sim_design.guide_shifts(demo)
    expected = sorted(shifts.columns[(shifts != 0).any(axis=0)])
    assert truth.shifted_factors(t) == expected and 0 < len(expected) <= 8
    assert truth.shifted_factors(truth_table()) == ["factor_00", "factor_01", "factor_02", "factor_03", "factor_04"]
    bad = truth_table()
    bad.loc[0, "affected_factors"] = "nucleus_size+"
    with pytest.raises(ScreenError, match="row 0.*nucleus_size"):
        truth.shifted_factors(bad)


def test_probe_table_means_over_shifted_factors_only():
    t = truth_table(n_genes=2, null_genes=())  # shifts factor_00, factor_01, factor_03, factor_04
    structural = pd.DataFrame(
        {
            "model": ["mae", "mae"],
            "variant": ["base", "pca"],
            **{f"probe_r2_factor_0{j}": [0.1 * j, 0.2] for j in range(6)},
        }
    )
    out = truth.probe_table(structural, t).set_index("variant")
    assert out.loc["base", "n_shifted_factors"] == 4
    assert out.loc["base", "probe_r2_shifted"] == pytest.approx((0.0 + 0.1 + 0.3 + 0.4) / 4)
    assert out.loc["base", "probe_r2_shifted_min"] == pytest.approx(0.0)
    assert out.loc["base", "probe_r2_other"] == pytest.approx((0.2 + 0.5) / 2)
    assert out.loc["pca", "probe_r2_shifted"] == pytest.approx(0.2)
    with pytest.raises(ScreenError, match="factor_04"):
        truth.probe_table(structural.drop(columns="probe_r2_factor_04"), t)


def test_effect_groups_known_groups_and_missing_truth():
    t = truth_table(n_genes=3, null_genes=(1,), guides_per_gene=2)
    t.loc[t[GUIDE] == "G0_1", "has_effect"] = False  # a guide without effect of a gene with one
    t.loc[t[GUIDE] == "G2_0", "efficacy"] = 0.9
    g = guide_scores(lambda v, gi, s: float("nan") if (gi, s) == (2, 1) else 0.7, t, variants=("pca",))
    merged = truth.effect_groups(g, t, keep=("efficacy",))
    assert merged[GUIDE].tolist() == ["G0_0", "G0_1", "G1_0", "G1_1", "G2_0"]  # no nulls, no NaN AUROC
    assert merged["group"].tolist() == ["effect", "other", "no_effect", "no_effect", "effect"]
    assert merged["efficacy"].tolist() == [0.5, 0.5, 0.5, 0.5, 0.9]
    assert merged.index.tolist() == list(range(5))
    assert "efficacy" not in truth.effect_groups(g, t).columns
    with pytest.raises(ScreenError, match=r"no row for 1 scored guide\(s\), e.g. \['G1/G1_1'\]"):
        truth.effect_groups(g, t[t[GUIDE] != "G1_1"])
    with pytest.raises(ScreenError, match="truth table: missing column.*efficacy"):
        truth.effect_groups(g, t.drop(columns="efficacy"), keep=("efficacy",))


def test_effect_separation_known_answer_and_interval():
    t = truth_table()

    def score(variant, g, s):
        return 0.5 + 0.01 * s if g >= 6 else 0.8 + 0.01 * g  # effect genes 0.80..0.85, no-effect ~0.51

    sep = truth.effect_separation(guide_scores(score, t), t, seed=1).set_index("variant")
    r = sep.loc["pca"]
    assert (r["n_effect_genes"], r["n_no_effect_genes"], r["n_effect_guides"], r["n_no_effect_guides"]) == (
        6,
        4,
        18,
        12,
    )
    assert r["auroc_effect"] == pytest.approx(0.825) and r["auroc_no_effect"] == pytest.approx(0.51)
    assert r["separation"] == pytest.approx(0.315)
    assert r["separation_lo"] < r["separation"] < r["separation_hi"]
    assert r["separation_lo"] > 0.3 and r["separation_hi"] < 0.33  # only gene-to-gene spread
    assert r["auc_effect_vs_no_effect"] == 1.0 and r["mannwhitney_p"] < 1e-5
    again = truth.effect_separation(guide_scores(score, t), t, seed=1)
    pd.testing.assert_frame_equal(again.set_index("variant"), sep)


def test_effect_separation_without_signal_straddles_zero():
    t = truth_table(n_genes=12, null_genes=(6, 7, 8, 9, 10, 11))
    rng = np.random.default_rng(0)
    noise = {(g, s): 0.5 + 0.05 * rng.standard_normal() for g in range(12) for s in range(3)}
    sep = truth.effect_separation(guide_scores(lambda v, g, s: noise[(g, s)], t), t).iloc[0]
    assert sep["separation_lo"] < 0 < sep["separation_hi"]
    assert sep["mannwhitney_p"] > 0.01 and 0.2 < sep["auc_effect_vs_no_effect"] < 0.8


def test_variant_contrasts_paired_differences():
    t = truth_table()
    gain = {"pca": 0.0, "pca_ica": 0.05, "pca_rand": 0.0}

    def score(variant, g, s):
        if g >= 6:
            return 0.5
        return 0.7 + 0.02 * g + gain[variant] * (1 + 0.1 * (g % 2))

    out = truth.variant_contrasts(guide_scores(score, t), t, seed=0).set_index(["variant", "reference"])
    assert set(out.index) == {("pca_ica", "pca"), ("pca_ica", "pca_rand"), ("pca", "pca_rand")}
    r = out.loc[("pca_ica", "pca")]
    assert r["delta_effect_auroc"] == pytest.approx(0.05 * 1.05)
    assert r["delta_effect_auroc_lo"] > 0.049 and r["delta_effect_auroc_hi"] < 0.056
    assert r["delta_separation"] == pytest.approx(0.05 * 1.05)  # no-effect genes unchanged
    assert r["cohens_dz"] > 5
    same = out.loc[("pca", "pca_rand")]
    assert same["delta_effect_auroc"] == 0 and same["delta_separation"] == 0
    assert same["delta_separation_lo"] == 0 == same["delta_separation_hi"]
    assert np.isnan(same["cohens_dz"])  # no spread: no standardized effect
    only = truth.variant_contrasts(guide_scores(score, t, variants=("pca",)), t)
    assert only.empty


def test_report_truth_recovery_tables(tmp_path):
    t = truth_table()
    guides = guide_scores(lambda v, g, s: 0.5 if g >= 6 else 0.75, t)
    structural = pd.DataFrame(
        {"model": "mae", "variant": ["pca", "pca_ica", "pca_rand"], **{f"probe_r2_factor_0{j}": 0.6 for j in range(6)}}
    )
    tables = truth_tables.truth_recovery(guides, t, structural, seed=0)
    rec = tables["truth_recovery"]
    assert list(rec["variant"]) == ["pca", "pca_ica", "pca_rand"]
    assert np.allclose(rec["probe_r2_shifted"], 0.6) and np.allclose(rec["separation"], 0.25)
    assert len(tables["variant_contrasts"]) == 3
    no_probe = truth_tables.truth_recovery(guides, t, None)["truth_recovery"]
    assert "probe_r2_shifted" not in no_probe.columns
