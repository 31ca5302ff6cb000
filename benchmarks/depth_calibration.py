"""Benchmark: the classifier null's p-values below what the null observed, against a 10x larger null.

The hit calls read a guide's p-value from ``classify.n_null_guides`` pseudo-guides (100); where a
guide lies beyond most of them, from the tail model of ``hits.null_model`` (``pareto``, the default:
a generalized Pareto tail fitted to the pseudo-guides' upper exceedances, ``phenoica.hits``'s
``_tail`` module; docs/hit-calling.md, *Calls at genome depth*). This script measures whether those
p-values hold where the calls of a genome-scale screen are made (1e-3 to 1e-5 and below).

Per screen and variant it scores ``--blocks`` x n pseudo-guides exactly as the workflow draws
them (pseudo-guide ``j`` is the same whatever the count, so the first n are the workflow's null;
their AUROCs are cached under ``--cache``, so a rerun measures again without the classifiers).
The draws are cut into blocks of n; each block in turn is the null a run would have, and the next
10 blocks (cyclically: a held-out null 10x larger, of pseudo-guides the fit never saw) are
scored against it. Held-out pseudo-guides are nulls, so a calibrated null gives a share alpha of
them p <= alpha. Per level it prints the observed count, the expected count, their ratio, and a
95% percentile-bootstrap interval of the ratio over the (screen draw, variant) units (the blocks
of one unit share its screen, so the unit is what varies); and, per null model, the p-value a
guide above every pseudo-guide in every fold (AUROC 1) gets: the smallest p the null reports, and
so whether BH could call a lone strong guide among 10,000 (p < 5e-6) and 100,000 (p < 5e-7).

Screens: the simulated ``arrayed`` scenario (``--draws`` seeds, its design's defaults) and the
shipped real plate (``data/varchamp-batch12`` read with the varchamp scenario's column mapping,
both image sets, each its own batch, so that leave-one-batch-out has two folds; ``--real``).

    python benchmarks/depth_calibration.py --draws 4 --real --cache bench_cache/depth
"""

from __future__ import annotations

import argparse
import math
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import yaml
from arrayed_calibration import VARIANTS, variant_tables
from tail_calibration import arrayed_profiles, null_aurocs

from phenoica.contract import BATCH, PLATE, feature_columns, validate_config
from phenoica.hits import NullFit
from phenoica.screen import ExportSpec, parquet_source
from phenoica.utils import bootstrap_mean

#: How many times the workflow's null each held-out null is.
HELD_OUT_FACTOR = 10
#: The levels checked: inside the default null's reach (0.01) and beyond it.
LEVELS: tuple[float, ...] = (1e-2, 1e-3, 1e-4, 1e-5)
#: The null models compared: the default, the parametric normal tail read beyond the null (its
#: reported p-values stop at 1 / (n + 1); this is the tail the calls would rest on without that
#: bound), and the empirical p-value (a check of the draws: it cannot go below 1 / (n + 1)).
NULL_MODELS: tuple[str, ...] = ("pareto", "parametric tail", "empirical")
#: BH calls a lone guide among m at p < 0.05 / m.
GENOME_SIZES: tuple[int, ...] = (10_000, 100_000)
ROOT = Path(__file__).resolve().parents[1]
REAL_EXPORT = ROOT / "data/varchamp-batch12/2024_12_09_Batch_12_normalized_feature_select_batch.csv.gz"
REAL_CONFIG = ROOT / "config/scenarios/varchamp.yaml"


def real_plate_profiles() -> pd.DataFrame:
    """The shipped real plate in the data contract: the varchamp scenario's column mapping and
    controls, both image sets (the scenario keeps one), each image set its own batch, the
    features of its ``feature_regex`` that are finite in every well."""
    screen = yaml.safe_load(REAL_CONFIG.read_text())["screen"]
    spec = ExportSpec.from_config({k: v for k, v in screen.items() if k != "rows"})
    table = pq.read_table(parquet_source(REAL_EXPORT, spec)).to_pandas()
    table[BATCH] = table[PLATE].astype(str)
    pattern = re.compile(screen["feature_regex"])
    features = [c for c in feature_columns(table) if pattern.fullmatch(str(c))]
    finite = [c for c in features if np.isfinite(pd.to_numeric(table[c], errors="coerce")).all()]
    meta = [c for c in table.columns if str(c).startswith("Metadata_")]
    out = table[meta].copy()
    return pd.concat([out, table[finite].astype(np.float64)], axis=1).reset_index(drop=True)


def cached_aurocs(
    cache: Path | None, key: str, table: pd.DataFrame, variant: str, cfg: dict, seed: int, n_total: int
) -> tuple[np.ndarray, float, int]:
    """The AUROCs of pseudo-guides 0 .. n_total - 1 of one variant table (NaN where skipped), from
    the cache as far as it holds them (the rest scored and appended), and the CPU seconds the
    scoring took (NaN when the cache held them all). Pseudo-guide ``j``'s wells do not depend on
    the count drawn; its classifier's seed follows its name, whose width grows at 10,000, so
    pseudo-guides appended beyond that are scored with other seeds than a fresh run would use:
    other draws of the same null, as valid."""
    path = cache / f"{key}.npy" if cache is not None else None
    held = np.load(path) if path is not None and path.exists() else np.empty(0)
    if held.size >= n_total:
        return held[:n_total], math.nan, 0
    t0 = time.process_time()
    aurocs = np.r_[held, null_aurocs(table, variant, cfg, seed, n_total, start=held.size)]
    cpu = time.process_time() - t0
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, aurocs)
        tmp.rename(path)
    return aurocs, cpu, n_total - held.size


