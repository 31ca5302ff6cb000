"""Per-guide LightGBM classification, shared binning, empirical null, sharding, summaries, mAP."""

from __future__ import annotations

import functools
import json
import logging
import math
import subprocess
import sys

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest

from phenoica.classify import (
    ClassifyOptions,
    Fold,
    FoldBins,
    MapReadoutOptions,
    classify_guides,
    classify_shard,
    control_mask,
    feature_matrix,
    guide_map,
    guide_map_files,
    guide_seed,
    lightgbm_params,
    null_guide_design,
    score_guide,
)
from phenoica.classify import _lightgbm_params as classify_params
from phenoica.classify._engine import shard_genes
from phenoica.classify._lightgbm_params import _lightgbm_names, lightgbm_parameter_names
from phenoica.classify._map_readout import MAP_COLUMNS
from phenoica.contract import (
    BATCH,
    CONTROL,
    GENE,
    GUIDE,
    IMAGE_INDEX,
    PERT_TYPE,
    PERTURBATION,
    PLATE,
    SCORE_COLUMNS,
    SITE,
    WELL,
    ScreenError,
    feature_name,
    validate_config,
)
from phenoica.hits import GENE_SUMMARY_COLUMNS, GUIDE_SUMMARY_COLUMNS, summarize_scores
from phenoica.utils import _classifier_scores as metrics

D = 8
STRONG_FEATURE = 2
CFG = {"num_boost_round": 20, "n_null_guides": 2, "lightgbm": {"num_threads": 1}}


def classify_options(classify: dict = CFG, seed: int = 0) -> ClassifyOptions:
    """The options of a config whose classify section is ``classify`` (the schema's defaults elsewhere;
    the empirical null, which reads no spread, so that a null of 2 pseudo-guides is a valid config)."""
    config = {"classify": classify, "seed": seed, "hits": {"null_model": "empirical"}}
    return ClassifyOptions.from_config(validate_config(config))


def validated_lightgbm(given: dict) -> dict:
    """``classify.lightgbm`` of a validated config that sets ``given`` (Table 6 defaults filled in)."""
    return validate_config({"classify": {"lightgbm": given}})["classify"]["lightgbm"]


# (gene, guide, feature with an effect, shift in SD)
GUIDES = [
    ("STRONG", "STRONG_1", STRONG_FEATURE, 4.0),
    ("NONE", "NONE_1", None, 0.0),
    ("WEAK", "WEAK_1", 5, 1.5),
    ("WEAK", "WEAK_2", 5, 1.5),
]


def make_table(
    seed: int = 0, n_controls: int = 60, n_per_guide: int = 10, guides=GUIDES, n_batches: int = 3
) -> pd.DataFrame:
    """n_batches x (controls + each guide x n_per_guide), D float32 features, per-batch shifts."""
    rng = np.random.default_rng(seed)
    meta, feats = [], []
    for b in range(n_batches):
        shift = 0.5 * rng.standard_normal(D)
        for _ in range(n_controls):
            meta.append(("NTC", "NTC_1", CONTROL, f"B{b}"))
            feats.append(rng.standard_normal(D) + shift)
        for gene, guide, feature, effect in guides:
            for _ in range(n_per_guide):
                x = rng.standard_normal(D) + shift
                if feature is not None:
                    x[feature] += effect
                meta.append((gene, guide, PERTURBATION, f"B{b}"))
                feats.append(x)
    m = pd.DataFrame(meta, columns=[GENE, GUIDE, PERT_TYPE, BATCH])
    n = len(m)
    table = pd.DataFrame(
        {
            BATCH: m[BATCH],
            PLATE: m[BATCH] + "P01",
            WELL: [f"W{i:05d}" for i in range(n)],
            SITE: 1,
            GENE: m[GENE],
            GUIDE: m[GUIDE],
            PERT_TYPE: m[PERT_TYPE],
            IMAGE_INDEX: np.arange(n),
        }
    )
    X = np.asarray(feats, dtype=np.float32)
    for j in range(D):
        table[feature_name(j)] = X[:, j]
    return table


def batch_folds(table: pd.DataFrame) -> list:
    batch = table[BATCH].to_numpy()
    return [
        Fold(f"holdout_{b}", np.flatnonzero(batch != b), np.flatnonzero(batch == b), (b,)) for b in sorted(set(batch))
    ]


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return make_table()


@pytest.fixture(scope="module")
def nulls(table) -> list:
    return null_guide_design(table, 2, seed=0)


@pytest.fixture(scope="module")
def scores(table, nulls) -> pd.DataFrame:
    return classify_guides(
        table, None, batch_folds(table), classify_options(CFG, 0), variant="base", model="m", nulls=nulls
    )


# ----------------------------------------------------------------------------- the score table


