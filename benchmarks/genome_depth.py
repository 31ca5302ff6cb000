"""Benchmark: both readouts' calls on genome-scale screens, at the defaults.

Screens of 10,000 and 100,000 guides (``--guides``): 1% with the effects the arrayed scenario
plants, 99% without. Their scores are drawn from what the readouts measured on real runs:

- **classifier**: a guide without effect scores as a pseudo-guide of the arrayed scenario or the
  shipped plate (drawn, with replacement, from the pseudo-guides that ``depth_calibration.py``
  scored and cached, beyond the first 100); a guide with effect as one of the arrayed scenario's
  guides with effect (its AUROCs, scored here at the schema's defaults, seed 0, per variant). The
  null is the first n pseudo-guides, what the workflow would draw: the schema's
  ``classify.n_null_guides`` on the smallest ``--guides`` screen (``auto``: 600 for 10,000 guides;
  ``--null-size`` sets n, ``--null-block`` takes another draw). The calls are those of
  ``phenoica.hits`` at the defaults (``pareto``), and, for comparison, the bounded ``empirical``
  null.
- **mAP**: the readout's p-values rest on each guide's own wells (the within-plate permutation
  null draws from them), so a guide enters with its wells: a guide without effect is a
  pseudo-guide of an arrayed screen (one control well per plate, drawn at random, the plate's
  other control wells its negatives; drawn, with replacement, from ``--map-library`` of them), a
  guide with effect one of that screen's guides with effect (with replacement). Both nulls are
  drawn as the readout draws them at the defaults: the random-rank null
  (``settled_null_counts``, the earlier default) and the rule (``permuted_null_counts``). Units:
  the arrayed scenario at ``--map-seeds``, variant ``base``.

Besides recall and FDR, the lone strong guide: a screen of m - 1 guides without effect and one at
AUROC 1 (for the mAP, the unit's guide of the highest mAP), called or not. And the CPU: the classifier null's share of the classify CPU at 1x
and at m guides (from the scored pseudo-guides' and guides' CPU seconds), and the mAP readout's
p-values' CPU seconds.

    python benchmarks/genome_depth.py --cache bench_cache/depth --guides 10000 100000
    python benchmarks/genome_depth.py --cache bench_cache/depth --classifier-only --reading "pareto joint"
    python benchmarks/genome_depth.py --cache bench_cache/depth --classifier-only --null-size 600 [--null-block 1]
    python benchmarks/genome_depth.py --map-only --guides 10000 100000 --map-seeds 0 1
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
from arrayed_calibration import variant_tables, wilson
from depth_calibration import READINGS, reading_p_values

from phenoica.classify import (
    ClassifyOptions,
    SplitOptions,
    classify_guides,
    guide_map,
    make_folds,
    null_count,
    permuted_null_counts,
    pool_map,
    settled_null_counts,
    well_pool,
)
from phenoica.contract import CONTROL, GENE, GUIDE, PERT_TYPE, validate_config
from phenoica.hits import NullFit, call_guides, summarize_scores
from phenoica.screen import ArrayedDesign, screen_profiles
from phenoica.utils import bh_qvalues, rng_for

#: The share of guides with an effect.
ACTIVE_SHARE = 0.01


def arrayed_effects(cache: Path, seed: int = 0) -> pd.DataFrame:
    """The arrayed scenario's guides (seed ``seed``) scored by both readouts at the schema's
    defaults, per variant: auroc, mean_average_precision, has_effect, and the CPU seconds per guide
    of the classifier (cached as a parquet under ``cache``)."""
    path = cache / f"arrayed_guides_s{seed}.parquet"
    if path.exists():
        return pd.read_parquet(path)
    cfg = validate_config({})
    profiles, truth = screen_profiles(ArrayedDesign(), seed)
    options = ClassifyOptions.from_config(cfg)._replace(seed=seed)
    parts = []
    for variant, table in variant_tables(profiles, cfg, seed).items():
        folds = make_folds(table, SplitOptions.from_config(cfg)._replace(seed=seed))
        t0 = time.process_time()
        rows = classify_guides(table, None, folds, options, variant, "m")
        cpu = time.process_time() - t0
        guides, _ = summarize_scores(rows)
        maps = guide_map(table, variant=variant, model="m", seed=seed)
        out = guides[[GENE, GUIDE, "auroc"]].merge(maps[[GENE, GUIDE, "mean_average_precision"]], on=[GENE, GUIDE])
        out = out.merge(truth[[GENE, GUIDE, "has_effect"]], on=[GENE, GUIDE])
        parts.append(out.assign(variant=variant, cpu_per_guide=cpu / len(guides)))
    out = pd.concat(parts, ignore_index=True)
    cache.mkdir(parents=True, exist_ok=True)
    out.to_parquet(path)
    return out


def classifier_calls(
    auroc: np.ndarray, null: np.ndarray, null_model: str, seed: int, reading: str | None = None
) -> np.ndarray:
    """The hit calls of guides ``auroc`` against pseudo-guides ``null`` (one variant): those of
    ``phenoica.hits.call_guides``, or with ``reading`` (one of ``depth_calibration.READINGS``) the
    ``pareto`` null's tail read that way, the p-values bounded at the null's floor and BH over the
    guides as the calls do."""
    if reading is not None and null_model == "pareto":
        fit = NullFit(null, "pareto", seed)
        p = np.maximum(reading_p_values(fit, auroc, READINGS[reading]), fit.p_floor)
        return bh_qvalues(p) < 0.05
    n_real = auroc.size
    guides = pd.DataFrame(
        {
            "model": "m",
            "variant": "v",
            GENE: [f"G{i:06d}" for i in range(n_real)] + ["null"] * null.size,
            GUIDE: [f"g{i:06d}" for i in range(n_real)] + [f"null_{j + 1:04d}" for j in range(null.size)],
            "is_null_guide": np.r_[np.zeros(n_real, bool), np.ones(null.size, bool)],
            "auroc": np.r_[auroc, null],
        }
    )
    calls = call_guides(guides, null_model, 0.05, seed)
    return calls["hit"].to_numpy()[:n_real]


def pooled_line(rows: list[tuple[str, int, int, bool]], k: int) -> str:
    """The classifier's ``pareto`` rows of one screen size pooled over the units: recall, FDR (false
    calls over all calls), the units whose lone guide at AUROC 1 is called, and the worst unit's FDR."""
    true, false = sum(r[1] for r in rows), sum(r[2] for r in rows)
    fdr = [(r[2] / (r[1] + r[2]) if r[1] + r[2] else 0.0, r[0]) for r in rows]
    worst, unit = max(fdr)
    return (
        f"pooled over {len(rows)} units (pareto): recall {true}/{k * len(rows)} = {true / (k * len(rows)):.3f}, "
        f"FDR {false}/{true + false} = {false / max(1, true + false):.3f}; lone guide called in "
        f"{sum(r[3] for r in rows)} of {len(rows)}; worst unit FDR {worst:.3f} ({unit})"
    )


