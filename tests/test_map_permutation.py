"""The mAP readout's within-plate permutation null (phenoica.classify._map_permutation): the
guide's own draw is copairs' mAP, the draws follow the exact permutation distribution, and a
strong guide reaches below the random-rank null's atom."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pandas as pd

from phenoica.classify import guide_map, guide_map_within_plate, permuted_null_counts, settled_null_counts
from phenoica.classify._map_permutation import _above, _maps, permutation_exceedances, pool_map, well_pool
from phenoica.contract import GUIDE, PLATE, WELL
from phenoica.screen import arrayed

Q = 0.05


def _unit(rng: np.random.Generator, n: int, d: int = 6) -> np.ndarray:
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_the_guides_own_draw_is_copairs_map_with_one_or_two_wells_a_plate():
    """On the arrayed scenario (one well a plate) and with two plates merged into one (two wells
    of each guide and 32 control wells on it), the draw that picks the guide's own wells gives
    copairs' mAP to the last digit, and the null's first pass puts the guides with effect far
    below the random-rank p-values."""
    from phenoica.classify._map_readout import (
        GROUP,
        centered_on_plate_controls,
        control_mask,
        copairs_wells,
        feature_matrix,
        guide_pools,
        well_profiles,
    )

    profiles, _ = arrayed.screen_profiles(arrayed.ArrayedDesign(), 0)
    merged = profiles.copy()
    plates = sorted(merged[PLATE].unique())
    second = merged[PLATE] == plates[1]
    merged.loc[second, WELL] = merged.loc[second, WELL].astype(str) + "b"
    merged.loc[second, PLATE] = plates[0]
    for table in (profiles, merged):
        maps = guide_map(table, "base", "m", seed=0, max_null_size=10_000).set_index(GUIDE)
        wells = well_profiles(table).reset_index(drop=True)
        X, _ = feature_matrix(wells, "t", None)
        is_control = control_mask(wells)
        X = centered_on_plate_controls(X, wells[PLATE].astype(str).to_numpy(), is_control)
        meta, guides = copairs_wells(wells, is_control)
        pools = guide_pools(X, meta)
        ours = np.array([pool_map(pools(g)) for g in guides[GROUP]])
        np.testing.assert_allclose(ours, maps.loc[guides[GUIDE], "mean_average_precision"].to_numpy(), atol=1e-12)
    assert int(pools(guides[GROUP].iat[0]).guide_wells.max()) == 2


def _exact_tail(pool, observed: float) -> float:
    """P(null mAP >= observed), every choice of the guide's wells enumerated."""
    starts = np.r_[0, np.cumsum(pool.plate_sizes)[:-1]]
    per_plate = [
        [np.array(c) + s for c in itertools.combinations(range(size), k)]
        for s, size, k in zip(starts, pool.plate_sizes, pool.guide_wells, strict=True)
    ]
    chosen = np.array([np.concatenate(c) for c in itertools.product(*per_plate)])
    maps = _maps(pool, _above(pool), chosen)
    return float(np.mean(maps >= observed - 1e-9))


def test_the_permutation_draws_follow_the_exact_null_enumerated():
    """Known answer: pools small enough to enumerate every choice (3 plates of 1 guide well and
    3 controls: 64 choices; a plate of 2 guide wells and 3 controls beside one of 1 and 3: 40).
    The guide's p-value from 40,000 draws lies within 5 standard errors of the exact one."""
    rng = np.random.default_rng(0)
    for sizes in ((1, 1, 1), (2, 1)):
        x = _unit(rng, sum(k + 3 for k in sizes))
        x[:1] += 0.8  # the guide's first wells alike, so that its mAP lies in the upper tail
        start, pools, own = 0, [], []
        for k in sizes:
            rows = np.arange(start, start + k + 3)
            pools.append(rows)
            own.append(rows[:k])
            start += k + 3
        x[[g[0] for g in own]] = x[0] + 0.3 * _unit(rng, len(own))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        pool = well_pool(x, pools, own)
        observed = pool_map(pool)
        exact = _exact_tail(pool, observed)
        n = 40_000
        got = permutation_exceedances(pool, observed, n, seed=3) / n
        se = np.sqrt(exact * (1 - exact) / n)
        assert 0 < exact < 0.5, sizes
        assert abs(got - exact) < 5 * se + 1e-9, (sizes, got, exact)


