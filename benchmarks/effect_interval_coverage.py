"""Benchmark: the coverage of the held-out distance's 95% interval on 2 and 3 batches.

A guide's ``distance_sd`` is its held-out distance from the controls averaged over its
leave-one-batch-out folds; its interval (``distance_sd_low`` / ``distance_sd_high``,
``phenoica.hits``' effects module) combines each fold's standard error over its held-out replicate
wells with the spread between folds beyond them. What it covers: the guide's distance in the
screen's batches, along the directions learnt, i.e. the value infinitely many replicate wells in
those batches would give. This script simulates that and counts how often the interval covers it.

Each draw: ``--batches`` batches, each with its own offset of every feature (shared by its guide
and control wells, as a batch effect is), ``--guide-wells`` wells of the guide and
``--control-wells`` control wells per batch, 30 features of unit SD, the guide shifted by
``--effects`` control SDs along a random direction of 3 features (0: no effect). The folds are
leave-one-batch-out: the direction is learnt on the other batches, the distance read on the
held-out batch (``phenoica.classify``'s held-out distance, the function the classifier runs). The
truth of a fold is the population distance along its learnt direction; the target is their mean.
Prints, per setting, the coverage with a Wilson 95% interval, and beside it the coverage of the
Student-t interval over folds alone (what the hit table showed before).

    python benchmarks/effect_interval_coverage.py --draws 2000
"""

from __future__ import annotations

import argparse

import numpy as np
from arrayed_calibration import wilson

from phenoica.classify import ControlMoments, heldout_distance_se
from phenoica.hits import fold_interval, wells_and_folds_interval
from phenoica.utils import rng_for

N_FEATURES = 30


def one_draw(rng: np.random.Generator, batches: int, guide_wells: int, control_wells: int, effect: float):
    """Per-fold distances, their errors and the truth of one simulated guide."""
    direction = np.zeros(N_FEATURES)
    direction[rng.choice(N_FEATURES, 3, replace=False)] = rng.normal(size=3)
    shift = effect * direction / np.linalg.norm(direction)
    offsets = rng.normal(size=(batches, N_FEATURES))
    guide = [offsets[b] + shift + rng.normal(size=(guide_wells, N_FEATURES)) for b in range(batches)]
    ctrl = [offsets[b] + rng.normal(size=(control_wells, N_FEATURES)) for b in range(batches)]
    d, se, truth = [], [], []
    for f in range(batches):
        train = [b for b in range(batches) if b != f]
        train_ctrl = np.vstack([ctrl[b] for b in train])
        train_guide = np.vstack([guide[b] for b in train])
        moments = ControlMoments.of(train_ctrl)
        value, error = heldout_distance_se(moments, train_guide, guide[f], ctrl[f])
        mean, sd = moments.mean_sd()
        u = ((train_guide.mean(axis=0) - mean) / sd) / sd  # the learnt direction on raw features (up to scale)
        d.append(value)
        se.append(error)
        truth.append(float(shift @ u / np.linalg.norm(u)))  # population distance along it (unit SD features)
    return np.array(d), np.array(se), float(np.mean(truth))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--batches", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--effects", type=float, nargs="+", default=[0.0, 1.0, 3.0])
    parser.add_argument("--guide-wells", type=int, default=4)
    parser.add_argument("--control-wells", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(
        f"{args.draws} draws per setting; {args.guide_wells} guide and {args.control_wells} control wells per batch; "
        f"{N_FEATURES} features; nominal 95%"
    )
    for batches in args.batches:
        for effect in args.effects:
            rng = rng_for(args.seed, "effect_interval", batches, f"{effect:g}")
            hit_new = hit_old = 0
            widths_new, widths_old, excludes = [], [], 0
            for _ in range(args.draws):
                d, se, truth = one_draw(rng, batches, args.guide_wells, args.control_wells, effect)
                _, low, high = wells_and_folds_interval(d, se, dof=batches * (args.guide_wells - 1))
                _, low_t, high_t = fold_interval(d)
                hit_new += low <= truth <= high
                hit_old += low_t <= truth <= high_t
                widths_new.append(high - low)
                widths_old.append(high_t - low_t)
                excludes += low > 0
            lo, hi = wilson(hit_new, args.draws)
            lo_t, hi_t = wilson(hit_old, args.draws)
            print(
                f"  {batches} batches, effect {effect:g} SD: wells and folds {hit_new / args.draws:.3f} [{lo:.3f}, {hi:.3f}] "
                f"(median width {np.median(widths_new):.2f}, excludes 0 in {excludes / args.draws:.0%}); folds only "
                f"{hit_old / args.draws:.3f} [{lo_t:.3f}, {hi_t:.3f}] (median width {np.median(widths_old):.2f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
