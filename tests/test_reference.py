"""A reference other than the controls (phenoica.hits._reference): the declared pairs, the null
contrasts built like the real ones, both readouts, and the planted allele pairs recovered."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from phenoica.classify import SplitOptions, make_folds
from phenoica.contract import CONTROL, GENE, GUIDE, PERT_TYPE, PLATE, WELL, ConfigError, ScreenError, validate_config
from phenoica.hits import ReferenceOptions
from phenoica.hits._reference import (
    NULL_CONTRAST,
    empirical_p,
    null_contrasts,
    pair_contrasts,
    reference_p,
    reference_pairs,
    reference_scores,
)
from phenoica.hits._tail import leave_one_out_pareto
from phenoica.screen import arrayed

SMALL = dataclasses.replace(arrayed.POSITION_DESIGN, n_features=60, n_latent=12)


def _profiles(design: arrayed.ArrayedDesign, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    return arrayed.screen_profiles(design, seed)


def _orf_plate() -> pd.DataFrame:
    """One plate in VarChAMP's shape: constructs in 2 x 2 blocks, 4 control constructs of one block each."""
    rows = []
    blocks = {"ALK": "A01", "ALK_Arg1275Gln": "A03", "MVK": "A05", "MVK_Ala2Val": "A07", "OTHER_Var1": "A09"}
    controls = {"NC1": "C01", "NC2": "C03", "NC3": "C05", "NC4": "C07"}
    for guide, corner in {**blocks, **controls}.items():
        r, c = ord(corner[0]) - 65, int(corner[1:]) - 1
        for dr in (0, 1):
            for dc in (0, 1):
                rows.append({
                    "Metadata_Batch": "b1", PLATE: "p1", WELL: f"{chr(65 + r + dr)}{c + dc + 1:02d}",
                    GENE: guide.split("_")[0], GUIDE: guide, PERT_TYPE: CONTROL if guide in controls else "perturbation",
                })  # fmt: skip
    table = pd.DataFrame(rows)
    rng = np.random.default_rng(0)
    for j in range(6):
        table[f"Cells_F{j}"] = rng.normal(size=len(table))
    return table


def test_pairs_by_rule_and_by_column():
    table = _orf_plate()
    pairs = reference_pairs(table, {"rule": "named_like_gene"})
    assert pairs.values.tolist() == [["ALK", "ALK_Arg1275Gln", "ALK"], ["MVK", "MVK_Ala2Val", "MVK"]]
    table["Metadata_Reference"] = table[GUIDE].map({"ALK_Arg1275Gln": " ALK ", "OTHER_Var1": "MVK"}).fillna("")
    pairs = reference_pairs(table, {"column": "Metadata_Reference"})
    assert pairs[[GUIDE, "reference"]].values.tolist() == [["ALK_Arg1275Gln", "ALK"], ["OTHER_Var1", "MVK"]]


def test_bad_references_are_named():
    table = _orf_plate()
    with pytest.raises(ScreenError, match="'Metadata_Ref' is not a column"):
        reference_pairs(table, {"column": "Metadata_Ref"})
    table["Metadata_Reference"] = np.where(table[GUIDE] == "ALK_Arg1275Gln", "ALK1", "")
    with pytest.raises(ScreenError, match="names 'ALK1' as the reference of 'ALK_Arg1275Gln'"):
        reference_pairs(table, {"column": "Metadata_Reference"})
    table["Metadata_Reference"] = np.where(
        table[GUIDE] == "ALK_Arg1275Gln", np.where(table[WELL] == "A03", "ALK", "MVK"), ""
    )
    with pytest.raises(ScreenError, match="several references"):
        reference_pairs(table, {"column": "Metadata_Reference"})
    for bad in ({"rule": "named_like_gene", "column": "x"}, {"rule": "similar"}, {}):
        with pytest.raises(ConfigError):
            validate_config({"screen": {"reference": bad}})


def test_null_contrasts_are_built_like_the_real_ones():
    # a construct with positions enough for both sides: the same construct at other positions
    table, _ = _profiles(SMALL)
    real = pair_contrasts(table, reference_pairs(table, {"column": arrayed.REFERENCE}))
    nulls = null_contrasts(table, real, 50, seed=0)
    assert len(nulls) == 50 and all(c.gene == NULL_CONTRAST for c in nulls)
    for c in nulls:
        a, r = table.iloc[c.rows], table.iloc[c.reference_rows]
        assert (a[PERT_TYPE] == CONTROL).all() and (r[PERT_TYPE] == CONTROL).all()
        assert a[GUIDE].nunique() == 1 and a[GUIDE].iloc[0] == r[GUIDE].iloc[0]  # one construct against itself
        assert a[WELL].nunique() == r[WELL].nunique() == 1 and a[WELL].iloc[0] != r[WELL].iloc[0]  # other positions
        assert a[PLATE].nunique() == r[PLATE].nunique() == 8  # the real pairs' plates
    assert len({(c.guide, c.reference) for c in nulls}) == 50
    # 4 control constructs of one 2 x 2 block each, pairs of 4 wells a side: one construct against another
    plate = _orf_plate()
    real = pair_contrasts(plate, reference_pairs(plate, {"rule": "named_like_gene"}))
    nulls = null_contrasts(plate, real, 100, seed=0)
    assert len(nulls) == 12  # every ordered pair of the 4 constructs, once
    for c in nulls:
        a, r = plate.iloc[c.rows], plate.iloc[c.reference_rows]
        assert len(a) == len(r) == 4 and a[GUIDE].iloc[0] != r[GUIDE].iloc[0]


