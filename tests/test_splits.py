"""Batch-effect splits: leave-one-batch-out and stratified in-distribution holdouts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from phenoica.classify import Fold, SplitOptions, folds_table, leave_one_batch_out, make_folds, read_folds
from phenoica.classify._splits import folds_from_table, in_distribution
from phenoica.contract import BATCH, GENE, GUIDE, PERT_TYPE, PLATE, WELL, ScreenError, validate_config
from phenoica.utils import write_parquet
from tests.conftest import make_metadata


def screen(n_batches: int = 4, seed: int = 0) -> pd.DataFrame:
    """Uneven batches and guides, rows shuffled so batches interleave."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(n_batches):
        for g in range(7):
            rows += [{BATCH: f"B{b}", GUIDE: f"g{g}", "emb_0000": 0.0}] * int(rng.integers(3, 30))
    return pd.DataFrame(rows).sample(frac=1.0, random_state=seed).reset_index(drop=True)


def test_leave_one_batch_out_tests_each_batch_once():
    table = screen()
    folds = leave_one_batch_out(table)
    batches = table[BATCH].to_numpy()
    assert [f.name for f in folds] == ["B0", "B1", "B2", "B3"]
    tested = np.concatenate([f.test for f in folds])
    assert np.array_equal(np.sort(tested), np.arange(len(table)))  # every row tested exactly once
    for fold in folds:
        assert set(batches[fold.test]) == {fold.name} and fold.heldout_batches == (fold.name,)
        assert fold.name not in set(batches[fold.train])
        assert np.intersect1d(fold.train, fold.test).size == 0
        assert fold.train.size + fold.test.size == len(table)


def test_leave_one_batch_out_needs_two_batches(metadata):
    one = metadata.assign(**{BATCH: "B1"})
    with pytest.raises(ScreenError, match="at least 2 batches"):
        leave_one_batch_out(one)
    with pytest.raises(ScreenError, match="missing column Metadata_Batch"):
        leave_one_batch_out(metadata.drop(columns=BATCH))


def test_in_distribution_fractions_stratification_and_seed():
    table = screen()
    folds = in_distribution(table, 0.25, 3, seed=11)
    assert len(folds) == 3
    for fold in folds:
        assert np.intersect1d(fold.train, fold.test).size == 0
        assert fold.train.size + fold.test.size == len(table)
        assert fold.heldout_batches == ()
        held = np.zeros(len(table), dtype=bool)
        held[fold.test] = True
        per_batch = pd.Series(held).groupby(table[BATCH]).agg(["sum", "size"])
        assert ((per_batch["sum"] - 0.25 * per_batch["size"]).abs() <= 0.5).all()
        per_guide = pd.Series(held).groupby([table[BATCH], table[GUIDE]]).agg(["sum", "size"])
        assert ((per_guide["sum"] - 0.25 * per_guide["size"]).abs() < 1).all()
    assert not np.array_equal(folds[0].test, folds[1].test)  # repeats draw different images
    again = in_distribution(table, 0.25, 3, seed=11)
    assert all(np.array_equal(a.test, b.test) for a, b in zip(folds, again))
    other = in_distribution(table, 0.25, 3, seed=12)
    assert not np.array_equal(folds[0].test, other[0].test)
    with pytest.raises(ValueError, match="holdout_fraction"):
        in_distribution(table, 1.5, 3, seed=0)


def test_leave_one_batch_out_rejects_guides_in_one_batch_and_batches_without_controls():
    table = make_metadata(n_plates=6)  # batches B1, B2, B3; guides G1 and G3 on every plate
    assert len(leave_one_batch_out(table)) == 3
    lonely = table.copy()
    lonely.loc[(lonely[GUIDE] == "G3_g1") & (lonely[BATCH] != "B2"), GUIDE] = "G3_g2"
    lonely.loc[(lonely[GUIDE] == "G1_g1") & (lonely[BATCH] != "B1"), GUIDE] = "G1_g2"
    with pytest.raises(
        ScreenError,
        match=r"2 of 4 guide\(s\) are present in only one batch: "
        r"G1 / G1_g1 \(only in B1\), G3 / G3_g1 \(only in B2\).*in_distribution",
    ):
        leave_one_batch_out(lonely)
    no_ctrl = table[~((table[BATCH] == "B3") & (table[PERT_TYPE] == "control"))]
    with pytest.raises(ScreenError, match=r"batch\(es\) \['B3'\] hold no control samples"):
        leave_one_batch_out(no_ctrl)


