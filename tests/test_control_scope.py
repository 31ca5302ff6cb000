"""classify.control_scope: plates classifies each guide against the controls of its own plates:
on a screen whose guides are on every plate it is the fold's classification to the byte; on a
screen of several plate maps a guide's scores are those of its plate map classified alone (they
do not depend on plates it is not on); a guide whose plates hold no controls is skipped with the
reason, and the door counts it before any job."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from phenoica.classify import (
    ClassifyOptions,
    classify_guides,
    leave_one_batch_out,
    null_guide_design,
)
from phenoica.classify._capacity import _fold_counts, classifier_capacity
from phenoica.classify._engine import fold_masks
from phenoica.classify._null import guide_samples, guides_of
from phenoica.classify._options import SplitOptions
from phenoica.classify._protocol import Training, plate_trainings, trainings
from phenoica.classify._splits import make_folds
from phenoica.contract import GUIDE, PERT_TYPE, PLATE, ScreenError, validate_config
from phenoica.hits import ReferenceOptions
from phenoica.screen import ArrayedDesign, screen_profiles

#: A small arrayed screen (2 batches x 4 replicate plates, 8 control wells a plate, 40 features).
SMALL = ArrayedDesign(
    n_batches=2,
    plates_per_batch=4,
    n_effect_genes=3,
    n_null_genes=2,
    n_control_constructs=2,
    n_latent=6,
    n_features=40,
)


def _options(scope: str, **classify: object) -> ClassifyOptions:
    config = validate_config(
        {
            "seed": 3,
            "classify": {
                "control_scope": scope,
                "num_boost_round": 20,
                "lightgbm": {"num_threads": 1, "min_data_in_leaf": 5},
                **classify,
            },
        }
    )
    return ClassifyOptions.from_config(config)


def _scores(table: pd.DataFrame, scope: str, nulls: int = 4, **classify: object) -> pd.DataFrame:
    options = _options(scope, **classify)
    folds = leave_one_batch_out(table)
    return classify_guides(table, None, folds, options, "base", "m", nulls=null_guide_design(table, nulls, 3))


def _first_map(table: pd.DataFrame) -> set[str]:
    """The plates of the first plate map: those holding the first guide in name order."""
    first_guide = sorted(table.loc[table[PERT_TYPE] == "perturbation", GUIDE].unique())[0]
    return set(table.loc[table[GUIDE] == first_guide, PLATE])


@pytest.fixture(scope="module")
def two_maps() -> pd.DataFrame:
    return screen_profiles(dataclasses.replace(SMALL, plate_maps=2), 0)[0]


def test_where_every_guide_is_on_every_plate_plates_is_the_fold_to_the_byte():
    table = screen_profiles(SMALL, 0)[0]
    assert _scores(table, "plates").equals(_scores(table, "fold"))


def test_a_guide_is_scored_against_its_own_plates_controls(two_maps):
    scores = _scores(two_maps, "plates")
    fold = _scores(two_maps, "fold")
    own_plates = SMALL.plates_per_batch * SMALL.control_wells  # one map's plates in one batch
    real = ~scores["is_null_guide"]
    assert (scores["status"] == "ok").all()
    # every guide sits on one map: its replicate plates of the training batch and of the held-out one
    assert set(scores.loc[real, "n_train_neg"]) == {own_plates}
    assert set(scores.loc[real, "n_test_neg"]) == {own_plates}
    assert set(fold.loc[~fold["is_null_guide"], "n_train_neg"]) == {2 * own_plates}
    # a pseudo-guide, on its template's plates, leaves its own wells out of those
    nulls = scores[scores["is_null_guide"]]
    assert (nulls["n_train_neg"] < own_plates).all() and (nulls["n_train_neg"] > 0).all()


def test_a_guides_scores_do_not_depend_on_plates_it_is_not_on(two_maps):
    """Invariance: classified against its own plates, a guide of map 1 scores as it does when the
    screen is map 1's plates alone (same seeds, same rows, bins found on the same controls)."""
    scores = _scores(two_maps, "plates", concentration=True)
    map1 = _first_map(two_maps)
    alone = two_maps[two_maps[PLATE].isin(map1)].reset_index(drop=True)
    alone_scores = _scores(alone, "fold", concentration=True)
    guides = alone_scores.loc[~alone_scores["is_null_guide"], GUIDE].unique()
    assert len(guides) >= 2
    a = scores[scores[GUIDE].isin(guides) & ~scores["is_null_guide"]].reset_index(drop=True)
    b = alone_scores[~alone_scores["is_null_guide"]].reset_index(drop=True)
    assert len(a) == len(b) > 0
    for col in ("fold", "n_train_neg", "n_test_neg", "auroc", "sparsity", "concentration", "distance_sd"):
        assert a[col].tolist() == b[col].tolist(), col
    assert a["sparsity"].notna().all()  # real models, that split
    # and against every control of the fold they differ
    fold = _scores(two_maps, "fold", concentration=True)
    f = fold[fold[GUIDE].isin(guides) & ~fold["is_null_guide"]].reset_index(drop=True)
    assert not np.allclose(f["auroc"], a["auroc"])