def test_one_row_per_guide_and_fold_with_exact_columns(scores, table):
    assert tuple(scores.columns) == SCORE_COLUMNS
    assert len(scores) == (len(GUIDES) + 2) * 3
    assert not scores.duplicated([GENE, GUIDE, "fold"]).any()
    assert set(scores["status"]) == {"ok"} and set(scores["reason"]) == {""}
    assert scores[["model", "variant"]].drop_duplicates().values.tolist() == [["m", "base"]]
    for col in ("n_train_pos", "n_train_neg", "n_test_pos", "n_test_neg"):
        assert scores[col].dtype == np.int64
    assert scores["is_null_guide"].dtype == bool
    # counts: 10 per batch per guide; every real guide trains against all 60 controls per batch
    assert set(scores["n_train_pos"]) == {20} and set(scores["n_test_pos"]) == {10}
    real, nulls = scores[~scores["is_null_guide"]], scores[scores["is_null_guide"]]
    assert set(real["n_train_neg"]) == {120} and set(real["n_test_neg"]) == {60}
    # a pseudo-guide's own 10 wells per batch leave the controls for its classifier only
    assert set(nulls["n_train_neg"]) == {100} and set(nulls["n_test_neg"]) == {50}
    assert sorted(nulls[GUIDE].unique()) == ["null_0001", "null_0002"] and set(nulls[GENE]) == {"null"}
    # pseudo-guides train the full model only: AUROC and sparsity, no concentration models
    assert nulls["auroc"].notna().all() and nulls["sparsity"].notna().all()
    assert nulls[["concentration", "auroc_top", "auroc_rest"]].isna().all().all()
    assert real["concentration"].notna().all()


def test_concentration_switch_trains_the_full_model_only(table, scores):
    off = classify_guides(
        table,
        [("WEAK", "WEAK_1")],
        batch_folds(table),
        classify_options(dict(CFG, concentration=False), 0),
        variant="base",
        model="m",
    )
    on = scores[scores[GUIDE] == "WEAK_1"].reset_index(drop=True)
    assert off["auroc"].tolist() == on["auroc"].tolist() and off["sparsity"].tolist() == on["sparsity"].tolist()
    assert off[["concentration", "auroc_top", "auroc_rest"]].isna().all().all()


def test_planted_effect_is_found_and_concentrated(scores):
    strong = scores[scores[GUIDE] == "STRONG_1"]
    assert (strong["auroc"] > 0.9).all()
    # retraining on the top quarter of features keeps the signal, the rest loses most of it
    assert (strong["auroc_top"] > 0.9).all()
    assert (strong["concentration"] > 0.2).all()
    others = scores[scores[GUIDE].isin(["NONE_1", "null_0001", "null_0002"])]
    assert strong["sparsity"].mean() > others["sparsity"].mean() + 0.1


def test_no_effect_guides_score_near_chance(scores):
    none = scores[scores[GUIDE] == "NONE_1"]["auroc"].mean()
    assert 0.25 < none < 0.75
    null = scores[scores["is_null_guide"]]["auroc"].mean()
    assert 0.3 < null < 0.7
    weak = scores[scores[GENE] == "WEAK"]["auroc"].mean()
    assert weak > null


def test_split_feature_of_strong_guide(table):
    X, _ = feature_matrix(table)
    fold = batch_folds(table)[0]
    train = np.zeros(len(table), bool)
    train[fold.train] = True
    ctrl = np.flatnonzero(train & control_mask(table))
    guide = np.flatnonzero(train & (table[GUIDE] == "STRONG_1").to_numpy())
    bins = FoldBins.build(X, ctrl, classify_options(CFG, 0).booster_params())
    booster = lgb.train(
        classify_options(CFG, 0).booster_params(), bins.block(guide).guide_dataset(guide), num_boost_round=20
    )
    counts = booster.feature_importance(importance_type="split")
    assert int(np.argmax(counts)) == STRONG_FEATURE
    top, _ = metrics.top_features(counts, 0.25)
    assert STRONG_FEATURE in top


# ----------------------------------------------------------------------------- shared binning


def _fold_parts(table, fold, guide):
    train = np.zeros(len(table), bool)
    train[fold.train] = True
    test = np.zeros(len(table), bool)
    test[fold.test] = True
    ctrl = control_mask(table)
    rows = np.flatnonzero((table[GUIDE] == guide).to_numpy())
    return np.flatnonzero(train & ctrl), rows[train[rows]], np.flatnonzero(test & ctrl), rows[test[rows]]


def test_shared_binning_equals_training_from_scratch_with_the_same_bins(table, scores):
    """Subsetting the shared binned datasets == building each of the guide's three datasets
    anew from raw floats, with bins found on the same training controls: identical scores."""
    X, _ = feature_matrix(table)
    params = classify_options(CFG, 0).booster_params()
    perturbed = np.flatnonzero(~control_mask(table))
    for fold in batch_folds(table):
        for guide in ("WEAK_1", "NONE_1"):
            tr_ctrl, tr, te_ctrl, te = _fold_parts(table, fold, guide)
            block = FoldBins.build(X, tr_ctrl, params).block(np.intersect1d(fold.train, perturbed))
            X_test = np.concatenate([X[te_ctrl], X[te]])
            y_test = np.r_[np.zeros(len(te_ctrl)), np.ones(len(te))]
            rows, y = np.r_[tr_ctrl, tr], np.r_[np.zeros(len(tr_ctrl)), np.ones(len(tr))]

            def scratch(features, rows=rows, y=y, tr_ctrl=tr_ctrl):
                cols = np.arange(X.shape[1]) if features is None else features
                bins = lgb.Dataset(X[np.ix_(tr_ctrl, cols)], params=params).construct()
                return lgb.Dataset(X[np.ix_(rows, cols)], label=y, reference=bins, params=params)

            p = dict(params, seed=guide_seed(0, guide.split("_")[0], guide, fold.name))
            via_shared = score_guide(functools.partial(block.guide_dataset, tr), X_test, y_test, p, 20, 0.25)
            via_scratch = score_guide(scratch, X_test, y_test, p, 20, 0.25)
            assert via_shared == via_scratch  # identical, not merely close
            row = scores[(scores[GUIDE] == guide) & (scores["fold"] == fold.name)].iloc[0]
            assert row["auroc"] == via_shared.auroc and row["concentration"] == via_shared.concentration
            assert row["sparsity"] == via_shared.sparsity