def test_in_distribution_holds_out_whole_wells():
    table = make_metadata(n_plates=4, wells=16, sites=3)
    for fold in in_distribution(table, 0.25, 4, seed=3):
        held = np.zeros(len(table), dtype=bool)
        held[fold.test] = True
        per_well = pd.Series(held).groupby([table[PLATE], table[WELL]]).agg(["min", "max"])
        assert (per_well["min"] == per_well["max"]).all()  # no well straddles train and test
        wells = table.assign(held=held).drop_duplicates([PLATE, WELL])
        per_batch = wells.groupby(BATCH)["held"].agg(["sum", "size"])
        assert ((per_batch["sum"] - 0.25 * per_batch["size"]).abs() <= 0.5).all()
        per_guide = wells.groupby([BATCH, GENE])["held"].agg(["sum", "size"])
        assert ((per_guide["sum"] - 0.25 * per_guide["size"]).abs() < 1).all()


def split_options(seed: int = 0, **splits: object) -> SplitOptions:
    """The folds' options of a validated config whose ``splits`` section holds ``splits``."""
    return SplitOptions.from_config(validate_config({"splits": splits, "seed": seed}))


def test_make_folds_dispatches():
    table = screen(n_batches=3)
    assert split_options().scheme == "leave_one_batch_out"  # the schema's default
    assert len(make_folds(table, split_options())) == 3
    folds = make_folds(table, split_options(scheme="in_distribution", holdout_fraction=0.5, n_folds=2))
    assert len(folds) == 2 and abs(folds[0].test.size - len(table) / 2) <= 3
    again = make_folds(table, split_options(scheme="in_distribution", holdout_fraction=0.5, n_folds=2, seed=1))
    assert not np.array_equal(folds[0].test, again[0].test)  # the seed draws the holdout
    with pytest.raises(ValueError, match="scheme"):
        make_folds(table, split_options()._replace(scheme="k_fold"))


def test_leave_one_batch_out_params_hold_the_scheme_alone():
    """Leave-one-batch-out draws nothing: the seed, the share and the repeats are no part of its
    params; under in_distribution each of them is."""
    base = repr(split_options())
    assert base == "SplitOptions(scheme='leave_one_batch_out')"
    assert repr(split_options(seed=4, holdout_fraction=0.5, n_folds=7)) == base
    drawn = repr(split_options(scheme="in_distribution"))
    for change in ({"seed": 4}, {"holdout_fraction": 0.5}, {"n_folds": 7}):
        assert repr(split_options(**{"scheme": "in_distribution", **change})) != drawn, change


def test_folds_table_round_trip(tmp_path):
    table = make_metadata(n_plates=4)
    folds = leave_one_batch_out(table)
    long = folds_table(table, folds)
    assert len(long) == len(folds) * len(table)
    assert set(long["split"]) == {"train", "test"}
    test_rows = long[long["split"] == "test"]
    assert (test_rows["Metadata_Batch"] == test_rows["fold"]).all()
    write_parquet(long, tmp_path / "splits.parquet")
    back = folds_from_table(pd.read_parquet(tmp_path / "splits.parquet"))
    read = read_folds(tmp_path / "splits.parquet", table)
    for a, b, c in zip(folds, back, read):
        assert a.name == b.name == c.name and a.heldout_batches == b.heldout_batches == c.heldout_batches
        assert np.array_equal(a.train, b.train) and np.array_equal(a.test, b.test)
        assert np.array_equal(a.test, c.test)
    with pytest.raises(ScreenError, match="different table"):
        read_folds(tmp_path / "splits.parquet", table.iloc[::-1].reset_index(drop=True))
    with pytest.raises(ScreenError, match="out of range"):
        read_folds(tmp_path / "splits.parquet", table.iloc[:5])


def test_fold_is_read_only_and_disjoint():
    fold = Fold("x", np.array([3, 1]), np.array([2]))
    assert fold.train.tolist() == [1, 3]
    with pytest.raises(ValueError):
        fold.train[0] = 5
    with pytest.raises(ValueError, match="both train and test"):
        Fold("y", np.array([1, 2]), np.array([2]))
