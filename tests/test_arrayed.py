"""The field's arrayed layout of per-well profiles: the simulated screen (phenoica.screen.arrayed),
what each readout can score on it (phenoica.classify._capacity), hit calls that degrade to the
readout that can still call, and the control constructs checked as a null (phenoica.hits._controls)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from phenoica.classify import NULL_GENE, SplitOptions, control_constructs, split_control_rows
from phenoica.contract import BATCH, CONTROL, GENE, GUIDE, PERT_TYPE, PLATE, WELL, validate_config
from phenoica.screen import arrayed

#: Floors of the shipped scenario's recall of the effect guides at q < 0.05 (base variant), about 3 SD
#: below the mean over 8 simulated draws of the same design (benchmarks/arrayed_calibration.py:
#: classifier 0.996 +- 0.011, mAP 0.891 +- 0.055; docs/per-well-profiles.md).
RECALL_FLOOR, MAP_RECALL_FLOOR = 0.95, 0.7
SMALL = arrayed.ArrayedDesign(n_effect_genes=3, n_null_genes=2, n_latent=4, n_features=12)


def _profiles(design: arrayed.ArrayedDesign = SMALL, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    return arrayed.screen_profiles(design, seed)


# --------------------------------------------------------------------------- the simulated screen


def test_written_screen_has_the_arrayed_layout_and_its_truth(tmp_path):
    paths = arrayed.write_arrayed_screen(tmp_path, 0, SMALL)
    table = pd.concat([pd.read_parquet(p) for p in sorted(paths["profiles"].glob("*.parquet"))], ignore_index=True)
    assert len(paths["files"]) == 2 and table[PLATE].nunique() == 8
    assert table.groupby(PLATE)[BATCH].nunique().eq(1).all()
    # one well per guide per plate, at the same well on every plate
    guides = table[table[PERT_TYPE] == "perturbation"]
    assert guides.groupby([PLATE, GUIDE]).size().eq(1).all()
    assert guides.groupby(GUIDE)[WELL].nunique().eq(1).all() and guides[GUIDE].nunique() == SMALL.n_guides
    # 16 control wells of 4 constructs per plate, at the same central wells on every plate
    controls = table[table[PERT_TYPE] == CONTROL]
    assert controls.groupby(PLATE).size().eq(16).all()
    assert controls.groupby(GUIDE)[WELL].nunique().eq(4).all() and controls[GUIDE].nunique() == 4
    assert set(controls[WELL]) == set(arrayed.well_names(16))
    # the features are exactly what the declared regex names, normalized per plate against controls
    features = [c for c in table.columns if pd.Series([c]).str.fullmatch(arrayed.FEATURE_REGEX).iloc[0]]
    assert features == SMALL.feature_names()
    medians = controls.groupby(PLATE)[features].median().to_numpy()
    np.testing.assert_allclose(medians, 0.0, atol=1e-5)
    truth = pd.read_parquet(paths["truth"])
    assert truth.loc[truth[PERT_TYPE] == CONTROL, "has_effect"].tolist() == [False, False, False, True]
    assert int(truth.loc[truth[PERT_TYPE] != CONTROL, "has_effect"].sum()) == 2 * SMALL.n_effect_genes


def test_same_seed_same_screen_other_seed_other_screen():
    a, _ = _profiles(seed=3)
    b, _ = _profiles(seed=3)
    c, _ = _profiles(seed=4)
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a[SMALL.feature_names()].to_numpy(), c[SMALL.feature_names()].to_numpy())


def test_a_layout_that_does_not_fit_a_plate_is_refused():
    with pytest.raises(ValueError, match="do not fit a 384-well plate"):
        arrayed.ArrayedDesign(n_effect_genes=200, n_null_genes=0)
    with pytest.raises(ValueError, match="n_batches must be >= 2"):
        arrayed.ArrayedDesign(n_batches=1)


# --------------------------------------------------------------------------- the door's counts


def test_capacity_counts_training_wells_as_the_engine_does():
    from phenoica.classify._capacity import classifier_capacity, map_capacity
    from tests.test_classify import classify_options

    table, _ = _profiles()
    cfg = validate_config({})
    at = {k: classify_options({"min_train_samples": k}, 0) for k in (4, 5)}
    four = classifier_capacity(table, SplitOptions.from_config(cfg), at[4], "parametric", 0)
    five = classifier_capacity(table, SplitOptions.from_config(cfg), at[5], "parametric", 0)
    # leave-one-batch-out over 2 batches of 4 plates: every guide trains on 4 wells, tests on 4
    assert four.units["train_per_fold"] == {"min": 4, "median": 4.0, "max": 4}
    assert (four.n_scored, four.calls, four.units["null_scored"]) == (SMALL.n_guides, True, 100)
    assert (five.n_scored, five.calls, five.units["null_scored"]) == (0, False, 0)
    assert "lower classify.min_train_samples to 4" in five.reason and "splits.scheme: in_distribution" in five.reason
    assert map_capacity(table).n_scored == SMALL.n_guides  # mAP needs no training set
    # a third batch gives 8 training wells
    three, _ = _profiles(arrayed.ArrayedDesign(**{**SMALL.__dict__, "n_batches": 3}))
    assert (
        classifier_capacity(three, SplitOptions.from_config(cfg), at[5], "parametric", 0).units["train_per_fold"]["min"]
        == 8
    )


def test_the_door_says_where_lightgbm_can_make_no_split():
    """A training set of fewer than twice min_data_in_leaf rows gives a model without a split
    (every AUROC 0.5): the door says so, with the largest setting that would split."""
    from phenoica.classify._capacity import classifier_capacity
    from tests.test_classify import classify_options

    table, _ = _profiles()  # each fold trains a guide's 4 wells against 4 plates x 16 control wells
    splits = SplitOptions.from_config(validate_config({}))
    at_default = classifier_capacity(table, splits, classify_options({}, 0), "parametric", 0)
    assert at_default.calls and "no split" not in at_default.reason
    refused = classifier_capacity(table, splits, classify_options({}, 0), "parametric", 0, min_data_in_leaf=40)
    assert not refused.calls
    assert (
        "largest training set against that leaf holds 68 rows" in refused.reason
        and "min_data_in_leaf to at most 34" in refused.reason
    )
    # the door reads the setting as the user wrote it, under any of LightGBM's names for it
    from phenoica.classify import readout_capacity

    for lightgbm, said in (({"min_child_samples": 40}, True), ({"min_data_in_leaf": 3}, False), ({}, False)):
        _, _, notes = readout_capacity(table, validate_config({"classify": {"lightgbm": lightgbm}}))
        assert any("can make no split" in n for n in notes) == said, lightgbm


def test_capacity_agrees_with_the_engines_skips():
    """What the door counts is what the classifier then skips: the same guides, the same reason."""
    from phenoica.classify import classify_guides, make_folds
    from phenoica.classify._capacity import classifier_capacity
    from tests.test_classify import classify_options

    table, _ = _profiles()
    # drop one plate's well of two guides: they train on 3 wells in one fold
    gone = table[(table[PLATE] == "plate01") & table[GUIDE].isin(["GENE01_1", "GENE02_2"])].index
    table = table.drop(gone).reset_index(drop=True)
    options = classify_options({"num_boost_round": 2, "concentration": False}, 0)
    cap = classifier_capacity(table, SplitOptions.from_config(validate_config({})), options, "parametric", 0)
    rows = classify_guides(
        table, None, make_folds(table, SplitOptions.from_config(validate_config({}))), options, "base"
    )
    skipped = rows.groupby([GENE, GUIDE])["status"].apply(lambda s: (s != "ok").all())
    assert sorted(skipped[skipped].index) == sorted(cap.unscored) == []
    per_fold = rows[rows["status"] != "ok"][[GUIDE, "reason"]]
    assert sorted(per_fold[GUIDE]) == ["GENE01_1", "GENE02_2"]
    assert per_fold["reason"].str.contains(r"too few training samples \(3 < 4\)").all()


def test_the_door_counts_again_when_a_setting_it_reads_changes(tmp_path):
    """A passed check is replayed from validated.json only while the settings the counts read are
    the same: lowering classify.min_train_samples clears the note it caused."""
    from phenoica.contract import run_models
    from phenoica.workflow import check_screen_once

    paths = arrayed.write_arrayed_screen(tmp_path / "arrayed", 0, SMALL)
    screen = {"source": "embeddings", "embeddings": str(paths["profiles"] / "*.parquet")}
    screen["feature_regex"] = arrayed.FEATURE_REGEX

    def door(min_train: int) -> dict:
        cfg = validate_config(run_models({"results": str(tmp_path / "res"), "screen": screen,
                                          "classify": {"min_train_samples": min_train}}))  # fmt: skip
        return check_screen_once(cfg, {}, tmp_path / "res" / "validated.json")

    assert any("min_train_samples = 5" in n for n in door(5)["notes"])
    assert not any("readout classifier" in n for n in door(4)["notes"])
    assert door(4)["readouts"][0]["n_scored"] == SMALL.n_guides


# --------------------------------------------------------------------------- degrade, not fail


def _score_rows(n_null_ok: int) -> pd.DataFrame:
    """6 guides (3 strong) and 100 pseudo-guides, the first ``n_null_ok`` of them scored."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(6):
        rows.append(("G%d" % i, "G%d_1" % i, False, 0.9 if i < 3 else 0.5 + rng.normal(0, 0.02)))
    for j in range(100):
        rows.append((NULL_GENE, f"null_{j:04d}", True, 0.5 + rng.normal(0, 0.03) if j < n_null_ok else np.nan))
    out = []
    for gene, guide, is_null, auc in rows:
        for fold in ("B1", "B2"):
            out.append(
                {
                    "model": "m",
                    "variant": "pca",
                    GENE: gene,
                    GUIDE: guide,
                    "is_null_guide": is_null,
                    "fold": fold,
                    "n_train_pos": 4,
                    "n_train_neg": 32,
                    "n_test_pos": 4,
                    "n_test_neg": 32,
                    "auroc": auc,
                    "distance_sd": 4.0 * (auc - 0.5),
                    "sparsity": np.nan,
                    "concentration": np.nan,
                    "auroc_top": np.nan,
                    "auroc_rest": np.nan,
                    "status": "ok" if np.isfinite(auc) else "skipped",
                    "reason": "",
                }  # fmt: skip
            )
    return pd.DataFrame(out)