def test_pseudo_guide_dataset_equals_scratch_without_its_own_wells(table, nulls, scores):
    """A pseudo-guide trains against the controls minus its own wells and is scored against
    the held-out controls minus its own wells: the shared path equals that built from scratch."""
    X, _ = feature_matrix(table)
    params = classify_options(CFG, 0).booster_params()
    ctrl = control_mask(table)
    target = nulls[0]
    for fold in batch_folds(table):
        train = np.zeros(len(table), bool)
        train[fold.train] = True
        tr_ctrl, te_ctrl = np.flatnonzero(train & ctrl), np.flatnonzero(~train & ctrl)
        tr, te = target.rows[train[target.rows]], target.rows[~train[target.rows]]
        assert ctrl[tr].all() and ctrl[te].all()
        block = FoldBins.build(X, tr_ctrl, params).block(np.r_[tr, nulls[1].rows[train[nulls[1].rows]]])
        neg_tr, neg_te = np.setdiff1d(tr_ctrl, tr), np.setdiff1d(te_ctrl, te)
        X_test = np.concatenate([X[neg_te], X[te]])
        y_test = np.r_[np.zeros(len(neg_te)), np.ones(len(te))]
        rows, y = np.r_[neg_tr, tr], np.r_[np.zeros(len(neg_tr)), np.ones(len(tr))]

        def scratch(features, rows=rows, y=y, tr_ctrl=tr_ctrl):
            bins = lgb.Dataset(X[tr_ctrl], params=params).construct()
            return lgb.Dataset(X[rows], label=y, reference=bins, params=params)

        p = dict(params, seed=guide_seed(0, target.gene, target.guide, fold.name))
        via_shared = score_guide(functools.partial(block.guide_dataset, tr), X_test, y_test, p, 20, None)
        via_scratch = score_guide(scratch, X_test, y_test, p, 20, None)
        assert via_shared == via_scratch
        row = scores[(scores[GUIDE] == target.guide) & (scores["fold"] == fold.name)].iloc[0]
        assert row["auroc"] == via_shared.auroc and row["n_train_neg"] == len(neg_tr)


def test_shared_bins_close_to_naive_per_guide_rebuild(table, scores):
    """A naive rebuild (bins from the guide's own training rows, column-subset datasets for
    top/rest) differs only in bin edges and feature sampling: AUROC within 0.1 here."""
    X, _ = feature_matrix(table)
    for fold in batch_folds(table):
        for guide in ("STRONG_1", "WEAK_1"):
            tr_ctrl, tr, te_ctrl, te = _fold_parts(table, fold, guide)
            rows = np.r_[tr_ctrl, tr]
            y = np.r_[np.zeros(len(tr_ctrl)), np.ones(len(tr))]
            params = dict(
                classify_options(CFG, 0).booster_params(), seed=guide_seed(0, guide.split("_")[0], guide, fold.name)
            )
            booster = lgb.train(params, lgb.Dataset(X[rows], label=y, params=params), num_boost_round=20)
            y_test = np.r_[np.zeros(len(te_ctrl)), np.ones(len(te))]
            naive = metrics.auroc(y_test, booster.predict(np.concatenate([X[te_ctrl], X[te]])))
            row = scores[(scores[GUIDE] == guide) & (scores["fold"] == fold.name)].iloc[0]
            assert abs(naive - row["auroc"]) < 0.1


def test_deterministic_and_independent_of_other_guides(table, nulls, scores, monkeypatch):
    again = classify_guides(
        table, None, batch_folds(table), classify_options(CFG, 0), variant="base", model="m", nulls=nulls
    )
    pd.testing.assert_frame_equal(scores, again)
    alone = classify_guides(
        table, [("WEAK", "WEAK_2")], batch_folds(table), classify_options(CFG, 0), variant="base", model="m"
    )
    monkeypatch.setattr("phenoica.classify._engine.GUIDES_PER_BLOCK", 2)
    blocks_of_two = classify_guides(
        table,
        None,
        batch_folds(table),
        classify_options(CFG, 0),
        variant="base",
        model="m",
        nulls=nulls,
    )
    pd.testing.assert_frame_equal(scores, blocks_of_two)
    pd.testing.assert_frame_equal(alone, scores[scores[GUIDE] == "WEAK_2"].reset_index(drop=True))
    other_seed = classify_guides(
        table, [("WEAK", "WEAK_2")], batch_folds(table), classify_options(CFG, 1), variant="base", model="m"
    )
    assert not np.allclose(other_seed["sparsity"], alone["sparsity"])


# ----------------------------------------------------------------------------- skips and bad input