def test_plate_trainings_split_a_fold_by_its_targets_plates_known_answer():
    strata = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    train = np.array([1, 1, 1, 1, 0, 0, 0, 0], dtype=bool)
    test = ~train
    training = Training("b1", train, (("b1", test),))

    @dataclasses.dataclass
    class Target:
        rows: np.ndarray

    targets = [Target(np.array([0, 4])), Target(np.array([2, 6])), Target(np.array([1, 5]))]
    parts = plate_trainings(strata, training, targets)
    assert [idx for _, idx in parts] == [[0, 2], [1]]
    first, second = parts[0][0], parts[1][0]
    assert first.name == second.name == "b1"
    assert first.train.tolist() == [1, 1, 0, 0, 0, 0, 0, 0]
    assert first.members[0][1].tolist() == [0, 0, 0, 0, 1, 1, 0, 0]
    assert second.train.tolist() == [0, 0, 1, 1, 0, 0, 0, 0]
    assert second.members[0][1].tolist() == [0, 0, 0, 0, 0, 0, 1, 1]


def test_a_guide_whose_plates_hold_no_controls_is_skipped_and_the_door_counts_it(two_maps):
    # the second map's plates of the first batch lose their control wells
    map1 = _first_map(two_maps)
    batch1 = two_maps["Metadata_Batch"] == sorted(two_maps["Metadata_Batch"].unique())[0]
    drop = batch1 & ~two_maps[PLATE].isin(map1) & (two_maps[PERT_TYPE] == "control")
    table = two_maps[~drop].reset_index(drop=True)
    scores = _scores(table, "plates", nulls=0)
    skipped = scores[scores["status"] == "skipped"]
    assert len(skipped) > 0
    # trained on batch 1 (the fold holding out batch 2): no training control on their plates
    assert skipped["reason"].str.contains("too few training controls on its plates").any()
    # held out in batch 1: no held-out control on their plates
    assert skipped["reason"].str.contains("no held-out control on its plates").any()
    assert not set(skipped[GUIDE]) & set(table.loc[table[PLATE].isin(map1), GUIDE])
    # every second-map guide loses both folds, so the door names them unscored, and why
    options = _options("plates", n_null_guides=0)
    capacity = classifier_capacity(table, SplitOptions("leave_one_batch_out", 0.25, 4, 3), options, "parametric", 3)
    lost = set(skipped[GUIDE])
    assert capacity.n_guides - capacity.n_scored == len(lost)
    assert "for want of controls on their own plates" in capacity.reason
    assert "classify.control_scope" in capacity.reason
    # under the fold's scope every guide is scored
    assert (_scores(table, "fold", nulls=0)["status"] == "ok").all()


def test_the_door_counts_each_guides_own_plates_controls(two_maps):
    options = _options("plates")
    splits = SplitOptions("leave_one_batch_out", 0.25, 4, 3)
    capacity = classifier_capacity(two_maps, splits, options, "parametric", 3)
    own_plates = SMALL.plates_per_batch * SMALL.control_wells
    assert capacity.units["train_controls_per_fold"] == {
        "min": own_plates,
        "median": float(own_plates),
        "max": own_plates,
    }
    assert (
        "train_controls_per_fold" not in classifier_capacity(two_maps, splits, _options("fold"), "parametric", 3).units
    )


def test_the_scope_is_named_in_the_params_only_where_it_is_plates():
    assert "control_scope" not in _options("fold").depends_on()
    assert "control_scope" in _options("plates").depends_on()


