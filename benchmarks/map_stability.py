"""Benchmark: does the mAP readout's answer hinge on one control well, or on the seed?

Runs ``phenoica.classify.guide_map`` (the ``map_readout`` job's function) on one
profile table: ``--profiles``, a parquet in phenoica's profile contract (a run's
``transforms/<model>/<variant>.parquet``, or a user's per-well export mapped to the contract), or
by default the arrayed scenario's screen, simulated (``phenoica.screen.arrayed``, seed 0).
Every setting is the schema's default unless given; calls are q < ``hits.q_threshold``.

Seeds. The readout at seeds 0 .. ``--seeds``-1, twice: as one pass of ``classify.map_null_size``
draws (the baseline: the readout before its p-values were settled, ``map_max_null_size`` =
``map_null_size``) and as it runs now (draws up to ``classify.map_max_null_size`` for the guides
near the BH cut). For each: the active counts (range over the seeds), the calls that differ
between seeds 0 and 1, the mean and largest share of calls that differ over every pair of seeds,
and the CPU seconds of one run (process time, copairs' threads included), with the ratios of the
settled readout to the baseline.

One outlier well. The first control well of the table gets, in one typical feature (the one whose
control SD is the median of the features'), a value 1,000 control SDs above the controls' median;
the active count with that well and with it removed, and the same for the table's own most
extreme control well (the largest distance from its plate's control median, in robust SDs); and
the count with one control well removed from every plate. A plate with one control well fewer
puts its wells in another (positives, total) configuration: the readout's null draws every
configuration on one shared ranking (``classify/_map_null.py``), so that alone should
barely move the count (copairs' own null, drawn independently per configuration, moved it).

    python benchmarks/map_stability.py                                    # the arrayed scenario
    python benchmarks/map_stability.py --profiles results/scenarios/varchamp/transforms/cellprofiler/base.parquet
"""

from __future__ import annotations

import argparse
import itertools
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from phenoica.classify import guide_map
from phenoica.contract import CONTROL, PERT_TYPE, PLATE, feature_columns, validate_config
from phenoica.screen import ArrayedDesign, screen_profiles

#: The readout's warnings (guides still open at the cap, small plates) are not this script's output.
QUIET = logging.getLogger("map_stability")
QUIET.setLevel(logging.ERROR)


def arrayed_screen(seed: int = 0) -> pd.DataFrame:
    """The arrayed scenario's profiles (its design at the defaults), in memory."""
    return screen_profiles(ArrayedDesign(), seed)[0]


def calls(table: pd.DataFrame, seed: int, null_size: int, max_null_size: int, q: float) -> tuple[np.ndarray, float]:
    """The readout's calls (guides in table order of the mAP table) and its CPU seconds."""
    start = time.process_time()
    out = guide_map(table, "base", "bench", seed, null_size, max_null_size, q, log=QUIET)
    return (out["map_q_value"] < q).to_numpy(), time.process_time() - start


def seed_stability(table: pd.DataFrame, seeds: int, null_size: int, max_null_size: int, q: float) -> dict:
    runs = [calls(table, s, null_size, max_null_size, q) for s in range(seeds)]
    called = np.array([c for c, _ in runs])
    pairs = [(called[a] != called[b]).mean() for a, b in itertools.combinations(range(seeds), 2)]
    return {
        "counts": called.sum(axis=1),
        "flips01": int((called[0] != called[1]).sum()),
        "n": called.shape[1],
        "mean_pair": float(np.mean(pairs)),
        "max_pair": float(np.max(pairs)),
        "cpu": float(np.mean([t for _, t in runs])),
    }


