"""Benchmark: the classifier null's p-values below what the null observed, against a 10x larger null.

The hit calls read a guide's p-value from ``classify.n_null_guides`` pseudo-guides (100); where a
guide lies beyond most of them, from the tail model of ``hits.null_model`` (``pareto``, the default:
a generalized Pareto tail fitted to the pseudo-guides' upper exceedances, ``phenoica.hits``'s
``_tail`` module; docs/hit-calling.md, *Calls at genome depth*). This script measures whether those
p-values hold where the calls of a genome-scale screen are made (1e-3 to 1e-5 and below).

Per screen and variant it scores at least ``--blocks`` x n pseudo-guides exactly as the workflow
draws them (pseudo-guide ``j``'s wells are the same whatever the count, so the first n are the
workflow's null; their AUROCs are cached under ``--cache``, so a rerun measures again without the
classifiers, and a larger ``--blocks`` scores only the pseudo-guides the cache lacks). The draws
are cut into blocks of n; each block in turn is the null a run would have, and **every other
block** of the unit is held out (a held-out null of at least 10 x n, of pseudo-guides the null
never saw, so that the levels beyond 1e-4 meet many distinct pseudo-guides; the measurement uses
every block the cache holds). Held-out pseudo-guides are nulls, so a calibrated null gives a
share alpha of them p <= alpha. Per level and null model it prints the observed count, the
expected count, their ratio, and a 95% percentile-bootstrap interval of the ratio that resamples
the screen draws and, within each, its blocks (one block index for all its variants, which share
its wells): a block is both a null and held-out draws, so both sources of variation enter, and the
few extreme pseudo-guides that make the count at 1e-4 are resampled as what they are. And per
null model the p-value a guide above every pseudo-guide in every fold (AUROC 1) gets: the
smallest p the null reports, and so whether BH could call a lone strong guide among 10,000
(p < 5e-6) and 100,000 (p < 5e-7). Null models (``--models``): the ``pareto`` tail read three
ways, ``pareto joint`` (the predictive over the joint posterior of shape and scale), ``pareto
scale-only`` (the predictive over the scale at the fitted shape, floored at 0) and ``pareto
plug-in`` (the fitted shape and scale taken as the truth), the scale-only
reading being the one the calls use (``TailFit.sf``); the normal tail read beyond the null (``parametric``'s p-values unbounded, which no
call uses) and the bounded empirical p-value.

Screens: the simulated ``arrayed`` scenario (``--draws`` seeds, its design's defaults) and the
shipped real plate (``data/varchamp-batch12`` read with the varchamp scenario's column mapping,
both image sets, each its own batch, so that leave-one-batch-out has two folds; ``--real``).

``--null-size n`` measures a null of n pseudo-guides instead of the workflow's default, on the
cached pseudo-guides alone (nothing scored): the units whose cache holds at least 11 blocks of n
(a null and a held-out null of 10 x n), the others skipped (docs/hit-calling.md, *A larger
null*).

    python benchmarks/depth_calibration.py --draws 6 --real --cache bench_cache/depth
    python benchmarks/depth_calibration.py --draws 6 --real --cache bench_cache/depth --null-size 400 \\
        --models "pareto scale-only" "pareto plug-in"
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
from scipy import stats
from tail_calibration import arrayed_profiles, null_aurocs

from phenoica.classify import null_count
from phenoica.contract import BATCH, PLATE, feature_columns, validate_config
from phenoica.hits import NullFit
from phenoica.screen import ArrayedDesign, ExportSpec, parquet_source
from phenoica.utils import derive_seed

#: How many times the workflow's null each held-out null is.
HELD_OUT_FACTOR = 10
#: The levels checked: inside the default null's reach (0.01) and beyond it.
LEVELS: tuple[float, ...] = (1e-2, 1e-3, 1e-4, 1e-5)
#: The null models compared: the ``pareto`` tail read three ways (the joint predictive over shape
#: and scale, the scale-only predictive at the fitted shape, the plug-in at the fitted shape and
#: scale; the calls use the scale-only reading, ``TailFit.sf``), the parametric normal tail read
#: beyond the null (its reported p-values stop at 1 / (n + 1); this is the tail the calls would rest
#: on without that bound), and the empirical p-value (a check of the draws: it cannot go below
#: 1 / (n + 1)).
NULL_MODELS: tuple[str, ...] = ("pareto joint", "pareto scale-only", "pareto plug-in", "parametric tail", "empirical")
#: The ``TailFit`` method each reading of the ``pareto`` tail uses.
READINGS: dict[str, str] = {"pareto joint": "joint_sf", "pareto scale-only": "sf", "pareto plug-in": "plugin_sf"}
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


#: AUROCs are clipped into [AUROC_CLIP, 1 - AUROC_CLIP] before the logit, as the calls clip them.
AUROC_CLIP = 1e-6
#: Fewer pseudo-guides than this at or above a value: the tail reads its p-value (the rule's hand-over).
MIN_EXCEEDANCES = 10


def _logit(auroc: np.ndarray) -> np.ndarray:
    a = np.clip(np.asarray(auroc, dtype=float), AUROC_CLIP, 1 - AUROC_CLIP)
    return np.log(a) - np.log1p(-a)


def reading_p_values(fit: NullFit, values: np.ndarray, reading: str) -> np.ndarray:
    """The ``pareto`` null's p-values with its tail read by the ``TailFit`` method ``reading``: the
    empirical p-value where :data:`MIN_EXCEEDANCES` or more pseudo-guides lie at or above, the
    tail's beyond."""
    srt = np.sort(_logit(fit.auroc))
    z = _logit(values)
    above = srt.size - np.searchsorted(srt, z, side="left")
    p = (1.0 + above) / (srt.size + 1.0)
    if fit.tail is None:
        return p
    beyond = above < MIN_EXCEEDANCES
    p[beyond] = getattr(fit.tail, reading)(z[beyond])
    return p


