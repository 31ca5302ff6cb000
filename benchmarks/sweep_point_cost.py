"""Where a component sweep point's CPU goes, per part, on the arrayed per-well screen.

Each point of the sweep (``phenoica.sweep.sweep_point``: one variant refitted at one count and
the screen scored again) is timed in this process, part by part: the variant's fit
(``fit_variants``: center-scale, eigendecomposition, its ICA or random rotation), the
classification of every guide and pseudo-guide (``classify_guides``), the hit calls
(``screen_calls``), the mAP readout (``guide_map``) and the batch classifier
(``batch_accuracy``); CPU seconds (``time.process_time``), the BLAS and OpenMP pools held at one
thread, as Snakemake holds a one-thread job's. The screen is
:mod:`phenoica.screen.arrayed` at ``benchmarks/arrayed_run_cost.py``'s base (2,304 wells x 300
features, 272 guides) grown ``--plates`` times along the replicate plates or ``--guides`` times
along the guides; the settings are the arrayed scenario's (the schema's defaults: 5 points, the
grid's top at the width, every pseudo-guide in each point's null; ``--set`` changes config keys,
e.g. ``sweep.null_guides=50`` or ``transforms.ica_max_iter=100``). It prints one line per point and
the sweep's total per part, so a way of cutting the sweep's cost can be chosen where its CPU is.

    python benchmarks/sweep_point_cost.py [--plates 1] [--guides 1] [--variants pca pca_ica pca_rand] [--points 0 1 2 3 4]
        [--set sweep.null_guides=50]
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time
from typing import Any, Callable

import yaml
from threadpoolctl import threadpool_limits

from phenoica.classify import leave_one_batch_out
from phenoica.contract import feature_columns, validate_config
from phenoica.screen import ArrayedDesign, screen_profiles
from phenoica.sweep import SweepOptions, spaced_counts, sweep_point

#: The module that defines the sweep's points: its calls of the parts are what is timed.
sweep_module = sys.modules[sweep_point.__module__]

#: The parts of a point, as the sweep module names the functions it calls.
PARTS: tuple[str, ...] = ("fit_variants", "classify_guides", "screen_calls", "guide_map", "batch_accuracy")


def timing_parts(times: dict[str, float]) -> None:
    """Wrap each of :data:`PARTS` in the sweep module so that its CPU seconds add up in ``times``."""
    for name in PARTS:
        original: Callable[..., Any] = getattr(sweep_module, name)

        def timed(*args: Any, _f: Callable[..., Any] = original, _name: str = name, **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return _f(*args, **kwargs)
            finally:
                times[_name] = times.get(_name, 0.0) + time.process_time() - t0

        setattr(sweep_module, name, timed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plates", type=int, default=1, help="times the base's replicate plates")
    ap.add_argument("--guides", type=int, default=1, help="times the base's guides (on as many plate maps)")
    ap.add_argument("--variants", nargs="+", default=["pca", "pca_ica", "pca_rand"])
    ap.add_argument("--points", type=int, nargs="+", default=None, help="grid points (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--set", nargs="*", default=[], metavar="KEY=VALUE", help="config keys (YAML values), e.g. sweep.null_guides=50"
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    threadpool_limits(1)  # a sweep_point job's threads (Snakemake sets the pools' sizes to them)
    design = dataclasses.replace(
        ArrayedDesign(),
        n_effect_genes=96 * args.guides,
        n_null_genes=40 * args.guides,
        plate_maps=args.guides,
        plates_per_batch=4 * args.plates,
    )
    table, _ = screen_profiles(design, args.seed)
    folds = leave_one_batch_out(table)
    given: dict[str, Any] = {
        "seed": args.seed,
        "screen": {"source": "embeddings", "embeddings": "profiles/*.parquet", "feature_regex": ".*"},
        "models": {"cellprofiler": {}},
    }
    for item in args.set:
        dotted, value = item.split("=", 1)
        *path, key = dotted.split(".")
        node = given
        for part in path:
            node = node.setdefault(part, {})
        node[key] = yaml.safe_load(value)
    config = validate_config(given)
    options = SweepOptions.from_config(config)
    counts = spaced_counts(len(feature_columns(table)), len(table), options.points, options.max_components)
    points = args.points if args.points is not None else list(range(len(counts)))
    print(
        f"arrayed screen, {args.plates}x plates, {args.guides}x guides: {len(table)} wells x "
        f"{len(feature_columns(table))} features, {design.n_guides} guides; grid {counts}, "
        f"{options.point_null_guides} pseudo-guides per point"
    )
    print(f"{'variant':9s} {'count':>5s} " + " ".join(f"{p:>15s}" for p in PARTS) + f" {'total':>8s} {'hits':>5s}")
    totals: dict[str, float] = {}
    times: dict[str, float] = {}
    timing_parts(times)
    for variant in args.variants:
        for point in points:
            times.clear()
            t0 = time.process_time()
            row, _ = sweep_module.sweep_point(table, folds, "cellprofiler", variant, point, options)
            total = time.process_time() - t0
            for p in PARTS:
                totals[p] = totals.get(p, 0.0) + times.get(p, 0.0)
            totals["total"] = totals.get("total", 0.0) + total
            hits = int(row["guide_hits"].iloc[0]) if len(row) else -1
            print(
                f"{variant:9s} {counts[point]:5d} "
                + " ".join(f"{times.get(p, 0.0):15.1f}" for p in PARTS)
                + f" {total:8.1f} {hits:5d}",
                flush=True,
            )
    print(
        f"{'sweep':15s} "
        + " ".join(f"{totals.get(p, 0.0):15.1f}" for p in PARTS)
        + f" {totals['total']:8.1f}  (shares: "
        + ", ".join(f"{p} {totals.get(p, 0.0) / totals['total']:.0%}" for p in PARTS)
        + ")"
    )


if __name__ == "__main__":
    main()
