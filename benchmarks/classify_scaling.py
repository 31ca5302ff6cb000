"""Time per guide of ``classify_guides`` at growing guide counts (goal: linear total time).

Synthetic screen (see classify_throughput.py), one leave-one-batch-out fold, the same
controls at every size; only the number of guides grows (default 10, 100, 1000). The default
control set and rounds are scaled down so the run takes a few minutes on one core: 2,000
controls x 64 features, 20 rounds, 12 samples per guide. Prints total time and time per guide
at each size, and each size's time per guide relative to the smallest size (1.0 = linear).

    python benchmarks/classify_scaling.py [--sizes 10,100,1000] [--controls 2000] [--features 64] [--rounds 20]
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np
from classify_throughput import Fold, synthetic_screen

from phenoica.classify import ClassifyOptions, classify_guides, guides_of
from phenoica.contract import BATCH, validate_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10,100,1000", help="comma-separated guide counts")
    ap.add_argument("--controls", type=int, default=2000)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--samples", type=int, default=12, help="samples per guide")
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    sizes = sorted(int(s) for s in args.sizes.split(","))

    table = synthetic_screen(args.controls, args.features, max(sizes), args.samples, args.batches, args.seed)
    held = f"B{args.batches - 1}"
    batch = table[BATCH].to_numpy()
    fold = Fold(f"holdout_{held}", np.flatnonzero(batch != held), np.flatnonzero(batch == held), (held,))
    classify = {"num_boost_round": args.rounds, "lightgbm": {"num_threads": args.threads}}
    options = ClassifyOptions.from_config(validate_config({"classify": classify, "seed": args.seed}))
    all_guides = guides_of(table)
    print(
        f"screen: {args.controls} controls x {args.features} features, guides of {args.samples} samples, "
        f"1 fold (holdout {held}), num_boost_round={args.rounds}, num_threads={args.threads}"
    )
    base, times = None, []
    for n in sizes:
        t0 = time.perf_counter()
        out = classify_guides(table, all_guides[:n], [fold], options, variant="base", model="bench")
        dt = time.perf_counter() - t0
        assert len(out) == n and (out["status"] == "ok").all()
        per = dt / n
        base = base or per
        times.append(dt)
        print(
            f"{n:6d} guides: {dt:8.2f} s total, {1000 * per:8.1f} ms/guide, per-guide ratio vs {sizes[0]}: {per / base:.2f}"
        )
    if len(sizes) > 1:
        slope, intercept = np.polyfit(np.asarray(sizes, float), np.asarray(times), 1)
        resid = np.asarray(times) - (intercept + slope * np.asarray(sizes))
        print(
            f"least-squares fit: total = {intercept:.2f} s fixed + {1000 * slope:.1f} ms x guides "
            f"(largest residual {np.abs(resid).max():.2f} s)"
        )


if __name__ == "__main__":
    main()