def test_a_strong_guide_reaches_below_the_random_rank_atom():
    """A guide whose 8 wells (one on each of 8 plates of 16 controls) rank all their siblings
    first gets, from the random-rank null, the atom 1 / C(23, 7) = 4.1e-6 and is not called
    among 20,001 guides (cut 2.5e-6); the within-plate permutation draws it down to 1e-6 and
    calls it. The other guides (random-rank p near 1) keep their p-values and draw nothing more."""
    rng = np.random.default_rng(1)
    centre = _unit(rng, 1, 40)[0]
    plates = [np.arange(17 * p, 17 * (p + 1)) for p in range(8)]
    x = _unit(rng, 17 * 8, 40)
    for rows in plates:
        x[rows[0]] = centre + 0.2 * _unit(rng, 1, 40)[0]
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    pool = well_pool(x, plates, [rows[:1] for rows in plates])
    strong = pool_map(pool)
    assert strong == 1.0
    others = 20_000
    ap = pd.DataFrame(
        {
            "g": np.repeat(np.arange(others + 1), 8),
            "average_precision": np.r_[np.full(8, strong), np.full(8 * others, 7 / 23 * 0.5)],
            "n_pos_pairs": 7,
            "n_total_pairs": 23,
        }
    )
    rr = settled_null_counts(ap, ["g"], 10_000, 10_000_000, Q, seed=0)
    assert rr["p_value"].iat[0] > 2e-6 and rr["p_value"].iat[0] > Q / (others + 1)
    wp = permuted_null_counts(ap, ["g"], lambda key: pool, 10_000, 1_000_000, Q, seed=0)
    assert wp["within_plate"].tolist() == [True] + [False] * others
    assert wp["p_value"].iat[0] < Q / (others + 1) and wp["draws"].iat[0] == 1_000_000
    assert (wp["p_value"].iloc[1:] == rr["p_value"].iloc[1:]).all()


def test_the_permutation_null_calls_more_of_the_arrayed_effects_and_none_of_its_nulls():
    """On the arrayed scenario (seed 0, base), the within-plate null calls at least what the
    random-rank null calls of the 32 guides with effect (31 and 26 measured) and none of the 16
    without; every guide without effect keeps its random-rank p-value (above q)."""
    profiles, truth = arrayed.screen_profiles(arrayed.ArrayedDesign(), 0)
    effect = truth.set_index(GUIDE)["has_effect"]
    calls = {}
    for within in (False, True):
        maps = (guide_map_within_plate if within else guide_map)(profiles, "base", "m", seed=0).set_index(GUIDE)
        calls[within] = maps["map_q_value"] < Q
        has = effect.loc[maps.index].to_numpy(dtype=bool)
        assert not calls[within][~has].any()
    assert calls[True].sum() > calls[False].sum() >= 20
    assert comb(23, 7) == 245157


def test_the_map_job_reads_which_null_from_the_config(tmp_path):
    """``classify.map_null: within_plate`` gives the job the within-plate readout's table, and the
    default the random-rank one (the arrayed scenario, seed 0, base)."""
    from phenoica.classify import MapReadoutOptions, guide_map_files
    from phenoica.contract import validate_config

    profiles, _ = arrayed.screen_profiles(arrayed.ArrayedDesign(), 0)
    path = tmp_path / "base.parquet"
    profiles.to_parquet(path, index=False)
    for setting, scorer in (("random_rank", guide_map), ("within_plate", guide_map_within_plate)):
        options = MapReadoutOptions.from_config(validate_config({"classify": {"map_null": setting}}))
        out = tmp_path / setting / "map.parquet"
        guide_map_files({"base": path}, {"base": out}, options, model="m")
        alone = scorer(profiles, "base", "m", seed=0)
        np.testing.assert_array_equal(pd.read_parquet(out)["map_p_value"], alone["map_p_value"])