def map_units(seed: int, library: int) -> tuple[list, np.ndarray, list, np.ndarray]:
    """One arrayed screen's (``seed``, ``base``) pseudo-guides (``library`` of them: pools and
    mAPs) and guides with effect (pools and mAPs)."""
    from map_depth_calibration import Plates, random_pseudo

    cfg = validate_config({})
    profiles, truth = screen_profiles(ArrayedDesign(), seed)
    plates = Plates(variant_tables(profiles, cfg, seed)["base"])
    rng = rng_for(seed, "genome_depth", "library")
    nulls = [plates.pool(random_pseudo(plates, 1, False, rng)) for _ in range(library)]
    guide = plates.wells[GUIDE].astype(str).to_numpy()
    effect = truth.loc[truth["has_effect"].astype(bool) & (truth[PERT_TYPE] != CONTROL), GUIDE].astype(str)
    pools = []
    for g in effect:
        own = [np.flatnonzero((guide == g) & (plates.plate == p)) for p in plates.plates]
        pools.append(well_pool(plates.unit, [np.r_[o, c] for o, c in zip(own, plates.controls, strict=True)], own))
    return nulls, np.array([pool_map(p) for p in nulls]), pools, np.array([pool_map(p) for p in pools])


def map_calls(pools: list, maps: np.ndarray, within: bool, seed: int) -> tuple[np.ndarray, float, int]:
    """The mAP readout's calls of guides with wells ``pools`` and mAPs ``maps`` at the defaults
    (the within-plate rule or the random-rank null), its p-values' CPU seconds and the most draws
    a guide got."""
    cfg = validate_config({})["classify"]
    k = pools[0].guide_wells
    n_pos = int(k.sum()) - 1
    totals = [np.repeat(n_pos + p.plate_sizes - p.guide_wells, p.guide_wells) for p in pools]
    ap = pd.DataFrame(
        {
            "g": np.repeat(np.arange(maps.size), int(k.sum())),
            "average_precision": np.repeat(maps, int(k.sum())),
            "n_pos_pairs": n_pos,
            "n_total_pairs": np.concatenate(totals),
        }
    )
    size, most = int(cfg["map_null_size"]), int(cfg["map_max_null_size"])
    t0 = time.process_time()
    if within:
        counts = permuted_null_counts(ap, ["g"], lambda key: pools[key[0]], size, most, 0.05, seed)
    else:
        counts = settled_null_counts(ap, ["g"], size, most, 0.05, seed)
    cpu = time.process_time() - t0
    counts = counts.sort_values("g")
    return bh_qvalues(counts["p_value"].to_numpy()) < 0.05, cpu, int(counts["draws"].max())


