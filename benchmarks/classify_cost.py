"""Classification cost per guide against its floor, the concentration switch, and the null's
share at genome scale.

Synthetic screen at the paper's scale of controls (22,062 control samples x 384 features in 4
batches, well-structured: 4 samples per well), guides of one well per plate, one
leave-one-batch-out fold, Nelson et al. 2026 Table 6 parameters, ``num_threads`` 1. In one run:

- library, concentration on: ``classify_guides`` on the real guides (3 models per guide),
  fold setup included;
- library, concentration off: the same guides, the full model only;
- library, null: ``classify.n_null_guides``-style pseudo-guides from ``null_guide_design``
  (1 model each);
- floor: the same models trained on prebuilt, already-binned Datasets (built, constructed and
  feature-subset before the clock starts), same rows, rounds, threads and seeds: only
  ``lightgbm.train`` is timed.

- setup: what the library does once per fold and block of guides (bin boundaries on the
  training controls, the block's binned columns), timed alone.

Times are CPU seconds of this process (``time.process_time``; every path runs on one
thread), so other work on the machine does not bias the ratios. Prints seconds per guide on
each path, the per-guide ratio library / floor (the library's time
less the once-per-fold setup, over the floor) and the ratio with the setup spread over the guides
of one classify job of the screen config; and, with the cost per guide-fold measured here, the
CPU-hours of classification for that config (default ``benchmarks/genome_scale.yaml``: guides x
folds x variants, folds = batches under leave-one-batch-out) with concentration on and off, and
the null's share of each.

    python benchmarks/classify_cost.py [--guides 8] [--nulls 8] [--rounds 100] [--config benchmarks/genome_scale.yaml]
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
import yaml

from phenoica.classify.bins import FoldBins
from phenoica.classify.engine import _guide_seed, classify_guides, feature_matrix
from phenoica.classify.null import GuideSamples, control_mask, guide_samples, guides_of, null_guide_design
from phenoica.classify.params import ClassifyOptions, lightgbm_params, resolve_classify_config
from phenoica.classify.splits import Fold
from phenoica.contract.screen import (
    BATCH,
    CONTROL,
    GENE,
    GUIDE,
    IMAGE_INDEX,
    PERT_TYPE,
    PERTURBATION,
    PLATE,
    SITE,
    WELL,
)
from phenoica.identifiability import metrics
from phenoica.workflow.config import validate_config

SITES = 4


def synthetic_screen(
    n_controls: int, n_features: int, n_guides: int, n_batches: int, plates: int, seed: int
) -> pd.DataFrame:
    """Control wells and guide wells (one per plate) of ``SITES`` samples; every third guide
    shifts 3 features by 1 SD; batch shifts on every sample."""
    rng = np.random.default_rng(seed)
    ctrl_wells = n_controls // SITES
    meta = []
    for w in range(ctrl_wells):
        b, p = w % n_batches, (w // n_batches) % plates
        meta += [(f"B{b}", f"B{b}P{p}", f"C{w:06d}", s, "NTC", "NTC_1", CONTROL, 0) for s in range(SITES)]
    for g in range(n_guides):
        for b in range(n_batches):
            for p in range(plates):
                meta += [
                    (
                        f"B{b}",
                        f"B{b}P{p}",
                        f"G{g:05d}",
                        s,
                        f"GENE{g // 2:05d}",
                        f"GENE{g // 2:05d}_{g % 2}",
                        PERTURBATION,
                        int(g % 3 == 0),
                    )
                    for s in range(SITES)
                ]
    t = pd.DataFrame(meta, columns=[BATCH, PLATE, WELL, SITE, GENE, GUIDE, PERT_TYPE, "effect"])
    t[IMAGE_INDEX] = np.arange(len(t))
    batch = t[BATCH].str[1:].astype(int).to_numpy()
    X = rng.standard_normal((len(t), n_features)).astype(np.float32)
    X += 0.3 * rng.standard_normal((n_batches, n_features)).astype(np.float32)[batch]
    X[np.flatnonzero(t["effect"].to_numpy()), :3] += 1.0
    feats = pd.DataFrame(X, columns=[f"emb_{j:04d}" for j in range(n_features)])
    return pd.concat([t.drop(columns="effect"), feats], axis=1)


def floor_seconds(
    table: pd.DataFrame, targets: list[GuideSamples], fold: Fold, cfg: dict, seed: int, concentration: bool
) -> float:
    """lightgbm.train time of each target's models on prebuilt, constructed, binned Datasets."""
    X, _ = feature_matrix(table)
    params = lightgbm_params(cfg, seed)
    rounds, k = int(cfg["num_boost_round"]), float(cfg["concentration_k"])
    train = np.zeros(len(table), bool)
    train[fold.train] = True
    ctrl = control_mask(table)
    tr_ctrl, te_ctrl = np.flatnonzero(train & ctrl), np.flatnonzero(~train & ctrl)
    bins = FoldBins.build(X, tr_ctrl, te_ctrl, params)
    total = 0.0
    for t in targets:
        tr = t.rows[train[t.rows]]
        block = bins.block(tr)
        p = dict(params, seed=_guide_seed(seed, t.gene, t.guide, fold.name))
        datasets = [block.guide_dataset(tr).construct()]
        if concentration and not t.is_null:
            full = lgb.train(dict(p), datasets[0], num_boost_round=rounds)
            top, rest = metrics.top_features(full.feature_importance(importance_type="split"), k)
            datasets += [block.guide_dataset(tr, top).construct(), block.guide_dataset(tr, rest).construct()]
        t0 = time.process_time()
        for ds in datasets:
            lgb.train(dict(p), ds, num_boost_round=rounds)
        total += time.process_time() - t0
    return total


