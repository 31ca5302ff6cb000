"""The mAP readout's answers do not hinge on one control well or one seed: the plates' control
centre (phenoica.classify._map_readout.control_centre) and the p-values drawn until their
Benjamini-Hochberg calls are settled (phenoica.classify._map_null)."""

from __future__ import annotations

import itertools
import logging
from math import comb

import numpy as np
import pandas as pd
import pytest

from phenoica.classify import _map_null as map_null
from phenoica.classify import centered_on_plate_controls, guide_map
from phenoica.classify._map_readout import CLIP_MADN, control_centre
from phenoica.contract import CONTROL, GUIDE, PERT_TYPE, validate_config
from phenoica.contract._config import ConfigError
from phenoica.screen import arrayed
from phenoica.utils import bh_qvalues

Q = 0.05


def _screen(design: arrayed.ArrayedDesign, seed: int = 0) -> pd.DataFrame:
    return arrayed.screen_profiles(design, seed)[0]


def _with_outlier_well(table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The table with its first control well's first feature set 1,000 SDs off, and that row."""
    feature = next(c for c in table.columns if not c.startswith("Metadata_"))
    row = int(np.flatnonzero(table[PERT_TYPE] == CONTROL)[0])
    out = table.copy()
    out.loc[row, feature] = 1000.0 * table[feature].std()
    return out, row


def _active(table: pd.DataFrame, seed: int = 0, **null) -> pd.Series:
    out = guide_map(table, "base", "m", seed=seed, **null).set_index(GUIDE)
    return out["map_q_value"] < Q


# ----------------------------------------------------------------------------- the control centre


def test_control_centre_is_the_mean_of_well_behaved_controls_and_ignores_one_wild_well():
    rng = np.random.default_rng(0)
    controls = rng.normal(size=(16, 40))
    off = control_centre(controls) - controls.mean(axis=0)
    assert (off == 0).mean() > 0.7 and np.abs(off).max() < 0.25  # the mean, or near it (its own noise: 0.25)
    wild = controls.copy()
    wild[3, 7] = 1000.0
    moved = control_centre(wild) - control_centre(controls)
    assert abs(moved[7]) < (CLIP_MADN + 2) / 16 and np.all(moved[np.arange(40) != 7] == 0)
    assert abs(wild[:, 7].mean() - controls[:, 7].mean()) > 60  # what the mean did


def test_control_centre_is_the_median_where_most_controls_hold_one_value():
    """A feature whose controls are mostly one value (MAD 0) and a few extreme wells, as
    pycytominer exports hold: the limits close and the centre is that value."""
    controls = np.zeros((16, 2))
    controls[:5, 0] = [4e4, 3e4, 1e4, -2e4, 5e3]
    controls[:, 1] = np.arange(16.0)
    centre = control_centre(controls)
    assert centre[0] == 0.0 and centre[1] == pytest.approx(7.5)


def test_plates_are_centred_on_their_own_controls_and_a_plate_of_two_controls_is_logged(caplog):
    X = np.array([[1.0], [3.0], [2.0], [10.0], [14.0], [12.0], [11.0], [50.0]])
    plate = np.array(["a", "a", "a", "b", "b", "b", "b", "c"])
    is_control = np.array([True, True, False, True, True, True, False, False])
    with caplog.at_level(logging.WARNING):
        out = centered_on_plate_controls(X, plate, is_control)
    np.testing.assert_allclose(out[:, 0], [-1.0, 1.0, 0.0, -2.0, 2.0, 0.0, -1.0, 50.0])
    assert "a (2)" in caplog.text and "b (3)" not in caplog.text


# ----------------------------------------------------------------------------- one outlier well


def test_removing_an_outlier_control_well_moves_the_active_count_by_at_most_5_percent():
    """The arrayed scenario as shipped (seed 0), one control well with one feature 1,000 SDs off
    (an export artefact): removing that well changes the active count by at most 5%, and so does
    removing an ordinary control well. With the plates centred on their control means the wild
    well called 0 guides instead of 26; with copairs' own null, which draws a guide's wells
    independently once their configurations differ, removing any one control well moved the count
    from 26 to 31."""
    table = _screen(arrayed.ArrayedDesign())
    wild, row = _with_outlier_well(table)
    kept = int(_active(wild).sum())
    assert kept >= 20
    controls = np.flatnonzero(table[PERT_TYPE] == CONTROL)
    for screen, dropped in ((wild, row), (table, int(controls[37])), (table, int(controls[-1]))):
        removed = int(_active(screen.drop(index=dropped).reset_index(drop=True)).sum())
        assert abs(kept - removed) <= 0.05 * kept, (dropped, kept, removed)


def test_an_outlier_control_well_changes_no_call_on_the_arrayed_scenario():
    """The arrayed scenario as shipped (seed 0): the calls with the 1,000-SD well are the calls of
    the clean screen (the mean centring called 0 guides there instead of 26)."""
    table = _screen(arrayed.ArrayedDesign())
    wild, _ = _with_outlier_well(table)
    clean, kept = _active(table), _active(wild)
    assert clean.sum() >= 20 and (clean == kept).all()


# ----------------------------------------------------------------------------- seeds


def _exact_ap_tail(n_pos: int, total: int) -> np.ndarray:
    """Every AP of a random rank list of ``n_pos`` positives among ``total`` (all placements)."""
    ranks = np.array(list(itertools.combinations(range(1, total + 1), n_pos)), dtype=np.float64)
    return np.sort((np.arange(1, n_pos + 1) / ranks).mean(axis=1))


def _ap_near_the_cut(n_groups: int = 40, n_pos: int = 3, total: int = 20) -> tuple[pd.DataFrame, np.ndarray]:
    """copairs ``average_precision``-shaped rows, one well per group, and their exact p-values:
    the first 12 at least 10% below their Benjamini-Hochberg rung, the next 8 at least 10% above
    theirs (so the exact calls are the first 12, and 1,000 draws, whose error is about 20% of
    such p-values, cannot tell), the rest clearly inactive."""
    null = _exact_ap_tail(n_pos, total)
    atoms = np.unique(null)
    tail = np.array([(null >= a - 1e-12).mean() for a in atoms])  # P(null AP >= a): the exact p of an AP of a
    rung = Q * np.arange(1, n_groups + 1) / n_groups
    pick = [int(np.flatnonzero(tail <= 0.9 * rung[k])[0]) for k in range(12)]  # tail falls with the atom
    pick += [int(np.flatnonzero(tail >= 1.1 * rung[k])[-1]) for k in range(12, 20)]
    pick += [int(np.argmin(np.abs(tail - t))) for t in np.linspace(0.2, 0.9, n_groups - 20)]
    ap = pd.DataFrame(
        {
            "group": [f"g{i:02d}" for i in range(n_groups)],
            "average_precision": atoms[pick],
            "n_pos_pairs": n_pos,
            "n_total_pairs": total,
            "normalized_average_precision": 0.0,
        }
    )
    assert comb(total, n_pos) == len(null)
    return ap, tail[pick]


def test_settled_p_values_give_the_exact_calls_whatever_the_seed():
    """Known answer: groups whose exact p-values (all rank lists enumerated) lie along the BH line.
    A single pass of 1,000 draws gives calls that change with the seed; drawn until settled, the
    calls are the exact p-values' calls for every seed, the refined p-values agree with the exact
    ones, and only the groups near the cut got more draws."""
    ap, exact = _ap_near_the_cut()
    truth = bh_qvalues(exact) < Q
    assert truth.sum() == 12
    single, settled = [], []
    for seed in range(4):
        one = map_null.settled_null_counts(ap, ["group"], 1000, 1000, Q, seed)
        single.append(bh_qvalues(one["p_value"].to_numpy()) < Q)
        many = map_null.settled_null_counts(ap, ["group"], 1000, 1_000_000, Q, seed)
        settled.append(bh_qvalues(many["p_value"].to_numpy()) < Q)
        assert (settled[-1] == truth).all(), seed
        refined = many["draws"].to_numpy() > 1000
        se = np.sqrt(exact * (1 - exact) / many["draws"].to_numpy())
        assert np.all(np.abs(many["p_value"].to_numpy() - exact)[refined] < 5 * se[refined] + 2e-6)
        assert refined.sum() < len(ap) and not many["open_call"].any()
    assert any((s != truth).any() for s in single)


def test_two_seeds_change_at_most_2_percent_of_the_calls_on_the_arrayed_scenario():
    """Seed 0 against seeds 1 to 4 on the arrayed scenario as shipped: no pair differs in more
    than 2% of the 48 calls (one pass of 10,000 draws differs in one call at seed 4)."""
    table = _screen(arrayed.ArrayedDesign())
    first = _active(table, seed=0)
    assert first.sum() >= 20
    for seed in range(1, 5):
        assert (first != _active(table, seed=seed)).mean() <= 0.02, seed


def test_draws_in_chunks_pool_to_the_same_counts(monkeypatch):
    """A round too large for one chunk of draws is drawn in chunks of independent seeds and pooled:
    every draw is counted once and the p-values estimate the same exact tail."""
    ap, exact = _ap_near_the_cut()
    whole = map_null.coupled_null_counts(ap, ["group"], 20_000, seed=3)
    monkeypatch.setattr(map_null, "CHUNK_BYTES", 100_000)  # a few thousand draws a chunk
    chunked = map_null.coupled_null_counts(ap, ["group"], 20_000, seed=3)
    assert (chunked["draws"] == 20_000).all() and (whole["draws"] == 20_000).all()
    assert not np.array_equal(chunked["exceedances"], whole["exceedances"])  # other draws...
    for counts in (whole, chunked):  # ...estimating the same tail
        p = counts["exceedances"].to_numpy() / 20_000
        assert np.all(np.abs(p - exact) < 5 * np.sqrt(exact * (1 - exact) / 20_000) + 1e-4)


def test_the_coupled_null_of_two_configurations_is_the_exact_one():
    """Known answer: a guide of two wells, one ranking its positive among 3 (1 positive, 3 in
    all), one among 2, its null drawn on one shared ranking of a positive and two negatives:
    of the 6 equally likely orders, the mean AP is 1 in 2 ((1 + 1) / 2), 3/4 in 1 ((1 + 1/2) / 2),
    and (1/2 + 1/2) / 2 or (1/3 + 1/2) / 2 in the others; so P(null > 0.6) is 3/6, P(null > 0.8) is
    2/6. Drawn independently (copairs, configurations that differ) P(null > 0.8) would be 1/3 x
    1/2 = 1/6."""
    ap = pd.DataFrame(
        {
            "group": ["a", "a", "b", "b"],
            "average_precision": [0.6, 0.6, 0.8, 0.8],
            "n_pos_pairs": [1, 1, 1, 1],
            "n_total_pairs": [3, 2, 3, 2],
        }
    )
    counts = map_null.coupled_null_counts(ap, ["group"], 60_000, seed=1).set_index("group")
    p = counts["exceedances"] / counts["draws"]
    assert p["a"] == pytest.approx(3 / 6, abs=0.01) and p["b"] == pytest.approx(2 / 6, abs=0.01)
    assert counts.loc["a", "mean_average_precision"] == pytest.approx(0.6)


def test_the_null_of_wells_in_one_configuration_is_copairs_own():
    """Wells that share a configuration: the coupled null is copairs' (one well's AP null) in
    distribution; the p-values of groups along the tail agree within their Monte Carlo error with
    the exact tail, P(null >= AP) for ours, P(null > AP) for copairs' (which leaves out the atom
    at the observed AP)."""
    from copairs.map import get_map_pvalue

    ap, exact = _ap_near_the_cut()
    null = _exact_ap_tail(3, 20)
    strict = np.array([(null > a + 1e-12).mean() for a in ap["average_precision"]])
    ours = map_null.coupled_null_counts(ap, ["group"], 50_000, seed=2)
    theirs = get_map_pvalue(ap, ["group"], null_size=50_000, seed=2, progress_bar=False)
    se = np.sqrt(exact * (1 - exact) / 50_000)
    p = ours["exceedances"].to_numpy() / 50_000
    assert np.all(np.abs(p - exact) < 5 * se + 1e-4)
    assert np.all(np.abs(theirs["p_value"].to_numpy() - strict) < 5 * se + 1e-4)


def test_a_guide_at_map_1_gets_the_atom_of_the_null_not_one_over_the_draws():
    """A guide of 8 wells at AP 1, each ranking its 7 positives among 23 (the arrayed layout): the
    null puts all positives first in 1 of C(23, 7) = 245,157 rankings, so its p-value estimates
    4.1e-6 and no count of draws takes it below (copairs' strict count would report 1 / (draws +
    1))."""
    ap = pd.DataFrame({"group": ["a"] * 8, "average_precision": 1.0, "n_pos_pairs": 7, "n_total_pairs": 23})
    counts = map_null.coupled_null_counts(ap, ["group"], 2_000_000, seed=4)
    atom = 1 / comb(23, 7)
    assert counts.loc[0, "exceedances"] == pytest.approx(2_000_000 * atom, abs=5 * np.sqrt(2_000_000 * atom))
    assert counts.loc[0, "exceedances"] > 0


def test_one_negative_fewer_on_one_plate_barely_moves_a_guides_p_value():
    """A guide of 8 wells (7 positives among 23 on every plate) whose one plate loses a control
    well (that well's configuration: 7 among 22): its p-value moves by the little that one
    negative fewer for one of 8 wells is worth, not by the change from one shared draw to two
    independent ones."""
    rng = np.random.default_rng(0)
    aps = np.sort(rng.uniform(0.45, 0.7, 30))
    rows = []
    for lost in (False, True):
        for g, value in enumerate(aps):
            for w in range(8):
                total = 22 if (lost and w == 0) else 23
                rows.append((f"{lost}-{g:02d}", value, 7, total))
    ap = pd.DataFrame(rows, columns=["group", "average_precision", "n_pos_pairs", "n_total_pairs"])
    counts = map_null.coupled_null_counts(ap, ["group"], 200_000, seed=5)
    p = (counts["exceedances"] / counts["draws"]).to_numpy().reshape(2, -1)
    tested = p[0] > 0.005
    assert tested.sum() > 10
    assert np.all(np.abs(p[1] - p[0])[tested] < 0.15 * p[0][tested] + 0.002), np.c_[p[0], p[1]]


def test_p_value_bounds_hold_the_reported_p_and_open_calls_are_the_ones_between_the_bh_calls():
    lo, hi = map_null.p_value_bounds(np.array([0, 50, 10_000]), np.array([10_000, 10_000, 10_000]))
    assert lo[0] == 0 and hi[0] == pytest.approx(1 - 0.0005 ** (1 / 10_000), rel=1e-6)
    assert lo[1] < 51 / 10_001 < hi[1] and hi[2] == 1.0
    # 4 tests; the BH line at q 0.05 is 0.0125 k: the second test's interval straddles its rung
    lower, upper = np.array([0.001, 0.02, 0.5, 0.9]), np.array([0.002, 0.03, 0.6, 0.95])
    assert map_null.open_calls(lower, upper, Q).tolist() == [False, True, False, False]


def test_max_null_size_below_the_first_pass_is_refused():
    with pytest.raises(ConfigError, match="map_max_null_size"):
        validate_config({"classify": {"map_null_size": 10_000, "map_max_null_size": 5_000}})
    ap, _ = _ap_near_the_cut()
    with pytest.raises(ValueError, match="map_max_null_size"):
        map_null.settled_null_counts(ap, ["group"], 1000, 500, Q, 0)


def test_calls_left_open_by_a_small_cap_are_named_with_both_caps(caplog):
    """A cap of 100 draws leaves guides within the Monte Carlo error of the BH cut: the warning names
    them and the two settings that raise the cap (the main run's, and a component sweep's)."""
    table = _screen(arrayed.ArrayedDesign())
    with caplog.at_level(logging.WARNING):
        out = guide_map(table, "base", "m", seed=0, null_size=100, max_null_size=100)
    assert (out["map_null_draws"] == 100).all()
    warned = [r.getMessage() for r in caplog.records if "Monte Carlo error of 100 null draws" in r.getMessage()]
    assert len(warned) == 1 and "classify.map_max_null_size" in warned[0] and "sweep.map_max_null_size" in warned[0]


def test_the_map_table_says_how_many_draws_each_guide_got():
    table = _screen(arrayed.ArrayedDesign())
    out = guide_map(table, "base", "m", seed=0)
    draws = out["map_null_draws"].to_numpy()
    assert set(np.unique(draws)) <= {10_000, 100_000, 1_000_000} and (draws == 10_000).mean() > 0.5
    assert np.all(out["map_p_value"].to_numpy() >= 1 / (draws + 1))


@pytest.mark.slow
def test_removing_an_outlier_control_well_moves_the_classifiers_count_by_at_most_5_percent():
    """The classifier readout on the same screen (``base``, the schema's defaults): its
    pseudo-guides are a consistent sample of the control wells, so removing the wild well changes
    only the pseudo-guides that held it, and the guides called at q < 0.05 move by at most 5%."""
    from phenoica.classify import (
        ClassifyOptions,
        SplitOptions,
        classify_guides,
        make_folds,
        null_guide_design,
        split_control_rows,
    )
    from phenoica.hits import screen_calls

    cfg = validate_config({})
    options = ClassifyOptions.from_config(cfg)

    def called(table: pd.DataFrame) -> int:
        folds = make_folds(table, SplitOptions.from_config(cfg))
        nulls = null_guide_design(table, options.n_null_guides, options.seed, layout=options.null_layout)
        rows, _ = split_control_rows(classify_guides(table, None, folds, options, "base", "m", nulls=nulls))
        maps = guide_map(table, "base", "m", seed=0)
        return int(screen_calls(rows, maps, cfg["hits"]["null_model"], Q)["hits"]["hit"].sum())

    wild, row = _with_outlier_well(_screen(arrayed.ArrayedDesign()))
    kept, removed = called(wild), called(wild.drop(index=row).reset_index(drop=True))
    assert kept >= 20 and abs(kept - removed) <= 0.05 * kept, (kept, removed)