def map_screens(m: int, seeds: list[int], library: int, rng: np.random.Generator) -> None:
    """The mAP readout's rows of ``m`` guides, one screen per unit."""
    k = int(round(ACTIVE_SHARE * m))
    truth = np.r_[np.ones(k, bool), np.zeros(m - k, bool)]
    for seed in seeds:
        nulls, null_maps, effects, effect_maps = map_units(seed, library)
        pick_e, pick_n = rng.integers(0, len(effects), k), rng.integers(0, len(nulls), m)
        pools = [effects[i] for i in pick_e] + [nulls[i] for i in pick_n[: m - k]]
        maps = np.r_[effect_maps[pick_e], null_maps[pick_n[: m - k]]]
        best = int(np.argmax(effect_maps))
        lone_pools = [effects[best]] + [nulls[i] for i in pick_n[1:]]
        lone_maps = np.r_[effect_maps[best], null_maps[pick_n[1:]]]
        for within in (False, True):
            called, cpu, most = map_calls(pools, maps, within, seed)
            lone_called, lone_cpu, lone_most = map_calls(lone_pools, lone_maps, within, seed)
            print(
                f"  mAP, arrayed seed {seed} base, {'within plate' if within else 'random rank'}: "
                f"{rate_line(called, truth)}, {cpu:.0f} CPU s (most draws {most:,}); lone guide at mAP "
                f"{effect_maps[best]:.3f} {'called' if lone_called[0] else 'not called'}, {lone_cpu:.0f} CPU s "
                f"(most draws {lone_most:,})",
                flush=True,
            )