def test_skips_are_recorded_with_reasons():
    guides = GUIDES[:2]
    t = make_table(n_controls=20, guides=guides)
    # FEW_1: 3 samples, all in batch B0
    few = t[t[GUIDE] == "STRONG_1"].iloc[:3].copy()
    few[GENE], few[GUIDE] = "FEW", "FEW_1"
    few[WELL] = [f"X{i}" for i in range(3)]
    few[IMAGE_INDEX] = np.arange(len(t), len(t) + 3)
    t = pd.concat([t, few], ignore_index=True)
    folds = batch_folds(t)
    out = classify_guides(t, None, folds, classify_options(CFG, 0), variant="base")
    assert len(out) == 3 * 3 and not out.duplicated([GUIDE, "fold"]).any()
    reason = out.set_index([GUIDE, "fold"])["reason"]
    assert reason["FEW_1", "holdout_B0"] == "too few training samples (0 < 4)"
    assert reason["FEW_1", "holdout_B1"] == (
        "too few training samples (3 < 4); held-out fold has no samples of this guide"
    )
    skipped = out[out["status"] == "skipped"]
    assert len(skipped) == 3  # FEW_1 in every fold
    assert skipped[["auroc", "sparsity", "concentration", "auroc_top", "auroc_rest"]].isna().all().all()
    assert (skipped["reason"] != "").all()
    ok = out[out["status"] == "ok"]
    assert ok["auroc"].notna().all() and (ok["reason"] == "").all()


def test_a_fold_without_controls_is_an_error_naming_the_counts():
    t = make_table(n_controls=20, guides=GUIDES[:2])
    guide_rows = np.flatnonzero((t[PERT_TYPE] == PERTURBATION).to_numpy())
    no_test_controls = Fold(
        "no_controls",
        np.flatnonzero(t[BATCH] != "B0"),
        np.intersect1d(np.flatnonzero(t[BATCH] == "B0"), guide_rows),
        ("B0",),
    )
    with pytest.raises(ScreenError, match=r"fold 'no_controls' has 40 training control.*and 0 held-out control"):
        classify_guides(t, None, [no_test_controls], classify_options(CFG, 0), variant="base")
    few = Fold("few", np.r_[np.arange(3), guide_rows[:30]], np.flatnonzero(t[BATCH] == "B2"), ())
    with pytest.raises(ScreenError, match=r"has 3 training control.*min_train_samples = 4"):
        classify_guides(t, None, [few], classify_options(CFG, 0), variant="base")


def test_too_few_heldout_samples_is_a_skip():
    t = make_table(n_controls=20, guides=GUIDES[:1], n_per_guide=3)
    out = classify_guides(
        t,
        None,
        batch_folds(t),
        classify_options(dict(CFG, min_train_samples=2, min_test_samples=4), 0),
        variant="base",
    )
    assert set(out["reason"]) == {"too few held-out samples (3 < 4)"}


def test_non_finite_features_raise_naming_columns():
    t = make_table(n_controls=10, guides=GUIDES[:1])
    t.loc[5, feature_name(3)] = np.nan
    t.loc[7, feature_name(6)] = np.inf
    with pytest.raises(ValueError, match=r"non-finite.*emb_0003.*emb_0006.*row 5"):
        classify_guides(t, None, batch_folds(t), classify_options(CFG, 0), variant="base")


def test_constant_features_are_dropped_with_a_warning(caplog):
    t = make_table(n_controls=20, guides=GUIDES[:1])
    t[feature_name(4)] = np.float32(1.5)
    # constant over the training controls of fold holdout_B0 only: one bin there, no crash
    t.loc[(t[BATCH] != "B0") & (t[PERT_TYPE] == CONTROL), feature_name(6)] = np.float32(0.0)
    with caplog.at_level(logging.WARNING, logger="phenoica.classify"):
        out = classify_guides(t, None, batch_folds(t), classify_options(CFG, 0), variant="base")
    assert "emb_0004" in caplog.text and "constant" in caplog.text
    assert (out["status"] == "ok").all() and out["auroc"].between(0, 1).all()
    # a model that makes no split (LightGBM's default min_data_in_leaf of 20 on 60 rows) is
    # scored at AUROC 0.5 with sparsity undefined, not skipped
    no_split = out["sparsity"].isna()
    assert (out.loc[no_split, "auroc"] == 0.5).all() and out.loc[~no_split, "sparsity"].between(0, 1).all()


def test_gene_under_two_pert_types_is_rejected():
    t = make_table(n_controls=10, guides=GUIDES[:1])
    t.loc[0, GENE] = "STRONG"
    with pytest.raises(ScreenError, match="STRONG.*both PertTypes"):
        classify_guides(t, None, batch_folds(t), classify_options(CFG, 0), variant="base")


def test_bad_folds_and_guides_are_rejected():
    t = make_table(n_controls=10, guides=GUIDES[:1])
    with pytest.raises(ValueError, match="both train and test"):
        classify_guides(t, None, [Fold("f", np.arange(10), np.arange(5, 20), ())], classify_options(CFG, 0), "base")
    with pytest.raises(ValueError, match="out of range"):
        classify_guides(t, None, [Fold("f", np.arange(10), np.array([10**6]), ())], classify_options(CFG, 0), "base")
    with pytest.raises(ValueError, match="MISSING"):
        classify_guides(t, [("MISSING", "M_1")], batch_folds(t), classify_options(CFG, 0), "base")
    with pytest.raises(ValueError, match="NTC_1.*not perturbation guides"):  # controls are not guides
        classify_guides(t, [("NTC", "NTC_1")], batch_folds(t), classify_options(CFG, 0), "base", nulls=[])


