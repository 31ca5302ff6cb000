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
along the guides; the settings are the arrayed scenario's (the schema's defaults: 2 points to
64 components, 50 pseudo-guides in each point's null, the guides of at most 64 genes; ``--set``
changes config keys, e.g.
``sweep.points=5 sweep.max_components=null`` for the grid of 5 points to the width, or
``sweep.ica_max_iter=100``). It prints one line per point and
the sweep's total per part, so a way of cutting the sweep's cost can be chosen where its CPU is.

``--against-full`` checks the sweep as configured (``--set``) against the full computation: the
same sweep with the sweep's own approximations off (``sweep.max_genes``, ``sweep.ica_max_samples``,
``sweep.ica_max_iter``, ``sweep.map_max_null_size`` and ``sweep.protocol`` null: every gene and
row, the main fit's ICA iterations, the main run's mAP draws and classification protocol), the
differences printed as ``--compare`` prints them.
Either way it then prices smaller grids (``sweep.points`` P, ``sweep.max_components`` T) from the
points measured: a grid count's CPU interpolated linearly in the count between the measured
counts of its variant, plus ``--startup`` CPU s a point's job (a prediction, not a run).

``--compare G [G ...]`` checks the sweep's gene sample against every gene: the sweep is run
once with ``sweep.max_genes`` null (the other settings as given; with ``--against-full``, the
full computation instead) and once per ``G`` with ``sweep.max_genes: G``; per point it prints
each run's curves (guide-hit and
gene-hit shares: hits over the guides or genes scored; the mAP share; the batch accuracy; the
replicate retrieval) and their differences from that reference run, then per ``G`` the largest
difference of each curve, the count of each variant's peak guide-hit share, and the CPU of the
sweep against the reference's.

    python benchmarks/sweep_point_cost.py [--plates 1] [--guides 1] [--variants pca pca_ica pca_rand] [--points 0 1 2 3 4]
        [--set sweep.null_guides=50] [--compare 64 32 16] [--against-full] [--startup 1.3]
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time
from typing import Any, Callable

import numpy as np
import pandas as pd
import yaml
from threadpoolctl import threadpool_limits

from phenoica.classify import leave_one_batch_out
from phenoica.contract import GENE, PERT_TYPE, PERTURBATION, feature_columns, validate_config
from phenoica.screen import ArrayedDesign, screen_profiles
from phenoica.sweep import SweepOptions, spaced_counts, sweep_point

#: The module that defines the sweep's points: its calls of the parts are what is timed.
sweep_module = sys.modules[sweep_point.__module__]

#: The parts of a point, as the sweep module names the functions it calls.
PARTS: tuple[str, ...] = (
    "fit_variants",
    "classify_guides",
    "screen_calls",
    "guide_map",
    "batch_accuracy",
    "guide_retrieval",
)


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


#: The curves of a sweep row compared by ``--compare``: (name, function of the row).
CURVES: tuple[tuple[str, Callable[[dict[str, Any], int], float]], ...] = (
    ("guide-hit share", lambda r, n_genes: r["guide_hits"] / r["n_guides"]),
    ("gene-hit share", lambda r, n_genes: r["gene_hits"] / n_genes),
    ("mAP share", lambda r, n_genes: r["map_active_share"]),
    ("batch accuracy", lambda r, n_genes: r["batch_accuracy"]),
    ("retrieval", lambda r, n_genes: r["replicate_retrieval"]),
)