def planted_outlier(table: pd.DataFrame) -> tuple[pd.DataFrame, int, str]:
    """The table with its first control well 1,000 control SDs off in a typical feature."""
    features = feature_columns(table)
    controls = table[PERT_TYPE].astype(str) == CONTROL
    sd = table.loc[controls, features].std()
    sd = sd[sd > 0]
    feature = str(sd.index[np.argsort(sd.to_numpy())[len(sd) // 2]])
    row = int(np.flatnonzero(controls)[0])
    out = table.copy()
    out[feature] = out[feature].astype(np.float64)
    out.loc[out.index[row], feature] = table.loc[controls, feature].median() + 1000.0 * sd[feature]
    return out, row, feature


def most_extreme_control(table: pd.DataFrame) -> tuple[int, float]:
    """The control well farthest from its plate's control median (robust SDs, any feature)."""
    features = feature_columns(table)
    controls = np.flatnonzero(table[PERT_TYPE].astype(str) == CONTROL)
    best, worst = -1, -1.0
    for _, rows in table.iloc[controls].groupby(PLATE).indices.items():
        X = table.iloc[controls[rows]][features].to_numpy(np.float64)
        madn = stats.median_abs_deviation(X, axis=0, scale="normal")
        z = np.abs(X - np.median(X, axis=0)) / np.where(madn > 0, madn, np.inf)
        i = int(np.argmax(z.max(axis=1)))
        if z[i].max() > worst:
            best, worst = int(controls[rows][i]), float(z[i].max())
    return best, worst


def main() -> None:
    defaults = validate_config({})
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profiles", type=Path, help="a profile table (parquet); default: the arrayed scenario")
    parser.add_argument("--seeds", type=int, default=10, help="readout seeds 0 .. n-1 (at least 2)")
    parser.add_argument("--null-size", type=int, default=defaults["classify"]["map_null_size"])
    parser.add_argument("--max-null-size", type=int, default=defaults["classify"]["map_max_null_size"])
    parser.add_argument("--q", type=float, default=defaults["hits"]["q_threshold"])
    args = parser.parse_args()
    if args.seeds < 2:
        parser.error("--seeds must be at least 2")
    table = pd.read_parquet(args.profiles) if args.profiles else arrayed_screen()
    name = str(args.profiles) if args.profiles else "the arrayed scenario (simulated, seed 0)"
    print(f"{name}: {len(table)} rows, {len(feature_columns(table))} features, q < {args.q}")

    print(f"\nseeds 0..{args.seeds - 1}")
    print(f"{'draws':<28} {'active (min-max)':>16} {'flips 0/1':>9} {'pairs: mean':>11} {'max':>6} {'CPU s/run':>9}")
    rows = {}
    for label, most in (("baseline: one pass", args.null_size), ("settled", args.max_null_size)):
        r = rows[label] = seed_stability(table, args.seeds, args.null_size, most, args.q)
        draws = f"{label} ({args.null_size:,}" + ("" if most == args.null_size else f"..{most:,}") + ")"
        counts = f"{r['counts'].min()}-{r['counts'].max()} of {r['n']}"
        print(
            f"{draws:<28} {counts:>16} {r['flips01']:>9} {r['mean_pair']:>11.3f} {r['max_pair']:>6.3f} {r['cpu']:>9.2f}"
        )
    base, settled = rows["baseline: one pass"], rows["settled"]
    flips = f"{settled['mean_pair'] / base['mean_pair']:.2f}x" if base["mean_pair"] else "n/a (none in the baseline)"
    print(
        f"ratios settled / baseline: CPU {settled['cpu'] / base['cpu']:.2f}x; "
        f"mean share of calls that differ between two seeds {flips}"
    )

    def active(t: pd.DataFrame) -> int:
        return int(calls(t, 0, args.null_size, args.max_null_size, args.q)[0].sum())

    print("\none outlier control well (seed 0)")
    wild, row, feature = planted_outlier(table)
    kept, removed = active(wild), active(wild.drop(index=wild.index[row]))
    print(f"as given: {active(table)} active")
    print(
        f"planted (row {row}, {feature} at 1,000 control SDs): {kept} active with the well, {removed} without "
        f"({abs(kept - removed) / max(removed, 1):.1%} apart)"
    )
    row, z = most_extreme_control(table)
    print(
        f"the table's most extreme control well (row {row}, {z:,.0f} robust SDs): {active(table)} active with it, "
        f"{active(table.drop(index=table.index[row]))} without"
    )
    flat = table.reset_index(drop=True)
    first = flat[flat[PERT_TYPE].astype(str) == CONTROL].drop_duplicates(PLATE).index
    print(f"one control well removed from every plate: {active(flat.drop(index=first))} active")


if __name__ == "__main__":
    main()
