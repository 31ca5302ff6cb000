"""Benchmark: how far the parametric tail of the classifier's null holds, against a 10x larger null.

The hit calls fit a logit-normal null to ``n`` pseudo-guides (``classify.n_null_guides``, 100) and
read p-values from its Student-t tail, also below ``1 / (n + 1)``, where the null observed nothing
(``phenoica.hits._calls``). This script draws ``11 n`` pseudo-guides exactly as the workflow draws
them (pseudo-guide ``j`` is the same whatever the count, so the first ``n`` are the workflow's
null), scores them with the workflow's classifier at the schema's defaults (leave-one-batch-out
folds), fits the parametric null on the first ``n`` and holds out the other ``10 n``. Held-out
pseudo-guides are nulls, so a calibrated tail gives a share ``alpha`` of them p <= ``alpha``. Per
level ``alpha`` (0.05, 0.01, 1/(n+1) and 1/2, 1/5, 1/10 of it: beyond the null's reach) it prints
the share observed and the ratio observed / nominal, per variant and pooled over every (draw,
variant) fit, with a 95% percentile-bootstrap interval over the fits (the unit that varies: the
1,000 held-out pseudo-guides of one fit all meet the same fitted tail); and the same for the
empirical p as a check of the draws (valid on average over fits by exchangeability, noisy per fit).

Screens: the simulated ``arrayed`` scenario (``phenoica.screen.arrayed``, its design's defaults,
``--draws`` seeds), and any per-well profile table in the data contract (``--profiles``), such as
the shipped real plate once read into the contract.

    python benchmarks/tail_calibration.py --draws 2
    python benchmarks/tail_calibration.py --draws 0 --profiles real_plate.parquet --name real --n-components 32
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
from arrayed_calibration import VARIANTS, variant_tables

from phenoica.classify import (
    ClassifyOptions,
    SplitOptions,
    classify_guides,
    make_folds,
    null_count,
    null_guide_design,
)
from phenoica.contract import GUIDE, validate_config
from phenoica.hits import NullFit, summarize_scores
from phenoica.screen import ArrayedDesign, screen_profiles
from phenoica.utils import bootstrap_mean

#: How many times the workflow's null the held-out null is.
HELD_OUT_FACTOR = 10


def levels(n: int) -> list[tuple[str, float]]:
    """The levels checked: two inside the null's reach, its floor 1/(n+1), and 1/2, 1/5, 1/10 of it."""
    floor = 1.0 / (n + 1)
    return [("0.05", 0.05), ("0.01", 0.01), ("1/(n+1)", floor)] + [(f"1/({k}(n+1))", floor / k) for k in (2, 5, 10)]


def null_aurocs(table: pd.DataFrame, variant: str, cfg: dict, seed: int, n_total: int, start: int = 0) -> np.ndarray:
    """The held-out AUROCs of pseudo-guides ``start`` .. n_total - 1 of one variant table, in draw
    order (NaN where a pseudo-guide is skipped in every fold)."""
    options = ClassifyOptions.from_config(cfg)._replace(seed=seed)
    folds = make_folds(table, SplitOptions.from_config(cfg)._replace(seed=seed))
    design = null_guide_design(table, n_total, seed)[start:]
    rows = classify_guides(table, [], folds, options, variant, "m", nulls=design)
    guides, _ = summarize_scores(rows)
    by_name = guides.set_index(GUIDE)["auroc"]
    return np.asarray([by_name.get(target.guide, math.nan) for target in design], dtype=float)


def tail_counts(aurocs: np.ndarray, n: int) -> list[dict[str, float]]:
    """Per level: held-out pseudo-guides at or below it, for the parametric and the empirical null
    fitted on the first ``n``."""
    fit_part, held = aurocs[:n], aurocs[n:]
    fit_part, held = fit_part[np.isfinite(fit_part)], held[np.isfinite(held)]
    out = []
    p = {model: NullFit(fit_part, model).p_values(held) for model in ("parametric", "empirical")}
    for name, alpha in levels(n):
        out.append(
            {
                "level": name,
                "alpha": alpha,
                "n_held_out": int(held.size),
                **{f"k_{model}": int((p[model] <= alpha * (1 + 1e-9)).sum()) for model in p},
            }
        )
    return out