def test_in_distribution_folds_keep_the_fold_scores_where_every_guide_is_on_every_plate():
    """A guide's plates are those of all its rows, not only of a fold's held-out ones."""
    table = screen_profiles(SMALL, 0)[0]
    splits = SplitOptions("in_distribution", 0.25, 2, 3)
    folds = make_folds(table, splits)
    nulls = null_guide_design(table, 4, 3)
    runs = [
        classify_guides(table, None, folds, _options(scope), "base", "m", nulls=nulls) for scope in ("fold", "plates")
    ]
    assert runs[0].equals(runs[1])


@pytest.mark.parametrize("protocol", ["exact", "fast"])
def test_the_door_counts_what_the_engine_scores_pair_by_pair(protocol):
    """On 5 batches of 2 plate maps (fast: 3 fold groups, a cap of 40 training controls), the
    second map's control wells removed in 2 batches, and pseudo-guides on the same plates: the
    door's scored (guide, fold) pairs are the engine's, for the guides and the null alike."""
    table = screen_profiles(dataclasses.replace(SMALL, n_batches=5, plate_maps=2), 1)[0]
    map1 = _first_map(table)
    batches = sorted(table["Metadata_Batch"].unique())
    drop = table["Metadata_Batch"].isin(batches[:2]) & ~table[PLATE].isin(map1) & (table[PERT_TYPE] == "control")
    table = table[~drop].reset_index(drop=True)
    options = _options("plates", protocol=protocol, fast_fold_groups=3, fast_train_controls=40)
    folds = leave_one_batch_out(table)
    nulls = null_guide_design(table, 12, 3)
    scores = classify_guides(table, None, folds, options, "base", "m", nulls=nulls)
    assert (scores["status"] == "skipped").any() and (scores["status"] == "ok").any()
    assert scores.loc[scores["status"] == "ok", "auroc"].notna().all()
    assert (scores.loc[scores["status"] == "ok", "n_test_neg"] > 0).all()
    real = guide_samples(table, guides_of(table))
    # the door's columns: the folds in the order of the training sets that hold them
    sets = trainings(folds, fold_masks(folds, len(table)), options.max_fold_groups)
    fold_names = [name for t in sets for name, _ in t.members]
    assert len(sets) == (3 if protocol == "fast" else 5)
    for targets in (real, nulls):
        ok = _fold_counts(list(targets), table, folds, options)[2]
        engine = (
            scores.assign(ok=scores["status"] == "ok")
            .pivot_table(index=GUIDE, columns="fold", values="ok", aggfunc="first")
            .loc[[t.guide for t in targets], fold_names]
            .to_numpy(dtype=bool)
        )
        np.testing.assert_array_equal(ok, engine)


def test_a_pseudo_guide_without_negatives_on_its_plates_is_skipped():
    """A pseudo-guide whose own wells are the only held-out controls on its plates has no
    negatives left: skipped with the reason, never scored on nothing."""
    design = dataclasses.replace(SMALL, n_control_constructs=1, control_wells_per_construct=1, plate_maps=2)
    table = screen_profiles(design, 0)[0]
    splits = SplitOptions("in_distribution", 0.25, 2, 3)
    folds = make_folds(table, splits)
    options = _options("plates", min_test_samples=1)
    scores = classify_guides(table, None, folds, options, "base", "m", nulls=null_guide_design(table, 8, 3))
    ok = scores[scores["status"] == "ok"]
    assert (ok["n_test_neg"] > 0).all() and ok["auroc"].notna().all()
    assert scores["reason"].str.contains("no held-out control on its plates").any()


def test_a_cap_below_the_training_floor_is_an_error_under_either_scope(two_maps):
    folds = leave_one_batch_out(two_maps)
    for scope in ("fold", "plates"):
        options = _options(scope, protocol="fast", fast_train_controls=2)
        with pytest.raises(ScreenError, match="classify.min_train_samples"):
            classify_guides(two_maps, None, folds, options, "base", "m")


def test_the_reference_readout_never_reads_the_scope():
    base = {"screen": {"reference": {"rule": "named_like_gene"}}}
    params = [
        repr(ReferenceOptions.from_config(validate_config({**base, "classify": {"control_scope": scope}})))
        for scope in ("fold", "plates")
    ]
    assert params[0] == params[1]
    assert "control_scope" not in params[0]
