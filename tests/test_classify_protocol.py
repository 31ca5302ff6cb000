"""classify.protocol: exact is the protocol as before (known scores), fast's fold groups and
training-control subsample follow their stated rules, and a pseudo-guide is built and scored
under fast exactly as a real guide is."""

from __future__ import annotations

import functools
import hashlib

import numpy as np
import pandas as pd
import pytest

from phenoica.classify import (
    ClassifyOptions,
    Fold,
    FoldBins,
    classify_guides,
    control_mask,
    control_strata,
    feature_matrix,
    guide_seed,
    null_guide_design,
    score_guide,
    training_controls,
    trainings,
)
from phenoica.classify._guide_model import score_guide_on
from phenoica.classify._protocol import ControlSample
from phenoica.classify._splits import in_distribution
from phenoica.contract import BATCH, GENE, GUIDE, PLATE
from tests.test_classify import CFG, GUIDES, batch_folds, classify_options, make_table

#: sha256 of the score table (CSV, floats to 12 significant digits) of ``make_table(n_batches=4)``
#: with concentration and 3 pseudo-guides, as the code before classify.protocol existed wrote it
#: (commit 4c18ab8, LightGBM 4.7.0): the exact protocol must reproduce it to the byte. Twelve
#: digits, not seventeen, because AUROC now comes from ranks (``metrics.auroc``), which moves the
#: last unit in place of some values; the seventeen-digit digest of that code was 45e52b87...
#: Taken over the real guides' rows: a pseudo-guide's wells are now a consistent sample of each
#: plate's control wells (``plain_null_design``), another draw than that code's; the whole
#: table's digest then was d3ed3fea..., and its real guides' rows are these to the byte.
EXACT_DIGEST = "a82977ea7d90880da39abc12807b8d71c04d26d063342e312a493a8e2d58b98f"


def _digest(scores: pd.DataFrame) -> str:
    """SHA-256 of the real guides' rows of the score table, with the columns as they were when
    EXACT_DIGEST was taken (the held-out distance, ``distance_sd``, and its standard error over the
    held-out wells, ``distance_se``, came later and are compared apart)."""
    scores = scores[~scores["is_null_guide"].astype(bool)].reset_index(drop=True)
    scores = scores.drop(columns=["distance_sd", "distance_se"], errors="ignore")
    return hashlib.sha256(scores.to_csv(index=False, float_format="%.12g").encode()).hexdigest()