def describe(counts: pd.DataFrame) -> list[str]:
    """One line per level and null model: held-out pseudo-guides at or below it over all fits, the
    ratio of the mean share per fit to nominal, and its 95% bootstrap interval over the fits."""
    lines = []
    for (name, alpha), sub in counts.groupby(["level", "alpha"], sort=False):
        total = int(sub["n_held_out"].sum())
        parts = []
        for model in ("parametric", "empirical"):
            k = int(sub[f"k_{model}"].sum())
            shares = (sub[f"k_{model}"] / sub["n_held_out"]).to_numpy(dtype=float)
            ci = bootstrap_mean(shares, 0, "tail_calibration", name, model)
            interval = "" if not np.isfinite(ci.low) else f" [{ci.low / alpha:.2f}, {ci.high / alpha:.2f}]"
            parts.append(f"{model} {k}/{total}, ratio {shares.mean() / alpha:.2f}{interval}")
        lines.append(f"    alpha {name:>12s} = {alpha:.5f} ({len(sub)} fits): " + "; ".join(parts))
    return lines


def run_screen(name: str, profiles: pd.DataFrame, cfg: dict, seed: int, n: int, variants: list[str]) -> pd.DataFrame:
    """The tail counts of the ``variants`` of one screen (one row per variant and level)."""
    rows = []
    tables = variant_tables(profiles, cfg, seed) if set(variants) - {"base"} else {"base": profiles}
    for variant in variants:
        table = tables[variant]
        t0 = time.perf_counter()
        aurocs = null_aurocs(table, variant, cfg, seed, (1 + HELD_OUT_FACTOR) * n)
        fit = NullFit(aurocs[:n][np.isfinite(aurocs[:n])], "parametric")
        print(
            f"  {name} seed {seed} {variant}: {np.isfinite(aurocs).sum()} of {aurocs.size} pseudo-guides scored, "
            f"fit on {fit.n}: logit mean {fit.logit_mean:.3f}, sd {fit.logit_sd:.3f} ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
        rows += [{"screen": name, "seed": seed, "variant": variant, **c} for c in tail_counts(aurocs, n)]
    return pd.DataFrame(rows)


def arrayed_profiles(seed: int) -> pd.DataFrame:
    """The simulated arrayed screen of one seed (the scenario's design)."""
    return screen_profiles(ArrayedDesign(), seed)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2, help="seeds of the simulated arrayed screen (0: none)")
    parser.add_argument("--profiles", type=Path, help="a per-well profile table in the data contract (parquet)")
    parser.add_argument("--name", default="profiles", help="the name of the --profiles screen in the output")
    parser.add_argument("--seed", type=int, default=0, help="the seed of the --profiles screen's draws")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--n-components", type=int, help="transforms.n_components (default: the schema's rule)")
    parser.add_argument("--scheme", choices=("leave_one_batch_out", "in_distribution"), help="splits.scheme")
    parser.add_argument("--n-null", type=int, help="the null's size n (default: classify.n_null_guides, 100)")
    parser.add_argument(
        "--min-data-in-leaf", type=int, help="classify.lightgbm.min_data_in_leaf (default: LightGBM's own, 20)"
    )
    args = parser.parse_args()
    given: dict = {"transforms": {"n_components": args.n_components}} if args.n_components else {}
    if args.scheme:
        given["splits"] = {"scheme": args.scheme}
    if args.min_data_in_leaf:
        given["classify"] = {"lightgbm": {"min_data_in_leaf": args.min_data_in_leaf}}
    cfg = validate_config(given)
    n = args.n_null or null_count(cfg["classify"]["n_null_guides"], ArrayedDesign().n_guides)
    print(
        f"null of n = {n} pseudo-guides (floor 1/(n+1) = {1 / (n + 1):.5f}), {HELD_OUT_FACTOR * n} held out; "
        f"variants {', '.join(args.variants)}; n_components {cfg['transforms']['n_components']}; splits "
        f"{cfg['splits']['scheme']}; classify at the schema's defaults"
        + (f" but min_data_in_leaf {args.min_data_in_leaf}" if args.min_data_in_leaf else "")
    )
    screens = [(f"arrayed seed {s}", "arrayed", lambda s=s: arrayed_profiles(s), s) for s in range(args.draws)]
    if args.profiles is not None:
        screens.append((args.name, args.name, lambda: pd.read_parquet(args.profiles), args.seed))
    results = []
    for label, name, load, seed in screens:
        t0 = time.perf_counter()
        results.append(run_screen(name, load(), cfg, seed, n, args.variants))
        print(f"  {label}: {time.perf_counter() - t0:.0f} s", flush=True)
    counts = pd.concat(results, ignore_index=True)
    for name, sub in counts.groupby("screen", sort=False):
        for variant, part in sub.groupby("variant", sort=False):
            print(f"{name} / {variant} (draws: {part['seed'].nunique()}):")
            print("\n".join(describe(part)))
        print(f"{name}, every variant pooled:")
        print("\n".join(describe(sub)), flush=True)


if __name__ == "__main__":
    main()