def _map_rows(p: list[float], q: list[float]) -> pd.DataFrame:
    """The mAP table of the 6 guides of :func:`_score_rows` with these p- and q-values."""
    return pd.DataFrame(
        {
            "model": "m",
            "variant": "pca",
            GENE: [f"G{i}" for i in range(6)],
            GUIDE: [f"G{i}_1" for i in range(6)],
            "n_wells": 8,
            "mean_average_precision": [0.9 if v < 0.05 else 0.3 for v in q],
            "map_p_value": p,
            "map_q_value": q,
        }  # fmt: skip
    )


def test_a_variant_without_a_null_keeps_its_aurocs_and_the_map_calls():
    from phenoica.hits import screen_calls

    maps = _map_rows([1e-4, 2e-4, 1e-4, 0.6, 0.7, 0.8], [3e-4, 3e-4, 3e-4, 0.7, 0.8, 0.8])
    out = screen_calls(_score_rows(n_null_ok=2), maps, "parametric", 0.05)
    null = out["null"].iloc[0]
    assert not null["calls"] and "the parametric null needs at least 3" in null["reason"]
    assert out["guides"].loc[~out["guides"]["is_null_guide"], "auroc"].notna().all()
    assert not out["hits"]["hit"].any() and out["hits"]["map_hit"].sum() == 3
    assert out["hits"]["note"].str.startswith("classifier: no hit calls (hit calls for m/pca").all()
    # with a null the same rows are called and noted as such
    called = screen_calls(_score_rows(n_null_ok=100), maps, "parametric", 0.05)
    assert called["null"]["calls"].all() and called["hits"]["hit"].sum() == 3
    assert (called["hits"]["note"] == "").all()