def timed(fn) -> tuple[float, object]:
    """CPU seconds of this process (LightGBM runs on 1 thread): steady on a shared machine."""
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--controls", type=int, default=22062)
    ap.add_argument("--features", type=int, default=384)
    ap.add_argument("--guides", type=int, default=8)
    ap.add_argument("--nulls", type=int, default=8, help="pseudo-guides timed (the cost per pseudo-guide)")
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--plates", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config", type=Path, default=Path(__file__).with_name("genome_scale.yaml"))
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    table = synthetic_screen(args.controls, args.features, args.guides, args.batches, args.plates, args.seed)
    held = f"B{args.batches - 1}"
    batch = table[BATCH].to_numpy()
    fold = Fold(f"holdout_{held}", np.flatnonzero(batch != held), np.flatnonzero(batch == held), (held,))
    base = {"num_boost_round": args.rounds, "lightgbm": {"num_threads": 1}}
    on = resolve_classify_config(dict(base, concentration=True))
    off = resolve_classify_config(dict(base, concentration=False))
    guides = guides_of(table)
    nulls = null_guide_design(table, args.nulls, args.seed)
    print(
        f"screen: {args.controls} controls x {args.features} features, {len(guides)} guides of "
        f"{args.plates * args.batches} wells x {SITES} samples, {len(nulls)} pseudo-guides, 1 fold, "
        f"num_boost_round={args.rounds}, 1 thread; LightGBM {lgb.__version__}"
    )

    t_on, _ = timed(
        lambda: classify_guides(table, guides, [fold], ClassifyOptions.from_config(on, args.seed), "base", "bench")
    )
    t_off, _ = timed(
        lambda: classify_guides(table, guides, [fold], ClassifyOptions.from_config(off, args.seed), "base", "bench")
    )
    t_null, _ = timed(
        lambda: classify_guides(
            table, [], [fold], ClassifyOptions.from_config(on, args.seed), "base", "bench", nulls=nulls
        )
    )
    real_targets = guide_samples(table, guides)
    f_on = floor_seconds(table, real_targets, fold, on, args.seed, concentration=True)
    f_off = floor_seconds(table, real_targets, fold, off, args.seed, concentration=False)
    f_null = floor_seconds(table, nulls, fold, on, args.seed, concentration=False)

    X, _ = feature_matrix(table)
    train = np.zeros(len(table), bool)
    train[fold.train] = True
    tr_ctrl = np.flatnonzero(train & control_mask(table))
    te_ctrl = np.flatnonzero(~train & control_mask(table))
    guide_rows = np.concatenate([t.rows[train[t.rows]] for t in guide_samples(table, guides)])
    t_setup, _ = timed(lambda: FoldBins.build(X, tr_ctrl, te_ctrl, lightgbm_params(on, args.seed)).block(guide_rows))

    cfg = validate_config(yaml.safe_load(args.config.read_text()))
    demo = cfg["demo"]
    n_guides = demo["n_genes"] * demo["guides_per_gene"]
    per_job = n_guides / cfg["classify"]["n_shards"]
    n, m = len(guides), len(nulls)
    print(f"once per fold and block (bins + binned block): {t_setup:.1f} s")
    print(
        f"{'path':34s} {'library s/guide':>16s} {'floor s/guide':>14s} {'per-guide ratio':>16s} "
        f"{f'ratio at {per_job:.0f} guides/job':>24s}"
    )
    for name, t, f, k in (
        ("real guides, concentration on", t_on, f_on, n),
        ("real guides, concentration off", t_off, f_off, n),
        ("null pseudo-guides (1 model)", t_null, f_null, m),
    ):
        marginal = (t - t_setup) / k
        print(
            f"{name:34s} {t / k:16.3f} {f / k:14.3f} {marginal / (f / k):15.2f}x "
            f"{(marginal + t_setup / per_job) / (f / k):23.2f}x"
        )

    n_folds = demo["n_batches"] if cfg["splits"]["scheme"] == "leave_one_batch_out" else cfg["splits"]["n_folds"]
    n_var = len(cfg["transforms"]["variants"]) * len(cfg["models"])
    n_null = cfg["classify"]["n_null_guides"]
    print(
        f"\n{args.config.name}: {n_guides} guides x {n_folds} folds x {n_var} (model, variant) pairs, "
        f"{n_null} pseudo-guides per pair (cost per guide-fold as measured above at {args.controls} controls)"
    )
    # per guide-fold: the marginal cost plus the setup spread over one job's guides
    null_h = ((t_null - t_setup) / m + t_setup / per_job) * n_null * n_folds * n_var / 3600
    for name, t in (("concentration on", t_on), ("concentration off", t_off)):
        per = (t - t_setup) / n + t_setup / per_job
        real_h = per * n_guides * n_folds * n_var / 3600
        print(
            f"  {name:18s}: {real_h + null_h:10.1f} CPU-hours, of which the null {null_h:.1f} "
            f"({100 * null_h / (real_h + null_h):.2f}%)"
        )


if __name__ == "__main__":
    main()