def model_p_values(part: np.ndarray, values: np.ndarray, model: str, seed: int) -> tuple[np.ndarray, float, bool]:
    """The p-values of AUROCs ``values`` against the null ``part`` under ``model`` (one of
    :data:`NULL_MODELS`, reported as the calls report them), the p of AUROC 1, and whether a tail
    was used."""
    kind = "pareto" if model in READINGS else {"parametric tail": "parametric"}.get(model, "empirical")
    fit = NullFit(part, kind, seed)
    probe = np.r_[values, 1.0]
    p = reading_p_values(fit, probe, READINGS[model]) if model in READINGS else fit.p_values(probe)
    if model != "parametric tail":
        p = np.maximum(p, fit.p_floor)
    return p[:-1], float(p[-1]), fit.tail is not None


def block_counts(aurocs: np.ndarray, n: int, model: str, seed: int) -> dict[str, object]:
    """One unit's counts: block b of n pseudo-guides is the null, every other block's pseudo-guides
    are held out (a held-out null of (blocks - 1) x n); ``k_<alpha>[b, c]`` counts block c's
    pseudo-guides at p <= alpha against null b and ``n_held[b, c]`` the finite ones (0 on the
    diagonal); the p of AUROC 1 per null, and how many nulls used a tail."""
    blocks = aurocs.size // n
    parts = [aurocs[b * n : (b + 1) * n] for b in range(blocks)]
    finite = np.array([np.isfinite(x).sum() for x in parts], dtype=float)
    held = np.tile(finite, (blocks, 1))
    np.fill_diagonal(held, 0.0)
    counts = {alpha: np.zeros((blocks, blocks)) for alpha in LEVELS}
    reach, tails = [], 0
    block_of = np.repeat(np.arange(blocks), n)
    for b, part in enumerate(parts):
        p, p_one, has_tail = model_p_values(part[np.isfinite(part)], aurocs[: blocks * n], model, seed)
        reach.append(p_one)
        tails += int(has_tail)
        for alpha in LEVELS:
            hit = np.isfinite(p) & (p <= alpha * (1 + 1e-9)) & (block_of != b)
            counts[alpha][b] = np.bincount(block_of[hit], minlength=blocks)
    return {"counts": counts, "held": held, "reach": np.asarray(reach), "tails": tails}


def _resampled(units: list[dict], weights: dict[int, np.ndarray], alpha: float) -> tuple[float, float]:
    """Observed and evaluated counts of ``units`` with block weights ``weights`` (per screen draw;
    a pair of two copies of one block is not a held-out pair)."""
    k = total = 0.0
    for unit in units:
        w = weights[unit["seed"]][: unit["held"].shape[0]]
        k += float(w @ unit["counts"][alpha] @ w)
        total += float(w @ unit["held"] @ w)
    return k, total