def test_headline_says_what_the_classifier_could_not_call_and_what_map_called():
    from phenoica.hits import screen_calls
    from phenoica.report._headline import headline, readout_status
    from phenoica.report._summaries import paired_tests, variant_summary

    maps = _map_rows([1e-4] * 2 + [0.5] * 4, [6e-4] * 2 + [0.6] * 4)
    out = screen_calls(_score_rows(n_null_ok=0), maps, "parametric", 0.05)
    status = readout_status(out["hits"], out["null"])
    assert status[("m", "pca")]["map_hits"] == 2 and "no_calls" in status[("m", "pca")]
    text = str(headline(variant_summary(out["guides"]), paired_tests(out["genes"]), 0.05, status))
    assert "no classifier hit calls" in text and "mAP readout: 2/6 guides active at q < 0.05" in text


# --------------------------------------------------------------------------- controls as a null


def test_control_constructs_are_targets_only_when_there_are_several():
    table, _ = _profiles()
    targets = control_constructs(table)
    assert [t.guide for t in targets] == ["NTC_1", "NTC_2", "NTC_3", "NTC_4"]
    assert all(t.is_null and t.gene == arrayed.CONTROL_GENE for t in targets)
    assert all((table.loc[t.rows, GUIDE] == t.guide).all() and len(t.rows) == 32 for t in targets)
    one = table.assign(**{GUIDE: np.where(table[PERT_TYPE] == CONTROL, "NTC", table[GUIDE])})
    assert control_constructs(one) == []