def rotated_counts(aurocs: np.ndarray, n: int, model: str, seed: int) -> dict[str, float]:
    """Held-out counts at each level over the blocks of one unit: block b of n is the null, the
    next :data:`HELD_OUT_FACTOR` blocks (cyclically) are held out; and the p of AUROC 1 per block."""
    blocks = aurocs.size // n
    out: dict[str, float] = {"n_held_out": 0, "n_fits": 0}
    reach = []
    for b in range(blocks):
        part = aurocs[b * n : (b + 1) * n]
        held = np.concatenate([aurocs[((b + k) % blocks) * n : ((b + k) % blocks + 1) * n] for k in range(1, 11)])
        part, held = part[np.isfinite(part)], held[np.isfinite(held)]
        fit = NullFit(part, model.split()[0], seed)
        p = fit.p_values(held) if model == "parametric tail" else np.maximum(fit.p_values(held), fit.p_floor)
        out["n_held_out"] += held.size
        out["n_fits"] += 1
        for alpha in LEVELS:
            out[f"k_{alpha:g}"] = out.get(f"k_{alpha:g}", 0) + int((p <= alpha * (1 + 1e-9)).sum())
        p_one = float(fit.p_values(np.array([1.0]))[0])
        reach.append(p_one if model == "parametric tail" else max(p_one, fit.p_floor))
        out["n_tail_fits"] = out.get("n_tail_fits", 0) + int(fit.tail is not None)
    out["reach_median"] = float(np.median(reach))
    for m in GENOME_SIZES:
        out[f"lone_called_{m}"] = float(np.mean(np.asarray(reach) < 0.05 / m))
    return out


def describe(units: pd.DataFrame, model: str) -> list[str]:
    """Per level: observed and expected counts pooled over units, the ratio of the mean share per
    unit to alpha and its 95% percentile-bootstrap interval over the units."""
    lines = []
    for alpha in LEVELS:
        k = units[f"k_{alpha:g}"].to_numpy(dtype=float)
        shares = k / units["n_held_out"].to_numpy(dtype=float)
        ci = bootstrap_mean(shares, 0, "depth_calibration", model, f"{alpha:g}")
        interval = f"[{ci.low / alpha:.2f}, {ci.high / alpha:.2f}]" if np.isfinite(ci.low) else "[n/a]"
        expected = float((units["n_held_out"] * alpha).sum())
        lines.append(
            f"    alpha {alpha:g}: observed {int(k.sum())} / expected {expected:.1f}, "
            f"ratio {shares.mean() / alpha:.2f} {interval}"
        )
    tail = int(units["n_tail_fits"].sum())
    lines.append(f"    tail model used in {tail} of {int(units['n_fits'].sum())} fits")
    lines.append(
        f"    p of AUROC 1 (median over units of the median over fits): {units['reach_median'].median():.3g}; "
        + "; ".join(
            f"lone guide called among {m:,}: {units[f'lone_called_{m}'].mean():.0%} of fits" for m in GENOME_SIZES
        )
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2, help="seeds of the simulated arrayed screen (0: none)")
    parser.add_argument("--first-seed", type=int, default=0, help="the first of those seeds")
    parser.add_argument("--real", action="store_true", help="also the shipped real plate, two image sets as batches")
    parser.add_argument("--blocks", type=int, default=22, help="pseudo-guides scored per unit, in nulls of n")
    parser.add_argument("--cache", type=Path, help="a folder caching the pseudo-guides' AUROCs")
    parser.add_argument("--score-only", action="store_true", help="score (and cache) the AUROCs, measure nothing")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    args = parser.parse_args()
    if args.blocks <= HELD_OUT_FACTOR:
        parser.error(f"--blocks must exceed {HELD_OUT_FACTOR} (a null and its held-out null)")
    arrayed_cfg = validate_config({})
    # the real plate: 32 components (the count rule keeps none on its raw features), and LightGBM
    # allowed leaves of 3 rows (at its default of 20 no model splits on 4 wells against 12)
    real_cfg = validate_config({"transforms": {"n_components": 32}, "classify": {"lightgbm": {"min_data_in_leaf": 3}}})
    n = int(arrayed_cfg["classify"]["n_null_guides"])
    n_total = args.blocks * n
    seeds = range(args.first_seed, args.first_seed + args.draws)
    screens = [("arrayed", s, arrayed_cfg, lambda s=s: arrayed_profiles(s)) for s in seeds]
    if args.real:
        screens.append(("real plate", 0, real_cfg, real_plate_profiles))
    rows = []
    for name, seed, cfg, load in screens:
        profiles = load()
        tables = variant_tables(profiles, cfg, seed)
        for variant in args.variants:
            key = f"{name.replace(' ', '_')}_s{seed}_{variant}"
            aurocs, cpu, scored = cached_aurocs(args.cache, key, tables[variant], variant, cfg, seed, n_total)
            print(
                f"  {name} seed {seed} {variant}: {np.isfinite(aurocs).sum()} of {aurocs.size} pseudo-guides scored"
                + (
                    ""
                    if math.isnan(cpu)
                    else f", {scored} scored in {cpu:.0f} CPU s ({1000 * cpu / scored:.0f} ms each)"
                ),
                flush=True,
            )
            if args.score_only:
                continue
            for model in NULL_MODELS:
                rows.append(
                    {"screen": name, "seed": seed, "variant": variant, "model": model}
                    | rotated_counts(aurocs, n, model, seed)
                )
    if args.score_only:
        return
    units = pd.DataFrame(rows)
    print(f"null of n = {n}; each fit's held-out null {HELD_OUT_FACTOR * n}; {args.blocks} fits per unit")
    for (name, model), sub in units.groupby(["screen", "model"], sort=False):
        print(f"{name}, null model {model} ({len(sub)} units: draws x variants):")
        print("\n".join(describe(sub, model)), flush=True)


if __name__ == "__main__":
    main()