def ratio_interval(units: list[dict], alpha: float, seed: int, reps: int = 2000) -> tuple[float, float]:
    """95% percentile-bootstrap interval of observed / expected at ``alpha`` over ``units`` (one
    screen, one null model): each rep resamples the screen draws, then within each drawn screen
    its blocks, one block index for all its variants (they share its wells)."""
    rng = np.random.default_rng(derive_seed(seed, "depth_calibration", f"{alpha:g}"))
    seeds = sorted({u["seed"] for u in units})
    size = {s: max(u["held"].shape[0] for u in units if u["seed"] == s) for s in seeds}
    ratios = []
    for _ in range(reps):
        k = total = 0.0
        for s in rng.choice(seeds, len(seeds)) if len(seeds) > 1 else seeds:
            w = {s: rng.multinomial(size[s], np.full(size[s], 1.0 / size[s])).astype(float)}
            dk, dt = _resampled([u for u in units if u["seed"] == s], w, alpha)
            k, total = k + dk, total + dt
        ratios.append(k / (alpha * total) if total else math.nan)
    low, high = np.nanpercentile(ratios, [2.5, 97.5])
    return float(low), float(high)


#: The shares of a unit's pseudo-guides above the thresholds at which ``--shapes`` fits a tail: the
#: share a null's tail starts from (a quarter), and two further out.
SHAPE_SHARES: tuple[float, ...] = (0.25, 0.05, 0.01)


def tail_shapes(aurocs: np.ndarray) -> str:
    """The GPD shape fitted by maximum likelihood (``scipy.stats.genpareto``, location 0, the shape
    free, below 0 as well) to the exceedances of all of a unit's pseudo-guides above each of
    :data:`SHAPE_SHARES` (the threshold halfway between the N-th and (N + 1)-th largest logit AUROC):
    whether the tail is lighter (< 0) or heavier (> 0) than exponential, near a null's threshold and
    further out."""
    z = np.sort(_logit(aurocs[np.isfinite(aurocs)]))[::-1]
    parts = []
    for share in SHAPE_SHARES:
        n_exceed = int(share * z.size)
        y = z[:n_exceed] - (z[n_exceed - 1] + z[n_exceed]) / 2.0
        shape = stats.genpareto.fit(y[y > 0], floc=0)[0]
        parts.append(f"top {share:.0%} (N = {n_exceed}): shape {shape:+.3f}")
    return "; ".join(parts)


#: The levels at which :func:`describe` also gives the spread of the ratio over single nulls (what one
#: screen's calls get is one null, not the pool of them).
SPREAD_LEVELS: tuple[float, ...] = (1e-3, 1e-4)