def run_sweep(table, folds, options, variants, points, counts, times) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Every (variant, point) of the sweep under ``options``: its row (with the CPU) and the totals per part."""
    rows, totals = [], {}
    for variant in variants:
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
            if len(row):
                rows.append(row.iloc[0].to_dict() | {"cpu": total})
    print(
        f"{'sweep':15s} "
        + " ".join(f"{totals.get(p, 0.0):15.1f}" for p in PARTS)
        + f" {totals['total']:8.1f}  (shares: "
        + ", ".join(f"{p} {totals.get(p, 0.0) / totals['total']:.0%}" for p in PARTS)
        + ")",
        flush=True,
    )
    return rows, totals


def compare(
    full: list[dict[str, Any]], runs: dict[int, list[dict[str, Any]]], n_genes: int, full_cpu: float, cpus
) -> None:
    """Print each sample's curves against the reference run's (``full``), point by point, and the summary."""
    ref = {(r["variant"], r["n_components"]): r for r in full}
    for g, rows in runs.items():
        print(f"\nmax_genes {g} against the reference above (per point: this / reference, difference)")
        worst = {name: 0.0 for name, _ in CURVES}
        for r in rows:
            f = ref[(r["variant"], r["n_components"])]
            cells = []
            for name, curve in CURVES:
                a, b = curve(r, min(g, n_genes)), curve(f, n_genes)
                worst[name] = max(worst[name], abs(a - b)) if np.isfinite(a - b) else worst[name]
                cells.append(f"{name} {a:.3f}/{b:.3f} ({a - b:+.3f})")
            print(f"  {r['variant']:9s} {r['n_components']:4d}: " + "; ".join(cells))
        peaks = []
        for variant in sorted({r["variant"] for r in rows}):
            mine = pd.DataFrame([r for r in rows if r["variant"] == variant])
            theirs = pd.DataFrame([r for r in full if r["variant"] == variant])
            pk = [int(d["n_components"].iloc[int(np.argmax(d["guide_hits"] / d["n_guides"]))]) for d in (mine, theirs)]
            peaks.append(f"{variant} {pk[0]} vs {pk[1]}")
        print(
            "  largest difference: "
            + ", ".join(f"{k} {v:.3f}" for k, v in worst.items())
            + f"; peak guide-hit share at: {'; '.join(peaks)}; CPU {cpus[g]:.1f} s against {full_cpu:.1f} "
            f"({cpus[g] / full_cpu:.2f}x)"
        )


#: The grids priced: (sweep.points, sweep.max_components; None = the width).
GRIDS: tuple[tuple[int, int | None], ...] = tuple((p, t) for t in (None, 128, 96, 64, 48) for p in (5, 4, 3, 2))


def price_grids(rows: list[dict[str, Any]], table: pd.DataFrame, options: SweepOptions, startup: float) -> None:
    """Print the predicted CPU of smaller grids from the measured points: per variant, a grid
    count's CPU interpolated linearly in the count between the measured ones (held at the ends),
    plus ``startup`` a point's job."""
    if not rows:
        return
    width, n_rows = len(feature_columns(table)), len(table)
    measured = pd.DataFrame(rows)
    print(f"{'points':>6s} {'top':>5s}  counts                      predicted CPU s (jobs: start-up included)")
    for p, t in GRIDS:
        counts = spaced_counts(width, n_rows, p, t)
        cpu = 0.0
        for _variant, d in measured.groupby("variant"):
            d = d.sort_values("n_components")
            cpu += float(np.interp(counts, d["n_components"], d["cpu"]).sum()) + startup * len(counts)
        print(f"{p:6d} {t or width:5d}  {str(counts):27s} {cpu:8.1f} ({len(counts) * measured['variant'].nunique()})")


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
    ap.add_argument("--compare", type=int, nargs="+", default=None, metavar="G", help="sweep.max_genes values to check")
    ap.add_argument("--against-full", action="store_true", help="the sweep as set against the full computation")
    ap.add_argument("--startup", type=float, default=1.3, help="CPU s a sweep point's job costs before its work")
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
        f"{options.point_null_guides(table)} pseudo-guides per point"
    )
    print(f"{'variant':9s} {'count':>5s} " + " ".join(f"{p:>15s}" for p in PARTS) + f" {'total':>8s} {'hits':>5s}")
    times: dict[str, float] = {}
    timing_parts(times)
    if args.compare is None and not args.against_full:
        rows, _ = run_sweep(table, folds, options, args.variants, points, counts, times)
        price_grids(rows, table, options, args.startup)
        return
    n_genes = table.loc[table[PERT_TYPE].astype(str) == PERTURBATION, GENE].nunique()
    if args.against_full:
        print(
            "full computation (every gene, every row, the main fit's ICA iterations, the main run's mAP draws "
            "and classification protocol):"
        )
        reference = options._replace(
            max_genes=None, ica_max_samples=None, ica_max_iter=None, map_max_null_size=None, protocol=None
        )
    else:
        print("every gene (the other settings as given):")
        reference = options._replace(max_genes=None)
    full, totals = run_sweep(table, folds, reference, args.variants, points, counts, times)
    runs, cpus = {}, {}
    for g in args.compare or [options.max_genes or int(n_genes)]:
        print(f"max_genes {g} (the other settings as given):")
        runs[g], t = run_sweep(table, folds, options._replace(max_genes=g), args.variants, points, counts, times)
        cpus[g] = t["total"]
    compare(full, runs, int(n_genes), totals["total"], cpus)
    for g, rows in runs.items():
        print(f"\ngrids priced from the points of max_genes {g}:")
        price_grids(rows, table, options, args.startup)


if __name__ == "__main__":
    main()