# ----------------------------------------------------------------------------- LightGBM parameters


def test_lightgbm_params_table6_defaults_and_overrides():
    p = classify_options({}, 7).booster_params()
    assert p["is_unbalance"] is True and p["learning_rate"] == 0.05 and p["num_leaves"] == 31
    assert p["feature_fraction"] == 0.6 and p["lambda_l1"] == 5.0 and p["lambda_l2"] == 1.0
    assert p["objective"] == "binary" and p["seed"] == 7 and p["deterministic"] is True
    assert "reg_alpha" not in p  # canonical names only
    # every parameter Table 6 does not name keeps LightGBM's own default: none is set here
    model_keys = set(p) - {"seed", "deterministic", "force_col_wise", "verbosity", "num_threads", "objective"}
    assert model_keys == {"is_unbalance", "learning_rate", "num_leaves", "feature_fraction", "lambda_l1", "lambda_l2"}
    # an alias set explicitly beats the untouched default of the same parameter
    p = lightgbm_params(validated_lightgbm({"lambda_l1": 0.5, "bagging_fraction": 0.8}), seed=0)
    assert p["lambda_l1"] == 0.5 and p["bagging_fraction"] == 0.8
    with pytest.raises(ValueError, match="classify.lightgbm.num_leavez"):
        lightgbm_params(validated_lightgbm({"num_leavez": 8}), seed=0)
    with pytest.raises(ValueError, match="num_boost_round"):
        lightgbm_params(validated_lightgbm({"num_rounds": 8}), seed=0)
    with pytest.raises(ValueError, match="lambda_l1 and reg_alpha|reg_alpha and lambda_l1"):
        lightgbm_params(validated_lightgbm({"reg_alpha": 2.0, "lambda_l1": 3.0}), seed=0)
    with pytest.raises(ValueError, match="classify.num_boost_round"):
        classify_options({"num_boost_round": 0})


def test_lightgbm_reads_the_parameter_names_itself():
    names = lightgbm_parameter_names(
        {"reg_alpha": 1.0, "l1_regularization": 2.0, "lambda": 3.0, "num_leavez": 4, "max_bin_by_feature": [3, 4, 5]}
    )
    assert names == {
        "reg_alpha": "lambda_l1",
        "l1_regularization": "lambda_l1",
        "lambda": "lambda_l2",
        "num_leavez": None,
        "max_bin_by_feature": "max_bin_by_feature",
    }  # data-dependent keys pass
    with pytest.raises(ValueError, match="reg_alpha and l1_regularization|l1_regularization and reg_alpha"):
        lightgbm_params(validated_lightgbm({"reg_alpha": 2.0, "l1_regularization": 3.0}), seed=0)
    with pytest.raises(ValueError, match="classify.lightgbm.random_state: may not be set here"):
        lightgbm_params(validated_lightgbm({"random_state": 3}), seed=0)
    # outside a check LightGBM's log behaves as its default logger: warnings stay Python warnings
    with pytest.warns(UserWarning, match="categorical_feature keyword"):
        lgb.Dataset(
            np.ones((10, 2)), label=np.arange(10) % 2, params={"categorical_feature": [0], "verbosity": -1}
        ).construct()


def test_lightgbm_parameter_check_never_switches_off_silently(monkeypatch):
    monkeypatch.setattr(
        classify_params, "_lightgbm_messages", lambda params: ([], None)
    )  # a LightGBM that logs nothing
    _lightgbm_names.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="cannot check classify.lightgbm"):
            lightgbm_params(validated_lightgbm({"num_leaves": 15}), seed=0)
    finally:
        _lightgbm_names.cache_clear()