def describe(units: list[dict], model: str) -> list[str]:
    """Per level: observed and expected counts pooled over ``units``, their ratio and its interval
    (:func:`ratio_interval`); the nulls that used a tail; the p of AUROC 1 and the share of nulls
    whose lone guide at AUROC 1 BH calls among each genome size."""
    lines = []
    for alpha in LEVELS:
        k = sum(float(u["counts"][alpha].sum()) for u in units)
        total = sum(float(u["held"].sum()) for u in units)
        low, high = ratio_interval(units, alpha, 0)
        lines.append(
            f"    alpha {alpha:g}: observed {k:,.0f} / expected {alpha * total:,.1f}, ratio {k / (alpha * total):.2f} "
            f"[{low:.2f}, {high:.2f}] ({total:,.0f} held-out p-values)"
        )
    for alpha in SPREAD_LEVELS:
        own = np.concatenate([u["counts"][alpha].sum(axis=1) / (alpha * u["held"].sum(axis=1)) for u in units])
        q50, q90 = np.percentile(own, [50, 90])
        lines.append(
            f"    alpha {alpha:g}, each null on its own held-out pool: median ratio {q50:.2f}, 90th percentile "
            f"{q90:.2f}, largest {own.max():.2f}; {np.mean(own > 2):.0%} of nulls above 2"
        )
    reach = np.concatenate([u["reach"] for u in units])
    lines.append(f"    tail used in {sum(u['tails'] for u in units)} of {reach.size} nulls")
    lines.append(
        f"    p of AUROC 1 (median over nulls): {np.median(reach):.3g}; "
        + "; ".join(f"lone guide called among {m:,}: {np.mean(reach < 0.05 / m):.0%} of nulls" for m in GENOME_SIZES)
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
    parser.add_argument("--shapes", action="store_true", help="print each unit's free GPD shape by threshold")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--models", nargs="+", default=list(NULL_MODELS), choices=NULL_MODELS)
    parser.add_argument(
        "--null-size",
        type=int,
        help="the null's n (default classify.n_null_guides): measured on the cache alone, on the units "
        f"whose cached pool holds at least {HELD_OUT_FACTOR + 1} blocks of n (the others skipped)",
    )
    parser.add_argument(
        "--subset", nargs="+", choices=VARIANTS, help="also report the variants named, pooled on their own"
    )
    args = parser.parse_args()
    if args.blocks <= HELD_OUT_FACTOR:
        parser.error(f"--blocks must exceed {HELD_OUT_FACTOR} (a null and its held-out null)")
    arrayed_cfg = validate_config({})
    # the real plate: 32 components (the count rule keeps none on its raw features), and LightGBM
    # allowed leaves of 3 rows (at its default of 20 no model splits on 4 wells against 12)
    real_cfg = validate_config({"transforms": {"n_components": 32}, "classify": {"lightgbm": {"min_data_in_leaf": 3}}})
    # the schema's null on the arrayed scenario's guides (the plate's, under 1,000 too, get the same)
    default_n = null_count(arrayed_cfg["classify"]["n_null_guides"], ArrayedDesign().n_guides)
    n = default_n if args.null_size is None else args.null_size
    if args.null_size is not None and (args.cache is None or args.score_only):
        parser.error("--null-size measures the cached pseudo-guides: it needs --cache, and no --score-only")
    n_total = args.blocks * n
    seeds = range(args.first_seed, args.first_seed + args.draws)
    screens = [("arrayed", s, arrayed_cfg, lambda s=s: arrayed_profiles(s)) for s in seeds]
    if args.real:
        screens.append(("real plate", 0, real_cfg, real_plate_profiles))
    units: dict[tuple[str, str], list[dict]] = {}
    for name, seed, cfg, load in screens:
        tables: dict[str, pd.DataFrame] = {}
        for variant in args.variants:
            key = f"{name.replace(' ', '_')}_s{seed}_{variant}"
            cached = args.cache / f"{key}.npy" if args.cache is not None else None
            if args.null_size is not None:
                held = np.load(cached) if cached is not None and cached.exists() else np.empty(0)
                if held.size < (HELD_OUT_FACTOR + 1) * n:
                    print(
                        f"  {name} seed {seed} {variant}: {held.size} cached, under {HELD_OUT_FACTOR + 1} x {n}: skipped"
                    )
                    continue
                aurocs, cpu, scored = held, math.nan, 0
            elif cached is not None and cached.exists() and np.load(cached).size >= n_total:
                aurocs, cpu, scored = np.load(cached), math.nan, 0  # every block the cache holds
            else:
                tables = tables or variant_tables(load(), cfg, seed)
                aurocs, cpu, scored = cached_aurocs(args.cache, key, tables[variant], variant, cfg, seed, n_total)
            print(
                f"  {name} seed {seed} {variant}: {np.isfinite(aurocs).sum()} of {aurocs.size} pseudo-guides scored"
                + ("" if not scored else f", {scored} scored in {cpu:.0f} CPU s ({1000 * cpu / scored:.0f} ms each)"),
                flush=True,
            )
            if args.shapes:
                print(f"    {tail_shapes(aurocs)}", flush=True)
            if args.score_only:
                continue
            t0 = time.process_time()
            for model in args.models:
                unit = {"seed": seed, "variant": variant} | block_counts(aurocs, n, model, seed)
                units.setdefault((name, model), []).append(unit)
            print(f"    measured in {time.process_time() - t0:.0f} CPU s", flush=True)
    if args.score_only:
        return
    print(f"null of n = {n}; every other block of the unit held out (at least {HELD_OUT_FACTOR} x n)")
    for (name, model), sub in units.items():
        blocks = ", ".join(f"{u['variant']} s{u['seed']}: {u['held'].shape[0]}" for u in sub)
        print(f"{name}, null model {model} ({len(sub)} units; blocks of {n}: {blocks}):")
        print("\n".join(describe(sub, model)), flush=True)
        part = [u for u in sub if args.subset and u["variant"] in args.subset]
        if part and len(part) < len(sub):
            print(f"  the same, {' and '.join(args.subset)} alone ({len(part)} units):")
            print("\n".join(describe(part, model)), flush=True)


if __name__ == "__main__":
    main()