def _masks(folds: list[Fold], n: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    out = []
    for f in folds:
        train, test = np.zeros(n, bool), np.zeros(n, bool)
        train[f.train], test[f.test] = True, True
        out.append((f.name, train, test))
    return out


@pytest.fixture(scope="module")
def table4() -> pd.DataFrame:
    return make_table(n_batches=4)


def _scores(table, protocol, nulls=3, guides=None, **cfg):
    options = classify_options(dict(CFG, concentration=True, protocol=protocol, **cfg), 0)
    return classify_guides(
        table, guides, batch_folds(table), options, "base", "m", nulls=null_guide_design(table, nulls, 0)
    )


def test_exact_protocol_reproduces_the_scores_from_before_it_existed(table4):
    assert _digest(_scores(table4, "exact")) == EXACT_DIGEST


def test_fast_below_its_thresholds_is_exact_to_the_byte(table4):
    # 4 folds <= 4 groups, 180 training controls <= 180: neither approximation acts
    exact_table = _scores(table4, "exact")
    below = _scores(table4, "fast", fast_train_controls=180)
    pd.testing.assert_frame_equal(below, exact_table)  # pseudo-guides too
    assert _digest(below) == EXACT_DIGEST
    pd.testing.assert_series_equal(exact_table["distance_sd"], below["distance_sd"])
    assert _digest(_scores(table4, "fast", fast_fold_groups=2, fast_train_controls=180)) != EXACT_DIGEST


def test_the_default_is_exact_and_fast_caps_a_training_set_at_128_controls(table4):
    """The schema's default protocol is exact (the earlier versions' table); ``classify.protocol:
    fast`` caps a training set at 128 controls (180 here: it acts, the scores move)."""
    from phenoica.contract import validate_config

    defaults = ClassifyOptions.from_config(validate_config({}))
    assert (defaults.protocol, defaults.max_train_controls) == ("exact", None)
    fast = ClassifyOptions.from_config(validate_config({"classify": {"protocol": "fast"}}))
    assert (fast.max_train_controls, fast.max_fold_groups) == (128, 4)
    options = classify_options(dict(CFG, concentration=True, protocol="fast"), 0)
    capped = classify_guides(
        table4, None, batch_folds(table4), options, "base", "m", nulls=null_guide_design(table4, 3, 0)
    )
    assert _digest(capped) != EXACT_DIGEST and (capped["n_train_neg"] <= 128).all()
    default = classify_guides(
        table4,
        None,
        batch_folds(table4),
        classify_options(dict(CFG, concentration=True), 0),
        "base",
        "m",
        nulls=null_guide_design(table4, 3, 0),
    )
    assert _digest(default) == _digest(_scores(table4, "exact")) == EXACT_DIGEST


def test_fold_groups_known_answer():
    batches = np.repeat([f"B{i:02d}" for i in range(10)], 3)
    t = pd.DataFrame({BATCH: batches})
    folds = [Fold(b, np.flatnonzero(batches != b), np.flatnonzero(batches == b), (b,)) for b in sorted(set(batches))]
    sets = trainings(folds, _masks(folds, len(t)), 4)
    assert [s.name for s in sets] == ["B00+B04+B08", "B01+B05+B09", "B02+B06", "B03+B07"]
    for s in sets:
        members = [m for m, _ in s.members]
        held = np.isin(batches, members)
        np.testing.assert_array_equal(s.train, ~held)  # trains on every batch outside the group
        for m, test in s.members:
            np.testing.assert_array_equal(test, batches == m)  # each fold scored on its own batch
    # as many or fewer folds than groups, or no grouping asked: one training per fold, named by it
    for k in (10, 11, None):
        same = trainings(folds, _masks(folds, len(t)), k)
        assert [(s.name, [m for m, _ in s.members]) for s in same] == [(f.name, [f.name]) for f in folds]


def test_in_distribution_repeats_are_never_grouped(table4):
    folds = in_distribution(table4, 0.25, 6, seed=0)
    assert len(trainings(folds, _masks(folds, len(table4)), 2)) == 6


def test_training_controls_rule():
    rng = np.random.default_rng(0)
    n = 1000
    strata = rng.integers(0, 7, n)
    train_controls = np.sort(rng.choice(n, 600, replace=False))
    a = training_controls(train_controls, strata, 150, seed=3, name="B1+B3")
    assert len(a) == 150 and np.all(np.diff(a) > 0) and np.isin(a, train_controls).all()
    np.testing.assert_array_equal(a, training_controls(train_controls, strata, 150, seed=3, name="B1+B3"))
    assert not np.array_equal(a, training_controls(train_controls, strata, 150, seed=4, name="B1+B3"))
    assert not np.array_equal(a, training_controls(train_controls, strata, 150, seed=3, name="B0+B2"))
    # stratified: every (batch, plate) stratum within one row of its proportional share
    have = np.bincount(strata[a], minlength=7)
    share = 150 * np.bincount(strata[train_controls], minlength=7) / 600
    assert np.all(np.abs(have - share) < 1)
    # at or under the cap, or no cap: every training control
    np.testing.assert_array_equal(training_controls(train_controls, strata, 600, 3, "x"), train_controls)
    np.testing.assert_array_equal(training_controls(train_controls, strata, None, 3, "x"), train_controls)


def test_fast_scores_are_the_group_model_on_each_fold_against_the_shared_subsample(table4):
    """A real guide's fast score = a model trained on its group's rows against the group's
    control subsample, scored on each member fold's held-out rows alone."""
    cfg = dict(CFG, concentration=True, protocol="fast", fast_fold_groups=2, fast_train_controls=100)
    options = classify_options(cfg, 0)
    scores = classify_guides(table4, [("WEAK", "WEAK_1")], batch_folds(table4), options, "base", "m")
    X, _ = feature_matrix(table4)
    folds = batch_folds(table4)
    ctrl = control_mask(table4)
    guide = (table4[GUIDE] == "WEAK_1").to_numpy()
    (group,) = [s for s in trainings(folds, _masks(folds, len(table4)), 2) if s.name == "holdout_B0+holdout_B2"]
    sub = training_controls(np.flatnonzero(group.train & ctrl), control_strata(table4), 100, 0, group.name)
    assert len(sub) == 100
    tr = np.flatnonzero(group.train & guide)
    sample = ControlSample(sub, int((group.train & ctrl).sum()))
    assert sample.weight is not None and sample.weight > 1  # the cap acts: the sample is weighted
    block = FoldBins.build(X, sub, sample.params(options.booster_params()), sample.weight).block(tr)
    tests = []
    for _, test in group.members:
        te, te_ctrl = np.flatnonzero(test & guide), np.flatnonzero(test & ctrl)
        tests.append((np.concatenate([X[te_ctrl], X[te]]), np.r_[np.zeros(len(te_ctrl)), np.ones(len(te))]))
    params = dict(sample.params(options.booster_params()), seed=guide_seed(0, "WEAK", "WEAK_1", group.name))
    expected = score_guide_on(functools.partial(block.guide_dataset, tr), tests, params, 20, 0.25)
    for (fold, _), want in zip(group.members, expected):
        row = scores[scores["fold"] == fold].iloc[0]
        assert row["n_train_neg"] == 100 and row["n_train_pos"] == len(tr)
        assert row["auroc"] == want.auroc and row["concentration"] == want.concentration
    # one held-out set: score_guide is score_guide_on of that set
    one = score_guide(functools.partial(block.guide_dataset, tr), *tests[0], params, 20, 0.25)
    assert one == expected[0]


def test_fast_scores_do_not_depend_on_the_other_guides_or_the_block(table4, monkeypatch):
    cfg = {"fast_fold_groups": 2, "fast_train_controls": 100}
    every = _scores(table4, "fast", **cfg)
    some = _scores(table4, "fast", guides=[("WEAK", "WEAK_2"), ("NONE", "NONE_1")], **cfg)
    mine = every.set_index([GUIDE, "fold"]).loc[some.set_index([GUIDE, "fold"]).index]
    pd.testing.assert_frame_equal(mine.reset_index(), some.set_index([GUIDE, "fold"]).reset_index())
    monkeypatch.setattr("phenoica.classify._engine.GUIDES_PER_BLOCK", 1)
    opts = classify_options(dict(CFG, concentration=True, protocol="fast", **cfg), 0)
    small = classify_guides(table4, None, batch_folds(table4), opts, "base", "m", nulls=null_guide_design(table4, 3, 0))
    pd.testing.assert_frame_equal(small, every)


def test_a_pseudo_guide_trains_on_the_same_subsample_less_its_own_wells(table4):
    cfg = {"fast_fold_groups": 2, "fast_train_controls": 100}
    scores = _scores(table4, "fast", nulls=3, **cfg)
    folds = batch_folds(table4)
    ctrl = control_mask(table4)
    design = null_guide_design(table4, 3, 0)
    for group in trainings(folds, _masks(folds, len(table4)), 2):
        sub = training_controls(np.flatnonzero(group.train & ctrl), control_strata(table4), 100, 0, group.name)
        for fold, _ in group.members:
            rows = scores[scores["fold"] == fold]
            assert (rows.loc[~rows["is_null_guide"], "n_train_neg"] == 100).all()
            for target in design:
                tr = target.rows[group.train[target.rows]]
                row = rows[rows[GUIDE] == target.guide].iloc[0]
                assert row["n_train_pos"] == len(tr)  # the group's training rows, as a real guide's
                assert row["n_train_neg"] == 100 - np.isin(tr, sub).sum()


def test_grouping_can_leave_a_guide_without_training_rows_and_says_so():
    """A guide present only in batches of one group has no training rows there: skipped with the
    reason, where exact scores it (the stated cost of grouping)."""
    t = make_table(n_batches=4, guides=GUIDES[:2])
    keep = ~((t[GUIDE] == "NONE_1") & t[BATCH].isin(["B1", "B3"])).to_numpy()
    t = t[keep].reset_index(drop=True)
    fast = _scores(t, "fast", nulls=0, fast_fold_groups=2)
    exact = _scores(t, "exact", nulls=0)
    none_fast = fast[(fast[GUIDE] == "NONE_1") & fast["fold"].isin(["holdout_B0", "holdout_B2"])]
    assert (none_fast["status"] == "skipped").all()
    assert none_fast["reason"].str.contains("too few training samples").all()
    none_exact = exact[(exact[GUIDE] == "NONE_1") & exact["fold"].isin(["holdout_B0", "holdout_B2"])]
    assert (none_exact["status"] == "ok").all()


@pytest.mark.parametrize(
    "cfg, key",
    [
        ({"protocol": "quick"}, "protocol"),
        ({"fast_fold_groups": 0}, "fast_fold_groups"),
        ({"fast_train_controls": 0}, "fast_train_controls"),
        ({"fast_train_controls": 10.5}, "fast_train_controls"),
    ],
)
def test_bad_protocol_settings_are_errors_naming_the_key(cfg, key):
    with pytest.raises(ValueError, match=key):
        classify_options(cfg, 0)


def test_strata_are_batch_and_plate():
    t = pd.DataFrame({BATCH: ["B1", "B1", "B2", "B2"], PLATE: ["P1", "P2", "P1", "P1"], GENE: "g"})
    codes = control_strata(t)
    assert codes[2] == codes[3] and len(set(codes[:3])) == 3


def test_the_sample_keeps_each_plate_its_share_known_answer():
    """Training controls on 3 plates of 2 batches (8, 4 and 12 rows), a cap of 12 of the 24: each
    (batch, plate) keeps exactly half of its rows, whatever the seed."""
    t = pd.DataFrame({BATCH: ["B1"] * 12 + ["B2"] * 12, PLATE: ["P1"] * 8 + ["P2"] * 4 + ["P1"] * 12, GENE: "g"})
    strata = control_strata(t)
    assert sorted(np.bincount(strata).tolist()) == [4, 8, 12]
    for seed in range(5):
        picked = training_controls(np.arange(24), strata, 12, seed, "B0")
        assert np.bincount(strata[picked], minlength=3).tolist() == (np.bincount(strata) // 2).tolist()


def test_the_sample_stands_for_its_training_set():
    """C of N training controls: every training row weighs N / C and a leaf needs
    min_data_in_leaf x C / N rows (rounded, at least 1); all of them kept: no weights, the
    parameters as given."""
    rows = np.arange(0, 256, 2)
    half = ControlSample(rows, 256)
    assert (half.fraction, half.weight) == (0.5, 2.0)
    assert half.params({"lambda_l1": 5.0})["min_data_in_leaf"] == 10  # LightGBM's 20, halved
    assert half.params({"min_data_in_leaf": 3})["min_data_in_leaf"] == 2
    assert half.params({"lambda_l1": 5.0})["lambda_l1"] == 5.0  # the weights carry the scale
    assert ControlSample(rows[:1], 1000).params({})["min_data_in_leaf"] == 1
    whole = ControlSample(rows, len(rows))
    assert whole.weight is None and whole.fraction == 1.0 and whole.params({"a": 1}) == {"a": 1}
    # the weight reaches every row of a guide's training set (controls and its own rows)
    X = np.random.default_rng(0).normal(size=(300, 3))
    block = FoldBins.build(X, rows, half.params({"verbosity": -1}), half.weight).block(np.array([1, 3, 5]))
    data = block.guide_dataset(np.array([1, 3, 5])).construct()
    assert data.num_data() == 131 and np.all(data.get_weight() == 2.0)
    assert FoldBins.build(X, rows, {"verbosity": -1}).block(np.array([1])).dataset.get_weight() is None
