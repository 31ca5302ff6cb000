"""Benchmark: both readouts' calls on genome-scale screens, at the defaults.

Screens of 10,000 and 100,000 guides (``--guides``): 1% with the effects the arrayed scenario
plants, 99% without. Their scores are drawn from what the readouts measured on real runs:

- **classifier**: a guide without effect scores as a pseudo-guide of the arrayed scenario or the
  shipped plate (drawn, with replacement, from the pseudo-guides that ``depth_calibration.py``
  scored and cached, beyond the first 100); a guide with effect as one of the arrayed scenario's
  guides with effect (its AUROCs, scored here at the schema's defaults, seed 0, per variant). The
  null is the first 100 pseudo-guides, what the workflow would draw. The calls are those of
  ``phenoica.hits`` at the defaults (``pareto``), and, for comparison, the bounded ``empirical``
  null.
- **mAP**: a guide without effect has the arrayed layout (8 wells, each ranked against its plate's
  16 control wells) and a mAP drawn from the readout's own null for that layout (one random
  ranking: exactly uniform p-values, the least favourable case for the FDR); a guide with effect,
  the mAP of one of the arrayed scenario's guides with effect. The p-values are drawn as the
  readout draws them (``classify.map_null_size``, refined up to ``classify.map_max_null_size``).

Besides recall and FDR, the lone strong guide: a screen of m - 1 guides without effect and one at
AUROC 1 (mAP 1), called or not. And the CPU: the classifier null's share of the classify CPU at 1x
and at m guides (from the scored pseudo-guides' and guides' CPU seconds), and the mAP readout's
p-values' CPU seconds.

    python benchmarks/genome_depth.py --cache bench_cache/depth --guides 10000 100000
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
from arrayed_calibration import variant_tables, wilson

from phenoica.classify import (
    ClassifyOptions,
    SplitOptions,
    classify_guides,
    configuration_aps,
    guide_map,
    make_folds,
    settled_null_counts,
)
from phenoica.contract import GENE, GUIDE, validate_config
from phenoica.hits import call_guides, summarize_scores
from phenoica.screen import ArrayedDesign, screen_profiles
from phenoica.utils import bh_qvalues, rng_for

#: The share of guides with an effect.
ACTIVE_SHARE = 0.01
#: The arrayed layout of a guide's wells in the mAP readout: 8 wells (2 batches x 4 plates), each
#: with the other 7 as positives among its plate's 16 control wells.
N_POS, N_TOTAL, N_WELLS = 7, 23, 8


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


def classifier_calls(auroc: np.ndarray, null: np.ndarray, null_model: str, seed: int) -> np.ndarray:
    """The hit calls of guides ``auroc`` against pseudo-guides ``null`` (one variant)."""
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


def null_map_draws(k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` mAPs of guides without effect: one random ranking of the arrayed layout each (every
    well of a guide shares it, as the readout's null does)."""
    out = np.empty(k)
    for start in range(0, k, 50_000):
        n = min(50_000, k - start)
        u = rng.random((n, N_TOTAL))
        out[start : start + n] = configuration_aps(u, N_POS, N_TOTAL, N_POS)
    return out


def map_calls(maps: np.ndarray, max_null_size: int, seed: int) -> tuple[np.ndarray, float, int]:
    """The mAP readout's calls of guides with mAPs ``maps`` (the arrayed layout), its p-values'
    CPU seconds and the most draws a guide got."""
    cfg = validate_config({})["classify"]
    ap = pd.DataFrame(
        {
            "g": np.repeat(np.arange(maps.size), N_WELLS),
            "average_precision": np.repeat(maps, N_WELLS),
            "n_pos_pairs": N_POS,
            "n_total_pairs": N_TOTAL,
        }
    )
    t0 = time.process_time()
    counts = settled_null_counts(ap, ["g"], int(cfg["map_null_size"]), max_null_size, 0.05, seed)
    cpu = time.process_time() - t0
    counts = counts.sort_values("g")
    return bh_qvalues(counts["p_value"].to_numpy()) < 0.05, cpu, int(counts["draws"].max())


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
    parser.add_argument("--cache", type=Path, required=True, help="depth_calibration.py's AUROC cache")
    parser.add_argument("--guides", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--map-max", type=int, nargs="+", help="classify.map_max_null_size (default: the schema's)")
    args = parser.parse_args()
    cfg = validate_config({})
    n_null = int(cfg["classify"]["n_null_guides"])
    map_maxes = args.map_max or [int(cfg["classify"]["map_max_null_size"])]
    effects = arrayed_effects(args.cache, 0)
    rng = rng_for(args.seed, "genome_depth")
    units = sorted(p.stem for p in args.cache.glob("*_s*_*.npy") if not p.stem.endswith(".tmp"))
    print(f"units (screen, seed, variant) with cached pseudo-guides: {', '.join(units)}")
    for m in args.guides:
        k = int(round(ACTIVE_SHARE * m))
        truth = np.r_[np.ones(k, bool), np.zeros(m - k, bool)]
        print(f"== {m:,} guides, {k:,} with effect")
        for unit in units:
            aurocs = np.load(args.cache / f"{unit}.npy")
            variant = "pca_ica" if unit.endswith("pca_ica") else ("pca" if unit.endswith("pca") else "base")
            null, pool = aurocs[:n_null], aurocs[n_null:]
            null, pool = null[np.isfinite(null)], pool[np.isfinite(pool)]
            eff = effects[(effects["variant"] == variant) & effects["has_effect"]]["auroc"].to_numpy()
            scores = np.r_[rng.choice(eff, k), rng.choice(pool, m - k)]
            lone = np.r_[1.0, rng.choice(pool, m - 1)]
            for model in ("pareto", "empirical"):
                t0 = time.process_time()
                called = classifier_calls(scores, null, model, args.seed)
                cpu = time.process_time() - t0
                lone_called = bool(classifier_calls(lone, null, model, args.seed)[0])
                print(
                    f"  classifier {unit:28s} {model:9s}: {rate_line(called, truth)}; lone guide at AUROC 1 "
                    f"{'called' if lone_called else 'not called'} ({cpu:.1f} CPU s for the calls)",
                    flush=True,
                )
        eff_map = effects[(effects["variant"] == "base") & effects["has_effect"]]["mean_average_precision"].to_numpy()
        maps = np.r_[rng.choice(eff_map, k), null_map_draws(m - k, rng)]
        lone_maps = np.r_[1.0, null_map_draws(m - 1, rng)]
        for max_null in map_maxes:
            called, cpu, most = map_calls(maps, max_null, args.seed)
            lone_called, lone_cpu, lone_most = map_calls(lone_maps, max_null, args.seed)
            print(
                f"  mAP, map_max_null_size {max_null:,}: {rate_line(called, truth)}, {cpu:.0f} CPU s (most draws "
                f"{most:,}); lone guide at mAP 1 {'called' if lone_called[0] else 'not called'}, {lone_cpu:.0f} CPU s "
                f"(most draws {lone_most:,})",
                flush=True,
            )
    per_guide = effects.groupby("variant")["cpu_per_guide"].first()
    print("classifier CPU per real guide (arrayed, seed 0; concentration models included):")
    print("  " + ", ".join(f"{v} {1000 * c:.0f} ms" for v, c in per_guide.items()))
    if math.isfinite(per_guide.sum()):
        print("(the pseudo-guides' CPU per guide: depth_calibration.py's log)")


if __name__ == "__main__":
    main()