def test_gather_moves_control_rows_apart_from_the_null():
    rows = pd.DataFrame(
        {
            GENE: ["G1", NULL_GENE, arrayed.CONTROL_GENE],
            GUIDE: ["G1_1", "null_0001", "NTC_2"],
            "is_null_guide": [False, True, True],
            "auroc": [0.7, 0.5, 0.6],
        }  # fmt: skip
    )
    guides, controls = split_control_rows(rows)
    assert guides[GUIDE].tolist() == ["G1_1", "null_0001"] and controls[GUIDE].tolist() == ["NTC_2"]
    assert "is_null_guide" not in controls.columns


def test_separating_features_name_the_shifted_feature_without_batch_offsets():
    from phenoica.hits._controls import separating_features

    rng = np.random.default_rng(1)
    n = 64
    X = rng.normal(size=(n, 6))
    guide = np.repeat(["NTC_1", "NTC_2"], n // 2)
    batch = np.tile(["b1", "b2"], n // 2)
    X[batch == "b2"] += 10.0  # a batch offset must not count
    X[guide == "NTC_2", 3] += 3.0
    table = pd.DataFrame(X, columns=[f"f{i}" for i in range(6)]).assign(**{GENE: "nt", GUIDE: guide, BATCH: batch})
    out = separating_features(table, [f"f{i}" for i in range(6)], k=2)
    assert out[("nt", "NTC_2")].startswith("f3 (+3.") and out[("nt", "NTC_1")].startswith("f3 (-")


def test_control_calls_use_the_guides_null():
    from phenoica.hits import control_calls, summarize_scores
    from phenoica.hits._calls import call_guides

    guides, _ = summarize_scores(_score_rows(n_null_ok=100))
    guides = call_guides(guides)
    controls = pd.DataFrame(
        {
            "model": "m",
            "variant": "pca",
            GENE: "nt",
            GUIDE: ["NTC_1", "NTC_1", "NTC_4", "NTC_4"],
            "fold": ["B1", "B2"] * 2,
            "auroc": [0.5, 0.52, 0.95, 0.97],
            "distance_sd": [0.1, -0.1, 3.0, 3.4],
            "status": "ok",
        }  # fmt: skip
    )
    calls = control_calls(controls, guides, "parametric", 0.05, {("m", "nt", "NTC_4"): "f3 (+3.0 SD)"})
    assert calls[GUIDE].tolist() == ["NTC_1", "NTC_4"] and calls["hit"].tolist() == [False, True]
    assert calls["n_folds_ok"].tolist() == [2, 2] and calls["separating_features"].tolist() == ["", "f3 (+3.0 SD)"]
    assert calls["distance_sd"].tolist() == pytest.approx([0.0, 3.2])


# --------------------------------------------------------------------------- the scenario, run


@pytest.mark.slow
def test_arrayed_scenario_runs_at_the_defaults_with_a_calibrated_null(tmp_path):
    """config/scenarios/arrayed.yaml as shipped (every analysis setting at the schema's defaults):
    the door counts 4 training wells per guide and fold and a null it can build; every guide and
    pseudo-guide is scored; each variant's null is calibrated (KS p > 0.01); the effect guides
    are recovered and the control construct that differs is called against the other controls."""
    import json
    import shutil

    import yaml

    from tests.test_workflow import SCENARIOS, snakemake

    data = tmp_path / "scenario_data" / "arrayed"
    arrayed.write_arrayed_screen(data, seed=0)
    shutil.copy(SCENARIOS / "arrayed.yaml", tmp_path / "config.yaml")
    results = Path(yaml.safe_load((tmp_path / "config.yaml").read_text())["results"])
    snakemake(tmp_path, str(results / "hits" / "guides.parquet"), str(results / "hits" / "controls.parquet"))
    out = tmp_path / results

    readouts = {r["readout"]: r for r in json.loads((out / "screen" / "validated.json").read_text())["readouts"]}
    assert readouts["classifier"]["units"]["train_per_fold"] == {"min": 4, "median": 4.0, "max": 4}
    assert readouts["classifier"]["calls"] and readouts["classifier"]["n_scored"] == 48
    assert readouts["map"]["n_scored"] == 48

    null = pd.read_parquet(out / "hits" / "null.parquet")
    assert null["calls"].all() and (null["n_null"] == 100).all()
    assert (null["loo_uniform_ks_p"] > 0.01).all(), null
    truth = pd.read_parquet(data / "truth.parquet").set_index(GUIDE)["has_effect"]
    hits = pd.read_parquet(out / "hits" / "hits.parquet")
    hits["has_effect"] = hits[GUIDE].map(truth).astype(bool)
    base = hits[hits["variant"] == "base"]
    recall = (base["hit"] & base["has_effect"]).sum() / base["has_effect"].sum()
    map_recall = (base["map_hit"] & base["has_effect"]).sum() / base["has_effect"].sum()
    assert recall >= RECALL_FLOOR and map_recall >= MAP_RECALL_FLOOR, (recall, map_recall)
    controls = pd.read_parquet(out / "hits" / "controls.parquet").set_index(["variant", GUIDE])
    assert controls.loc[("base", "NTC_4"), "hit"]
    assert controls.loc[("base", "NTC_4"), "separating_features"].count("SD)") == 5


def test_control_headline_names_called_constructs_and_says_when_none_could_be_called():
    from phenoica.report._headline import control_headline

    summary = pd.DataFrame({"model": ["m"], "variant": ["base"], "hits_q<0.05": [40], "n_guides_scored": [48]})
    calls = pd.DataFrame(
        {
            "model": "m",
            "variant": "base",
            GENE: "nt",
            GUIDE: ["NTC_1", "NTC_4"],
            "p_value": [0.4, 1e-5],
            "hit": [False, True],
        }  # fmt: skip
    )
    (text,) = control_headline(calls, summary, 0.05)
    assert "not one homogeneous null" in text and "NTC_4 (1 of 2)" in text and "83%" in text
    (text,) = control_headline(calls.assign(hit=False), summary, 0.05)
    assert text.startswith("Control constructs checked as a null: none of 2")
    (text,) = control_headline(calls.assign(hit=False, p_value=np.nan), summary, 0.05)
    assert "not called: there is no null" in text
    assert control_headline(None, summary, 0.05) == []


def test_the_sweep_leaves_the_control_constructs_out_of_its_null():
    """The classify shards hold the control constructs' rows beside the pseudo-guides'; the
    component sweep's calls, like the main run's, count only the pseudo-guides as the null."""
    from phenoica.classify import leave_one_batch_out
    from phenoica.sweep import SweepOptions, sweep_model

    table, _ = _profiles()
    cfg = validate_config({"classify": {"num_boost_round": 4, "n_null_guides": 6, "map_null_size": 100}})
    options = SweepOptions.from_config(cfg)._replace(variants=["pca"], points=1)
    _, calls = sweep_model(table, leave_one_batch_out(table), "cp", 4, options, grid=[4])
    assert int(calls["is_null_guide"].sum()) == 6 and arrayed.CONTROL_GENE not in set(calls[GENE])


def test_plate_maps_spread_the_guides_over_plates_at_the_same_replicates(tmp_path):
    import dataclasses

    """A screen of more guides than a plate holds: each plate map holds a share of the guides
    and every control well; every guide is on n_batches x plates_per_batch plates, as with one map."""
    design = arrayed.ArrayedDesign(n_effect_genes=5, n_null_genes=2, n_latent=4, n_features=12, plate_maps=3)
    paths = arrayed.write_arrayed_screen(tmp_path, 0, design)
    table = pd.concat([pd.read_parquet(p) for p in paths["files"]], ignore_index=True)
    assert len(table) == design.n_wells == 2 * 4 * (14 + 3 * 16) and table[PLATE].nunique() == 2 * 3 * 4
    guides = table[table[PERT_TYPE] == "perturbation"]
    assert guides[GUIDE].nunique() == 14 and guides.groupby(GUIDE)[PLATE].nunique().eq(8).all()
    assert guides.groupby(PLATE)[GUIDE].nunique().max() == design.guides_per_map == 5
    assert table[table[PERT_TYPE] == CONTROL].groupby(PLATE).size().eq(16).all()
    truth = arrayed.screen_truth(design, 0)
    one = arrayed.plate_layout(dataclasses.replace(design, plate_maps=1), truth, 0)
    maps = [arrayed.plate_layout(design, truth, 0, m) for m in range(3)]
    ordered = [g for m in maps for g in m.loc[m[PERT_TYPE] != CONTROL, GUIDE]]
    assert ordered == one.loc[one[PERT_TYPE] != CONTROL, GUIDE].tolist()  # one map's order, cut in three
    with pytest.raises(ValueError, match="plate maps"):
        arrayed.ArrayedDesign(n_effect_genes=1, n_null_genes=0, plate_maps=3)


def test_an_unnormalized_export_keeps_the_plate_offsets_and_the_default_is_control_normalized():
    """Known answers: as exported, every plate's control wells have median 0 in every feature
    (pycytominer's mad_robustize against them); left as measured they do not, and the wells of a
    plate differ from the exported ones by more than a rescaling."""
    exported, _ = _profiles()
    raw, _ = _profiles(dataclasses.replace(SMALL, control_normalized=False))
    features = SMALL.feature_names()
    controls = exported[PERT_TYPE] == CONTROL
    medians = exported[controls].groupby(PLATE)[features].median().to_numpy()
    np.testing.assert_allclose(medians, 0.0, atol=1e-5)
    raw_medians = raw[controls].groupby(PLATE)[features].median().to_numpy()
    assert np.abs(raw_medians).max() > 0.1
    # the same layout, the same draws: only the normalization differs
    assert raw[[PLATE, WELL, GUIDE]].equals(exported[[PLATE, WELL, GUIDE]])
    renormalized = arrayed.normalize_to_controls(
        raw.loc[raw[PLATE] == "plate01", features].to_numpy(np.float64), controls[raw[PLATE] == "plate01"].to_numpy()
    )
    np.testing.assert_allclose(renormalized, exported.loc[exported[PLATE] == "plate01", features], atol=1e-4)