def test_empirical_p_values():
    null = np.array([0.1, 0.5, 0.5, 0.9, np.nan])
    np.testing.assert_allclose(empirical_p(np.array([0.95, 0.5, 0.0, np.nan]), null)[:3], [1 / 5, 4 / 5, 1.0])
    assert np.isnan(empirical_p(np.array([0.95, np.nan]), null)[1])
    assert np.isnan(empirical_p(np.array([0.5]), np.array([np.nan]))).all()


@pytest.mark.slow
def test_planted_allele_pairs_are_recovered_at_the_stated_fdr():
    """The arrayed_plates scenario's alleles without its position effect (that one is a question of
    its own: docs/hit-calling.md measures what it costs): over 3 draws, the mAP against the
    reference's wells calls most alleles that differ from their wild type and none of those that do
    not; the classifier, 4 training wells a side with its settings scaled to them (at LightGBM's own
    it made no split at all), splits in most folds and calls a third of the differing alleles and at
    most one alike pair; a fold without a split is counted, never scored as 0.5."""
    design = dataclasses.replace(arrayed.POSITION_DESIGN, edge_effect=0.0, row_gradient=0.0)
    cfg = validate_config({"screen": {"reference": {"column": arrayed.REFERENCE}}})
    differ_called = alike_called = differ = calls = auroc_differ = auroc_alike = no_split = 0
    for seed in range(3):
        table, truth = _profiles(design, seed)
        options = ReferenceOptions.from_config(validate_config({**cfg, "seed": seed}))
        out = reference_scores(
            table, make_folds(table, SplitOptions.from_config(cfg)), options, model="m", variant="base"
        )
        truly = out[GUIDE].map(truth.set_index(GUIDE)["differs_from_reference"]).astype(bool)
        assert len(out) == 12 and (out["n_null"] == 480).all() and (out["n_wells"] == 8).all()  # 2 x 12 / 0.05
        differ += int(truly.sum())
        differ_called += int((out["map_hit"] & truly).sum())
        alike_called += int((out["map_hit"] & ~truly).sum())
        calls += int(out["map_hit"].sum())
        auroc_differ += int((out["auroc_hit"] & truly).sum())
        auroc_alike += int((out["auroc_hit"] & ~truly).sum())
        assert ((out["n_folds_no_split"] + out["n_folds_ok"]) == 2).all() and (out["auroc"] != 0.5).any()
        no_split += int(out["n_folds_no_split"].sum())
        assert out["differing_features"].str.count(r"SD\)").eq(5).all()
    assert differ_called >= 0.6 * differ and alike_called <= 0.05 * calls, (differ_called, differ, alike_called)
    assert auroc_differ >= 6 and auroc_alike <= 1 and no_split <= 0.1 * 3 * 12 * 2, (
        auroc_differ,
        auroc_alike,
        no_split,
    )


def test_small_sample_settings_scale_what_lightgbm_counts_in_rows():
    from phenoica.hits._reference import small_sample_params

    params = {"lambda_l1": 5.0, "lambda_l2": 1.0, "num_leaves": 31}
    four = small_sample_params(params, 4)
    assert four["min_data_in_leaf"] == 4 and four["lambda_l1"] == pytest.approx(1.0) and four["lambda_l2"] == 0.2
    assert small_sample_params(params, 50) == {**params, "min_data_in_leaf": 20}  # unchanged from 20 a side on
    assert small_sample_params({**params, "min_data_in_leaf": 3}, 4)["min_data_in_leaf"] == 3  # a setting below stays


def test_the_null_holds_enough_contrasts_for_a_lone_pair_to_reach_the_bh_cut():
    """The null's size: classify.n_null_guides where that suffices, more where the pairs are many,
    so that a lone pair above every null contrast (bounded p 1 / (n + 1)) is called by BH among m
    pairs; with n_null_guides 0, none. With 100 contrasts a lone pair among 12 would not be."""
    from phenoica.hits._reference import null_size
    from phenoica.utils import bh_qvalues

    assert null_size(2, 100, 0.05) == 100 and null_size(12, 100, 0.05) == 480 and null_size(12, 0, 0.05) == 0
    for m in (1, 12, 215):
        n = null_size(m, 100, 0.05)
        assert bh_qvalues(np.r_[1 / (n + 1), np.ones(m - 1)])[0] < 0.05
    assert bh_qvalues(np.r_[1 / 101, np.ones(11)])[0] >= 0.05


def test_a_null_of_tied_aurocs_is_conservative_and_its_randomized_check_is_uniform():
    """480 exchangeable null contrasts whose AUROC moves in steps of 1/32 (two folds of 4 against 4
    wells): their leave-one-out p-values with ties counted as exceedances (the p-value the calls
    use) never put more than a share alpha at or below alpha, and their staircase fails a KS test
    against U(0, 1); randomized within ties, as the reported check takes them, they are uniform."""
    rng = np.random.default_rng(31)
    auroc = (rng.binomial(16, 0.5, 480) + rng.binomial(16, 0.5, 480)) / 32
    assert np.unique(auroc).size < 30
    z = np.log(np.clip(auroc, 1e-6, 1 - 1e-6)) - np.log1p(-np.clip(auroc, 1e-6, 1 - 1e-6))
    ties = leave_one_out_pareto(z, None)
    for alpha in (0.01, 0.05, 0.1):
        assert np.mean(ties <= alpha) <= alpha
    assert stats.kstest(ties, "uniform").pvalue < 0.01
    randomized = leave_one_out_pareto(z, None, np.random.default_rng(0))
    assert stats.kstest(randomized, "uniform").pvalue > 0.05
    assert (randomized <= ties + 1e-12).all()
    p, _, ks = reference_p(np.array([0.99, 0.5]), auroc, seed=0)
    assert ks > 0.05 and p[0] <= 1 / 481 and p[1] == pytest.approx(empirical_p(np.array([0.5]), auroc)[0])