def rate_line(called: np.ndarray, truth: np.ndarray) -> str:
    """Recall and observed FDR (Wilson 95% interval) of one screen's calls."""
    tp, fp = int((called & truth).sum()), int((called & ~truth).sum())
    lo, hi = wilson(fp, tp + fp)
    fdr = fp / max(tp + fp, 1)
    return (
        f"recall {tp}/{int(truth.sum())} = {tp / truth.sum():.3f}, FDR {fp}/{tp + fp} = {fdr:.3f} [{lo:.3f}, {hi:.3f}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, help="depth_calibration.py's AUROC cache")
    parser.add_argument("--guides", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--map-seeds", type=int, nargs="+", default=[0], help="arrayed screens of the mAP rows")
    parser.add_argument("--map-library", type=int, default=1000, help="pseudo-guides drawn per mAP unit")
    parser.add_argument("--map-only", action="store_true", help="the mAP rows alone (no --cache needed)")
    parser.add_argument("--classifier-only", action="store_true", help="the classifier rows alone")
    parser.add_argument(
        "--reading",
        choices=tuple(READINGS),
        help="read the pareto tail this way (depth_calibration.py's readings) instead of the calls' default",
    )
    parser.add_argument(
        "--null-size",
        type=int,
        help="the classifier null's n, the first n cached pseudo-guides (default: the schema's)",
    )
    parser.add_argument(
        "--null-block",
        type=int,
        default=0,
        help="take the null from pseudo-guides b x n .. (b + 1) x n - 1 instead (another draw of the null; the "
        "guides without effect drawn from the rest); units whose cache is shorter are skipped",
    )
    args = parser.parse_args()
    cfg = validate_config({})
    # the schema's null on a screen of 10,000 or 100,000 guides (auto: a tenth of them, at most 600)
    default_null = null_count(cfg["classify"]["n_null_guides"], min(args.guides))
    n_null = default_null if args.null_size is None else args.null_size
    if args.cache is None and not args.map_only:
        parser.error("--cache is needed for the classifier rows (or --map-only)")
    rng = rng_for(args.seed, "genome_depth")
    print(
        f"pareto tail read: {args.reading or 'as the calls read it'}; "
        f"classifier null of {n_null} pseudo-guides (block {args.null_block})"
    )
    if args.map_only:
        for m in args.guides:
            print(f"== {m:,} guides, {int(round(ACTIVE_SHARE * m)):,} with effect")
            map_screens(m, args.map_seeds, args.map_library, rng)
        return
    effects = arrayed_effects(args.cache, 0)
    units = sorted(p.stem for p in args.cache.glob("*_s*_*.npy") if not p.stem.endswith(".tmp"))
    print(f"units (screen, seed, variant) with cached pseudo-guides: {', '.join(units)}")
    for m in args.guides:
        k = int(round(ACTIVE_SHARE * m))
        truth = np.r_[np.ones(k, bool), np.zeros(m - k, bool)]
        print(f"== {m:,} guides, {k:,} with effect")
        pooled: list[tuple[str, int, int, bool]] = []  # unit, true calls, false calls, lone called (pareto)
        for unit in units:
            aurocs = np.load(args.cache / f"{unit}.npy")
            variant = "pca_ica" if unit.endswith("pca_ica") else ("pca" if unit.endswith("pca") else "base")
            lo, hi = args.null_block * n_null, (args.null_block + 1) * n_null
            if aurocs.size < hi:
                continue
            null, pool = aurocs[lo:hi], np.r_[aurocs[:lo], aurocs[hi:]]
            null, pool = null[np.isfinite(null)], pool[np.isfinite(pool)]
            eff = effects[(effects["variant"] == variant) & effects["has_effect"]]["auroc"].to_numpy()
            scores = np.r_[rng.choice(eff, k), rng.choice(pool, m - k)]
            lone = np.r_[1.0, rng.choice(pool, m - 1)]
            for model in ("pareto", "empirical"):
                t0 = time.process_time()
                called = classifier_calls(scores, null, model, args.seed, args.reading)
                cpu = time.process_time() - t0
                lone_called = bool(classifier_calls(lone, null, model, args.seed, args.reading)[0])
                if model == "pareto":
                    pooled.append((unit, int((called & truth).sum()), int((called & ~truth).sum()), lone_called))
                print(
                    f"  classifier {unit:28s} {model:9s}: {rate_line(called, truth)}; lone guide at AUROC 1 "
                    f"{'called' if lone_called else 'not called'} ({cpu:.1f} CPU s for the calls)",
                    flush=True,
                )
        print("  " + pooled_line(pooled, k))
        if not args.classifier_only:
            map_screens(m, args.map_seeds, args.map_library, rng)
    per_guide = effects.groupby("variant")["cpu_per_guide"].first()
    print("classifier CPU per real guide (arrayed, seed 0; concentration models included):")
    print("  " + ", ".join(f"{v} {1000 * c:.0f} ms" for v, c in per_guide.items()))
    if math.isfinite(per_guide.sum()):
        print("(the pseudo-guides' CPU per guide: depth_calibration.py's log)")


if __name__ == "__main__":
    main()