def test_a_recorded_reading_of_the_keys_is_given_back_without_lightgbm():
    """LightGBM's reading of the keys, recorded, is what a fresh process takes as it is, importing
    no LightGBM; a record of another LightGBM version is not taken (the keys are read again)."""
    given = {"reg_alpha": 1.0, "num_leaves": 15}
    record = classify_params.lightgbm_names_record(given)
    assert record["lightgbm"] == lgb.__version__
    assert (
        dict(record["names"])
        == lightgbm_parameter_names(given)
        == {"reg_alpha": "lambda_l1", "num_leaves": "num_leaves"}
    )
    code = (
        "import json, sys\n"
        "from phenoica.classify import lightgbm_params, use_lightgbm_names\n"
        f"taken = use_lightgbm_names(json.loads({json.dumps(record)!r}))\n"
        f"params = lightgbm_params({given!r}, 3)\n"
        "print(json.dumps([taken, params, 'lightgbm' in sys.modules]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    taken, params, imported = json.loads(proc.stdout)
    assert taken and not imported and params == lightgbm_params(given, 3)
    assert not classify_params.use_lightgbm_names({**record, "lightgbm": "0.0"})
    assert not classify_params.use_lightgbm_names(None)


# ----------------------------------------------------------------------------- null guides, shards


def _layout(table, rows):
    """Wells per plate of a set of rows."""
    sub = table.iloc[rows]
    return sub.drop_duplicates([PLATE, WELL]).groupby(PLATE).size().to_dict()


def make_well_table(seed: int = 0, control_wells: int = 12, sites: int = 3) -> pd.DataFrame:
    """2 batches x 2 plates; per plate ``control_wells`` control wells and guides of 1 or 2 wells,
    ``sites`` images per well."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(2):
        for p in range(2):
            plate = f"B{b}P{p}"
            wells = [("NTC", "NTC_1", CONTROL)] * control_wells
            wells += [("G1", "G1_a", PERTURBATION)] + [("G2", "G2_a", PERTURBATION)] * 2
            for w, (gene, guide, ptype) in enumerate(wells):
                for s in range(sites):
                    rows.append(
                        {
                            BATCH: f"B{b}",
                            PLATE: plate,
                            WELL: f"W{w:02d}",
                            SITE: s,
                            GENE: gene,
                            GUIDE: guide,
                            PERT_TYPE: ptype,
                        }
                    )
    t = pd.DataFrame(rows)
    t[IMAGE_INDEX] = t.groupby(PLATE).cumcount()
    for j in range(D):
        t[feature_name(j)] = rng.standard_normal(len(t)).astype(np.float32)
    return t


def test_null_guides_are_whole_control_wells_laid_out_like_real_guides():
    t = make_well_table()
    design = null_guide_design(t, 40, seed=5)
    assert [g.guide for g in design[:2]] == ["null_0001", "null_0002"] and len(design) == 40
    ctrl = control_mask(t)
    real_layouts = {
        tuple(sorted(_layout(t, np.flatnonzero((t[GUIDE] == g).to_numpy())).items())) for g in ("G1_a", "G2_a")
    }
    seen = set()
    for g in design:
        assert g.is_null and g.gene == "null" and ctrl[g.rows].all()
        sub = t.iloc[g.rows]
        # whole wells: every site of each chosen well
        assert (sub.groupby([PLATE, WELL]).size() == 3).all()
        layout = tuple(sorted(_layout(t, g.rows).items()))
        assert layout in real_layouts  # wells per plate copied from a real guide
        seen.add(layout)
    assert seen == real_layouts  # both templates occur over 40 draws
    # deterministic, seed-dependent, and pseudo-guide j does not change when more are drawn
    again = null_guide_design(t, 40, seed=5)
    assert all(np.array_equal(a.rows, b.rows) for a, b in zip(design, again))
    more = null_guide_design(t, 60, seed=5)
    assert all(np.array_equal(a.rows, b.rows) for a, b in zip(design, more[:40]))
    other = null_guide_design(t, 40, seed=6)
    assert not all(np.array_equal(a.rows, b.rows) for a, b in zip(design, other))
    assert null_guide_design(t, 0, seed=5) == []


def _wells_of(t: pd.DataFrame, rows: np.ndarray) -> set[tuple[str, str]]:
    return set(map(tuple, t.iloc[rows][[PLATE, WELL]].drop_duplicates().to_numpy().tolist()))


def test_removing_a_control_well_changes_only_the_pseudo_guides_that_held_it():
    """A consistent sample: with one control well removed from the table (an outlier dropped),
    the pseudo-guides that did not hold it keep their wells, and each one that did swaps that
    well alone for another control well of its plate; a seeded shuffle redraws every one."""
    t = make_well_table(control_wells=12)
    design = null_guide_design(t, 40, seed=5)
    gone = ("B0P1", "W03")
    kept = t[~((t[PLATE] == gone[0]) & (t[WELL] == gone[1]))].reset_index(drop=True)
    after = null_guide_design(kept, 40, seed=5)
    held = 0
    for a, b in zip(design, after):
        before_wells, after_wells = _wells_of(t, a.rows), _wells_of(kept, b.rows)
        if gone in before_wells:
            held += 1
            assert len(before_wells - after_wells) == 1 and len(after_wells - before_wells) == 1
            (new,) = after_wells - before_wells
            assert new[0] == gone[0]
        else:
            assert before_wells == after_wells
    assert 0 < held < 20


def test_null_guides_with_few_control_wells_and_bad_input():
    # plate B0P0 keeps 1 control well: a 2-well guide's layout there takes wells of batch B0
    t = make_well_table()
    drop = (t[PLATE] == "B0P0") & (t[PERT_TYPE] == CONTROL) & (t[WELL] != "W00")
    t = t[~drop].reset_index(drop=True)
    design = null_guide_design(t, 30, seed=0)
    assert all(control_mask(t)[g.rows].all() for g in design)
    two_well = [g for g in design if sum(_layout(t, g.rows).values()) == 8]  # G2's layout: 2 wells x 4 plates
    assert two_well and all(sum(_layout(t, g.rows).values()) in (4, 8) for g in design)
    for g in two_well:
        wells = t.iloc[g.rows].drop_duplicates([PLATE, WELL])
        assert wells[BATCH].value_counts().to_dict() == {"B0": 4, "B1": 4}  # batch totals kept
        assert (wells[PLATE] == "B0P0").sum() <= 1  # the short plate gave what it has, B0P1 the rest
    # 1 control well per plate = 2 per batch: a 2-well-per-plate guide (4 per batch) cannot be copied
    t1 = make_well_table(control_wells=1)
    with pytest.raises(ScreenError, match=r"batch 'B0' has 2 control well\(s\).*needs up to 4"):
        null_guide_design(t1, 5, seed=0)
    t2 = make_well_table()
    t2.loc[t2[GENE] == "G1", GENE] = "null"
    with pytest.raises(ScreenError, match="reserved"):
        null_guide_design(t2, 1, seed=0)
    with pytest.raises(ValueError, match="n_null_guides"):
        null_guide_design(t, -1, seed=0)


def test_shard_genes_partition():
    genes = [f"G{i:03d}" for i in range(23)][::-1] + ["G005"]
    shards = shard_genes(genes, 4)
    flat = [g for s in shards for g in s]
    assert sorted(flat) == sorted(set(genes)) and len(flat) == len(set(flat))
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    assert shard_genes(list(reversed(genes)), 4) == shards
    assert shard_genes(["A"], 3) == [["A"], [], []]
    with pytest.raises(ValueError):
        shard_genes(genes, 0)


def test_shards_cover_every_guide_once_and_match_unsharded(scores):
    t = make_table()  # classify_shard draws the same pseudo-guides itself, in every shard
    folds = batch_folds(t)
    # the fixture's null is the plain layout's draw (null_guide_design's default); "auto" takes the
    # position-aware layout on this table
    options = classify_options(dict(CFG, n_shards=2, null_layout="plain"), 0)
    parts = [classify_shard(t, s, folds, options, variant="base", model="m") for s in range(2)]
    # pseudo-guide j is scored in shard j % 2
    assert set(parts[0].loc[parts[0]["is_null_guide"], GUIDE]) == {"null_0001"}
    assert set(parts[1].loc[parts[1]["is_null_guide"], GUIDE]) == {"null_0002"}
    assert set(parts[0][GENE]).isdisjoint(set(parts[1][GENE]) - {"null"})
    both = pd.concat(parts).sort_values([GENE, GUIDE, "fold"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(both, scores.sort_values([GENE, GUIDE, "fold"]).reset_index(drop=True))


# ----------------------------------------------------------------------------- summaries


def test_summarize_scores_hand_made():
    base = {
        "model": "m",
        "variant": "pca",
        "n_train_pos": 5,
        "n_train_neg": 9,
        "n_test_pos": 2,
        "n_test_neg": 3,
        "auroc_top": 0.5,
        "auroc_rest": 0.5,
        "distance_sd": 1.0,
        "distance_se": np.nan,
    }
    skipped = (np.nan, np.nan, np.nan, "skipped")
    folds = [  # gene, guide, fold, (auroc, sparsity, concentration, status), reason
        ("A", "A_1", "f0", (0.8, 0.2, 0.1, "ok"), ""),
        ("A", "A_1", "f1", (0.6, 0.4, 0.3, "ok"), ""),
        ("A", "A_2", "f0", (0.9, 0.6, 0.5, "ok"), ""),
        ("A", "A_2", "f1", skipped, "held-out fold has no controls"),
        ("B", "B_1", "f0", skipped, "too few training samples (1 < 5)"),
        ("null", "null_0001", "f0", (0.4, 0.1, 0.0, "ok"), ""),
    ]
    rows = pd.DataFrame(
        [
            dict(
                base,
                **{GENE: gene, GUIDE: guide},
                fold=fold,
                auroc=auroc,
                sparsity=sparsity,
                concentration=concentration,
                status=status,
                reason=reason,
                is_null_guide=gene == "null",
            )
            for gene, guide, fold, (auroc, sparsity, concentration, status), reason in folds
        ]
    )[list(SCORE_COLUMNS)]
    guide, gene = summarize_scores(rows)
    assert tuple(guide.columns) == GUIDE_SUMMARY_COLUMNS and tuple(gene.columns) == GENE_SUMMARY_COLUMNS
    g = guide.set_index(GUIDE)
    assert g.loc["A_1", "n_folds_ok"] == 2 and g.loc["A_1", "auroc"] == pytest.approx(0.7)
    assert g.loc["A_1", "sparsity"] == pytest.approx(0.3) and g.loc["A_1", "concentration"] == pytest.approx(0.2)
    assert g.loc["A_2", "n_folds_ok"] == 1 and g.loc["A_2", "auroc"] == pytest.approx(0.9)
    assert g.loc["B_1", "n_folds_ok"] == 0 and math.isnan(g.loc["B_1", "auroc"])
    assert bool(g.loc["null_0001", "is_null_guide"]) and g.loc["null_0001", "auroc"] == pytest.approx(0.4)
    ge = gene.set_index(GENE)
    assert "null" not in ge.index
    assert ge.loc["A", "n_guides"] == 2
    assert ge.loc["A", "auroc"] == pytest.approx((0.8 + 0.6 + 0.9) / 3)
    assert ge.loc["A", "sparsity"] == pytest.approx((0.2 + 0.4 + 0.6) / 3)
    assert ge.loc["B", "n_guides"] == 0 and math.isnan(ge.loc["B", "auroc"])


# ----------------------------------------------------------------------------- mAP readout


def test_guide_map_separates_strong_from_no_effect_on_wells(tmp_path):
    guides = [("STRONG", "STRONG_1", STRONG_FEATURE, 8.0), ("NONE", "NONE_1", None, 0.0)]
    t = make_table(seed=1, n_controls=40, guides=guides, n_per_guide=6)
    # two sites per well: mAP runs on well means
    t = pd.concat([t, t.assign(**{SITE: 2, IMAGE_INDEX: t[IMAGE_INDEX] + len(t)})], ignore_index=True)
    out = guide_map(t, "base", "m", seed=0, null_size=500)
    assert tuple(out.columns) == MAP_COLUMNS
    assert len(out) == 2 and set(out["model"]) == {"m"}
    res = out.set_index(GUIDE)
    assert (res["n_wells"] == 18).all()  # 6 wells per batch x 3 batches, sites averaged
    assert res.loc["STRONG_1", "mean_average_precision"] > 0.9
    assert res.loc["STRONG_1", "map_p_value"] < 0.01 and res.loc["STRONG_1", "map_q_value"] < 0.05
    assert res.loc["NONE_1", "mean_average_precision"] < 0.6 and res.loc["NONE_1", "map_p_value"] > 0.05
    again = guide_map(t, "base", "m", seed=0, null_size=500)
    pd.testing.assert_frame_equal(out, again)


def test_a_models_variants_in_one_map_readout_call_are_the_tables_of_one_call_each(tmp_path):
    """guide_map_files (one map_readout job per model) writes each variant's mAP table byte for
    byte as guide_map alone does, each with its own variant's seed."""
    from phenoica.utils import write_parquet

    guides = [("STRONG", "STRONG_1", STRONG_FEATURE, 8.0), ("NONE", "NONE_1", None, 0.0)]
    tables = {"base": make_table(seed=1, n_controls=40, guides=guides, n_per_guide=6), "pca": make_table(seed=2)}
    paths = {v: tmp_path / f"{v}.parquet" for v in tables}
    for v, t in tables.items():
        t.to_parquet(paths[v], index=False)
    options = MapReadoutOptions.from_config(
        validate_config({"classify": {"map_null_size": 500, "map_max_null_size": 50000}})
    )
    outputs = {v: tmp_path / v / "map.parquet" for v in tables}
    guide_map_files(paths, outputs, options, model="m")
    for v in tables:
        alone = guide_map(pd.read_parquet(paths[v]), v, "m", seed=0, null_size=500, max_null_size=50000)
        assert write_parquet(alone, tmp_path / "alone" / f"{v}.parquet").read_bytes() == outputs[v].read_bytes()


def test_guide_map_measures_from_each_plates_controls(tmp_path):
    """A common offset of all of a plate's wells (a transform's centre, a plate effect) changes
    no mAP: cosine similarity is taken from the plate's control mean. A large one would otherwise
    make every well alike."""
    guides = [("STRONG", "STRONG_1", STRONG_FEATURE, 8.0), ("NONE", "NONE_1", None, 0.0)]
    t = make_table(seed=1, n_controls=40, guides=guides, n_per_guide=6)
    features = [c for c in t.columns if c.startswith("emb_")]
    shifted = t.copy()
    offsets = np.random.default_rng(2).normal(scale=50.0, size=(t[PLATE].nunique(), len(features)))
    for offset, plate in zip(offsets, sorted(t[PLATE].unique())):
        rows = shifted[PLATE] == plate
        shifted.loc[rows, features] = shifted.loc[rows, features].to_numpy() + offset.astype(np.float32)
    a = guide_map(t, "base", "m", seed=0, null_size=500)
    b = guide_map(shifted, "base", "m", seed=0, null_size=500)
    np.testing.assert_allclose(a["mean_average_precision"], b["mean_average_precision"], atol=1e-3)
    assert b.set_index(GUIDE).loc["STRONG_1", "map_q_value"] < 0.05


def test_a_small_screen_runs_with_the_default_null():
    """3 batches, 16 control wells x 2 sites per plate (the size that failed with the old null):
    the default 100 pseudo-guides are drawn and scored, every real guide keeps all controls."""
    rng = np.random.default_rng(0)
    rows = []
    for b in range(3):
        wells = [("NTC", "NTC_1", CONTROL)] * 16 + [(f"G{g}", f"G{g}_a", PERTURBATION) for g in range(4)]
        for w, (gene, guide, ptype) in enumerate(wells):
            rows += [
                {BATCH: f"B{b}", PLATE: f"P{b}", WELL: f"W{w:02d}", SITE: s, GENE: gene, GUIDE: guide, PERT_TYPE: ptype}
                for s in range(2)
            ]
    t = pd.DataFrame(rows)
    t[IMAGE_INDEX] = t.groupby(PLATE).cumcount()
    for j in range(D):
        t[feature_name(j)] = rng.standard_normal(len(t)).astype(np.float32)
    options = classify_options({"num_boost_round": 5, "concentration": False, "min_train_samples": 2, "n_shards": 1})
    assert options.n_null_guides == "auto"  # the default: 100 on a screen of fewer than 1,001 guides
    out = classify_shard(t, 0, batch_folds(t), options, variant="base", model="m")
    nulls, real = out[out["is_null_guide"]], out[~out["is_null_guide"]]
    assert nulls[GUIDE].nunique() == 100 and (nulls["status"] == "ok").all()
    assert set(real["n_train_neg"]) == {2 * 16 * 2} and set(nulls["n_train_neg"]) == {2 * 15 * 2}
