"""How the classifier's CPU grows along the guides of an arrayed per-well screen, per protocol.

The screen is :mod:`phenoica.screen.arrayed` at a real screen's width (300 features, 2 batches,
4 replicate plates per batch, 16 control wells per plate; at 1x 96 effect and 40 null genes of 2
guides, 272 guides, 2,304 wells), grown along the guides as ``benchmarks/arrayed_run_cost.py``
grows it (``k`` times the genes on ``k`` plate maps: the control wells grow with the plates, so
each guide's classifier trains against ``k`` times the controls under the exact protocol).

At each scale, for each setting (``exact``, and ``fast`` with each ``--caps`` value as
``classify.fast_train_controls``), it times ``classify_guides`` (CPU seconds of this process,
one thread, the schema's defaults otherwise: concentration on, 100 rounds) on a seeded sample
of ``--sample`` real guides, of a quarter of them, and of ``--sample`` pseudo-guides of the
scale's null design. A call's fixed part (reading the table's features, the folds, each training
set's bins: paid once per classify job, whatever its guides) is the sample's CPU less its guides
times the marginal CPU of a guide (the two real samples' difference over their guides' difference);
the classify stage's CPU at that scale is estimated as
``shards x fixed + guides x (marginal CPU of a guide) + pseudo-guides x (marginal CPU of a
pseudo-guide)`` (``classify.n_shards`` jobs; the null's pseudo-guides at the schema's
``classify.n_null_guides``, ``auto``: 100 up to 1,000 guides and a tenth of them above, so the
figures measured with a fixed 100 grow a little faster now at 16x; and the control constructs). It prints the estimates, the CPU per guide
against 1x, and the growth exponent (least-squares slope of log CPU on log guides: 1 = linear).
``--fast-leaf`` sets ``classify.fast_leaf`` for the caps (``configured``: their settings are
named with ", leaf"). ``--control-scope plates`` adds the exact protocol with
``classify.control_scope: plates`` (each guide against the controls of its own plates), timed
whole instead (every guide and pseudo-guide in one ``classify_guides`` call, as one job holds
them): its set-up is paid once per set of plates, which a sample of a few guides over many plate
maps would pay for a few guides each. ``--axis plates`` grows the replicate plates instead (the guides fixed; the exponent is then on
the wells), as ``arrayed_run_cost.py --plates`` does: 40x is 92,160 wells.
The calls' agreement of a cap with the exact
protocol: ``benchmarks/classify_fidelity.py --screen arrayed``.

``--profile`` says where a guide's CPU goes instead: at each scale and setting, one fold, the
``--sample`` first guides and (in a second call) as many pseudo-guides, ``classify_guides`` run
with the library's steps timed (CPU seconds, each step's own time, the steps inside it left out):
the call's reading of the table (its check and feature matrix, once per call), the fold's bins, a block's binned rows, a guide's row subset, the concentration models' column
merges, LightGBM's booster set-up (with the subset's construction) and boosting rounds, the
prediction of the held-out rows, the AUROC, the held-out distance and the rest (Python around
them); per target, with the leaves per tree and the CPU per boosting round.

    python benchmarks/classify_growth.py [--scales 1 4 16] [--caps 256 128] [--sample 32] [--axis plates] [--no-exact]
        [--fast-leaf configured] [--control-scope plates]
    python benchmarks/classify_growth.py --profile [--scales 1 4 16] [--caps 128] [--sample 12]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import lightgbm as lgb
import numpy as np

from phenoica.classify import (
    ClassifyOptions,
    FoldBins,
    classify_guides,
    control_constructs,
    guides_of,
    leave_one_batch_out,
    null_guide_design,
)
from phenoica.contract import PERT_TYPE, validate_config
from phenoica.screen import ArrayedDesign, screen_profiles


def arrayed_design(scale: int, axis: str = "guides", effect_genes: int = 96, null_genes: int = 40) -> ArrayedDesign:
    """The arrayed screen at ``scale`` times the base's guides (on as many plate maps), or, with
    ``axis`` "plates", at ``scale`` times its replicate plates (the guides fixed)."""
    base = ArrayedDesign(n_effect_genes=effect_genes, n_null_genes=null_genes)
    if axis == "plates":
        return dataclasses.replace(base, plates_per_batch=base.plates_per_batch * scale)
    return dataclasses.replace(
        base, n_effect_genes=effect_genes * scale, n_null_genes=null_genes * scale, plate_maps=scale
    )


def timed(table, guides, nulls, folds, options) -> float:
    """CPU seconds of one ``classify_guides`` call (every row scored, checked)."""
    t0 = time.process_time()
    out = classify_guides(table, guides, folds, options, "base", "bench", nulls=nulls)
    cpu = time.process_time() - t0
    assert (out["status"] == "ok").all(), out["reason"].unique()
    return cpu


#: The steps ``--profile`` times: (name, owner, attribute) of what the classify engine calls.
STEPS: tuple[tuple[str, str, str], ...] = (
    ("table read", "engine", "validate_profile_metadata"),
    ("table read", "engine", "feature_matrix"),
    ("fold bins", "FoldBins", "build"),
    ("block binning", "FoldBins", "block"),
    ("row subset", "GuideBlock", "guide_dataset"),
    ("column merge", "GuideBlock", "merge"),
    ("booster set-up", "Booster", "__init__"),
    ("boosting rounds", "Booster", "update"),
    ("prediction", "Booster", "predict"),
    ("AUROC", "guide model", "auroc"),
    ("held-out distance", "engine", "heldout_distance_se"),
)


class StepClock:
    """Each step's own CPU seconds (time inside a nested timed step is the inner step's), boosting
    rounds counted, and the leaves of every tree the engine trains."""

    def __init__(self) -> None:
        self.own: dict[str, float] = defaultdict(float)
        self.rounds = 0
        self.leaves: list[int] = []
        self._stack: list[list[Any]] = []

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed_step(*args: Any, **kwargs: Any) -> Any:
            now = time.process_time()
            if self._stack:
                self.own[self._stack[-1][0]] += now - self._stack[-1][1]
            self._stack.append([name, now])
            try:
                return fn(*args, **kwargs)
            finally:
                end = time.process_time()
                self.own[name] += end - self._stack.pop()[1]
                if self._stack:
                    self._stack[-1][1] = end
                self.rounds += name == "boosting rounds"

        return timed_step

    @contextmanager
    def installed(self) -> Iterator[None]:
        """The steps wrapped while inside; the leaves of each trained model recorded (untimed)."""
        engine = importlib.import_module("phenoica.classify._engine")
        bins = importlib.import_module("phenoica.classify._bins")
        model = importlib.import_module("phenoica.classify._guide_model")
        owners = {"FoldBins": FoldBins, "GuideBlock": bins.GuideBlock, "Booster": lgb.Booster, "engine": engine}
        owners["guide model"] = model
        saved = [(owners[o], a, getattr(owners[o], a)) for _, o, a in STEPS] + [(model.lgb, "train", lgb.train)]
        for name, o, a in STEPS:
            setattr(owners[o], a, self.wrap(name, getattr(owners[o], a)))
        train = lgb.train

        def counted_train(*args: Any, **kwargs: Any) -> lgb.Booster:
            booster = train(*args, **kwargs)
            t0 = time.process_time()
            self.leaves += [t["num_leaves"] for t in booster.dump_model()["tree_info"]]
            self.own["(profiling)"] += time.process_time() - t0
            return booster

        model.lgb.train = counted_train
        try:
            yield
        finally:
            for owner, attr, fn in saved:
                setattr(owner, attr, fn)


def profile(args: argparse.Namespace, settings: dict[str, ClassifyOptions]) -> None:
    """Where a target's CPU goes at each scale (module docstring, ``--profile``)."""
    names = list(dict.fromkeys(n for n, _, _ in STEPS)) + ["rest"]
    print(
        "setting, scale, targets: CPU ms per target of " + ", ".join(names) + "; total; leaves per tree; us per round"
    )
    for scale in args.scales:
        table, _ = screen_profiles(arrayed_design(scale, args.axis), args.seed)
        folds = leave_one_batch_out(table)[:1]
        guides = guides_of(table)[: args.sample]
        nulls = null_guide_design(table, 100, args.seed)[: args.sample]
        n_train = len(folds[0].train)
        print(f"{scale}x: {len(table)} wells, fold {folds[0].name} trains on {n_train} rows", flush=True)
        for name, options in settings.items():
            for kind, g, n in (("guides", guides, []), ("pseudo-guides", [], nulls)):
                clock = StepClock()
                with clock.installed():
                    t0 = time.process_time()
                    classify_guides(table, g, folds, options, "base", "bench", nulls=n)
                    total = time.process_time() - t0 - clock.own.pop("(profiling)", 0.0)
                clock.own["rest"] = total - sum(clock.own.values())
                per = [1000 * clock.own.get(k, 0.0) / args.sample for k in names]
                print(
                    f"  {name:12s} {scale:3d}x {kind:13s} "
                    + " ".join(f"{v:6.1f}" for v in per)
                    + f"; {1000 * total / args.sample:6.1f}; {np.mean(clock.leaves):4.2f}; "
                    f"{1e6 * clock.own['boosting rounds'] / max(clock.rounds, 1):5.0f}",
                    flush=True,
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--axis", choices=["guides", "plates"], default="guides", help="what the scales multiply")
    ap.add_argument("--caps", type=int, nargs="*", default=[256, 128], help="fast_train_controls values")
    ap.add_argument("--sample", type=int, default=32, help="guides (and pseudo-guides) timed per scale")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-exact", action="store_true", help="time the caps only (exact's cost at scale is its own)")
    ap.add_argument(
        "--fast-leaf", choices=["scaled", "configured"], default=None, help="classify.fast_leaf (default: the schema's)"
    )
    ap.add_argument("--profile", action="store_true", help="where a guide's CPU goes, step by step, on one fold")
    ap.add_argument(
        "--control-scope", choices=["fold", "plates"], default="fold", help="plates: add exact on each guide's plates"
    )
    ap.add_argument("--effect-genes", type=int, default=96, help="the 1x screen's genes with an effect")
    ap.add_argument("--null-genes", type=int, default=40, help="the 1x screen's genes without one")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    classify = {"lightgbm": {"num_threads": 1}} | ({"fast_leaf": args.fast_leaf} if args.fast_leaf else {})
    exact = ClassifyOptions.from_config(validate_config({"seed": args.seed, "classify": classify}))
    leaf = "" if exact.scale_leaf else ", leaf"
    settings = ({} if args.no_exact else {"exact": exact}) | {
        f"fast, cap {c}{leaf}": exact._replace(protocol="fast", fast_train_controls=c) for c in args.caps
    }
    if args.control_scope == "plates":
        settings["exact, plates"] = exact._replace(control_scope="plates")
    if args.profile:
        profile(args, settings)
        return
    totals: dict[str, list[float]] = {s: [] for s in settings}
    counts = []
    rng = np.random.default_rng(args.seed)
    for scale in args.scales:
        table, _ = screen_profiles(arrayed_design(scale, args.axis, args.effect_genes, args.null_genes), args.seed)
        folds = leave_one_batch_out(table)
        guides = guides_of(table)
        nulls = null_guide_design(table, exact.n_null_guides, exact.seed) + control_constructs(table)
        picked = [guides[i] for i in sorted(rng.choice(len(guides), min(args.sample, len(guides)), replace=False))]
        picked_nulls = nulls[: args.sample]
        n_ctrl = int((table[PERT_TYPE].astype(str) == "control").sum())
        counts.append(len(guides) if args.axis == "guides" else len(table))
        print(
            f"{scale}x: {len(table)} wells, {len(guides)} guides, {len(nulls)} pseudo-guides, {n_ctrl} control "
            f"wells ({max(len(f.train) for f in folds)} training rows per fold), {len(folds)} folds",
            flush=True,
        )
        for name, options in settings.items():
            if options.control_scope == "plates":
                total = timed(table, guides, nulls, folds, options)
                totals[name].append(total)
                print(f"  {name:14s} every guide and pseudo-guide in one call: classify {total:8.1f} CPU s", flush=True)
                continue
            few = picked[: max(1, len(picked) // 4)]
            t_all, t_few = timed(table, picked, [], folds, options), timed(table, few, [], folds, options)
            per_guide = max(t_all - t_few, 0.0) / max(len(picked) - len(few), 1)
            fixed = max(t_all - len(picked) * per_guide, 0.0)
            per_null = max(timed(table, [], picked_nulls, folds, options) - fixed, 0.0) / len(picked_nulls)
            total = exact.n_shards * fixed + len(guides) * per_guide + len(nulls) * per_null
            totals[name].append(total)
            print(
                f"  {name:14s} {1000 * per_guide:7.1f} ms per guide, {1000 * per_null:6.1f} ms per pseudo-guide, "
                f"{fixed:5.2f} s per call: classify about {total:8.1f} CPU s",
                flush=True,
            )
    unit = "guide" if args.axis == "guides" else "well"
    print("\nsetting          " + "  ".join(f"{s}x CPU s (per {unit} vs 1x)" for s in args.scales) + "  exponent")
    for name, values in totals.items():
        per = [v / n for v, n in zip(values, counts)]  # per guide (per well along the plates)
        cells = "  ".join(f"{v:8.1f} ({p / per[0]:.2f})" for v, p in zip(values, per))
        slope = np.polyfit(np.log(counts), np.log(values), 1)[0] if len(counts) > 1 else float("nan")
        print(f"{name:16s} {cells}  {slope:.3f}")


if __name__ == "__main__":
    main()
