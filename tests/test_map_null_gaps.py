"""The mAP readout's random-rank null drawn by its negatives (phenoica.classify._map_null's gap
draw): where a guide's wells outnumber its plates' controls, each draw places the few negatives and
counts the positives between them, at a cost that does not grow with the guide's wells. Known
answers: the exact null enumerated on small pools, coupled configurations included, and copairs'
own draw on a larger one."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from phenoica.classify import _map_null as map_null


def _orders(n_pos: int, n_neg: int) -> list[tuple[int, ...]]:
    """Every ranking of ``n_pos`` alike positives (-1) and ``n_neg`` distinct negatives (0, 1, ..),
    each equally likely under a uniformly random ranking of distinct items."""
    items = [-1] * n_pos + list(range(n_neg))
    return sorted(set(itertools.permutations(items)))


def _ap(order: tuple[int, ...], n_neg: int) -> float:
    """The average precision of the positives of ``order`` among its first ``n_neg`` negatives."""
    kept = [x for x in order if x < n_neg]
    ranks = np.flatnonzero(np.array(kept) == -1) + 1.0
    return float((np.arange(1, len(ranks) + 1) / ranks).mean())


def _tails(null: np.ndarray, at: np.ndarray) -> np.ndarray:
    return np.array([(null >= a - 1e-9).mean() for a in at])


def _ap_rows(groups: dict[str, list[tuple[int, int]]], value: float) -> pd.DataFrame:
    rows = [(g, value, k, t) for g, confs in groups.items() for k, t in confs]
    return pd.DataFrame(rows, columns=["group", "average_precision", "n_pos_pairs", "n_total_pairs"])


def test_the_gap_draw_is_taken_where_the_wells_outnumber_the_controls_and_not_at_the_arrayed_1x():
    """The arrayed layout at 1x (7 positives among 16 negatives) keeps the draw it always had, so
    its p-values do not change; at 40x its plates (319 positives, 16 negatives) the gap draw."""
    assert not map_null.gap_drawn(7, 16)
    assert map_null.gap_drawn(319, 16) and map_null.gap_drawn(32, 16) and not map_null.gap_drawn(31, 16)


def test_the_gap_draw_of_one_configuration_is_the_exact_null_enumerated():
    """6 positives among 2 negatives: the 28 equally likely placements give the exact null of one
    well's AP; 200,000 gap draws give every tail probability within 5 standard errors."""
    n_pos, n_neg = 6, 2
    exact = np.array([_ap(o, n_neg) for o in _orders(n_pos, n_neg)])
    assert len(exact) == 28 * 2  # the two negatives are distinct items: 56 orders, each pair twice
    harmonic = np.r_[0.0, np.cumsum(1.0 / np.arange(1, n_pos + n_neg + 2))]
    draws = map_null._gap_draw(
        np.random.default_rng(0), 200_000, np.array([[n_pos, n_pos + n_neg]]), n_pos, n_neg, harmonic
    )[0]
    levels = np.unique(exact)
    p_exact, p_drawn = _tails(exact, levels), _tails(draws, levels)
    se = np.sqrt(p_exact * (1 - p_exact) / 200_000)
    assert np.all(np.abs(p_drawn - p_exact) < 5 * se + 1e-9), np.c_[levels, p_exact, p_drawn]
    assert set(np.round(np.unique(draws), 9)) <= set(np.round(levels, 9))  # only the exact values


def test_coupled_configurations_drawn_by_gaps_follow_the_shared_ranking_enumerated():
    """A guide of 5 wells, one of them on a plate with a control well fewer (4 positives among 2
    negatives for four wells, among 1 for the fifth): on one shared ranking the fifth well's AP is
    read from the same placement without the second negative. Every one of the 30 placements of 4
    positives and 2 distinct negatives enumerated gives the exact null of the guide's mean AP,
    and a guide of 3 wells drawn in the same call (2 positives among 1 negative: the first 2 of
    the ranking's positives) its own exact null, as the argsort draw does."""
    orders = _orders(4, 2)
    assert len(orders) == 30
    exact_a = np.array([(4 * _ap(o, 2) + _ap(o, 1)) / 5 for o in orders])
    exact_b = np.array([_ap(o, 1) for o in _orders(2, 1)])
    assert map_null.gap_drawn(4, 2)
    levels = {"a": np.unique(exact_a), "b": np.unique(exact_b)}
    layout = {"a": [(4, 6)] * 4 + [(4, 5)], "b": [(2, 3)] * 3}
    ap = pd.concat(
        [_ap_rows({f"{g}{i}": layout[g]}, level) for g in "ab" for i, level in enumerate(levels[g])], ignore_index=True
    )
    counts = map_null.coupled_null_counts(ap, ["group"], 100_000, seed=7).set_index("group")
    for g, exact in (("a", exact_a), ("b", exact_b)):
        p = counts.loc[[f"{g}{i}" for i in range(len(levels[g]))], "exceedances"].to_numpy() / 100_000
        p_exact = _tails(exact, levels[g])
        se = np.sqrt(p_exact * (1 - p_exact) / 100_000)
        assert np.all(np.abs(p - p_exact) < 5 * se + 1e-9), np.c_[levels[g], p_exact, p]


def test_the_gap_draw_follows_copairs_random_ranking_by_a_ks_test():
    """A configuration of 40 positives among 8 negatives: 20,000 gap draws and 20,000 of copairs'
    ``random_ap`` (a random binary relevance list ranked in full) are one distribution by a
    two-sample Kolmogorov-Smirnov test at a fixed seed, and a shifted null (one negative more)
    is told apart."""
    from copairs.compute import random_ap

    harmonic = np.r_[0.0, np.cumsum(1.0 / np.arange(1, 52))]
    ours = map_null._gap_draw(np.random.default_rng(3), 20_000, np.array([[40, 48], [40, 49]]), 40, 9, harmonic)
    theirs = random_ap(20_000, 40, 48, seed=3)
    assert stats.ks_2samp(ours[0], theirs).pvalue > 0.01
    assert stats.ks_2samp(ours[1], theirs).pvalue < 1e-6


def test_the_gap_draw_puts_all_positives_first_with_the_atoms_probability():
    """A guide of 60 wells at AP 1 on plates of 3 controls (59 positives among 62): the atom is
    1 / C(62, 3) = 2.7e-5, and 1,000,000 draws count it within 5 standard errors."""
    ap = _ap_rows({"a": [(59, 62)] * 60}, 1.0)
    counts = map_null.coupled_null_counts(ap, ["group"], 1_000_000, seed=4)
    atom = 1 / 37_820
    assert counts.loc[0, "exceedances"] == pytest.approx(1_000_000 * atom, abs=5 * np.sqrt(1_000_000 * atom))
