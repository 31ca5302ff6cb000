"""Guides per second: shared binning (the library) vs rebuilding every dataset per guide.

Synthetic screen at the paper's scale of controls: 22,062 control samples x 384 features in 4
batches, plus guides of ~30 samples; one leave-one-batch-out fold; the same LightGBM
parameters (Nelson et al. 2026 Table 6 + classify defaults) and the same scoring (full model, top- and
rest-feature models for concentration) on both paths:

- shared: ``phenoica.classify.classify_guides`` (bins found once per fold on the controls,
  binned rows subset per guide); timed end to end, fold setup included;
- naive: for each guide, three ``lightgbm.Dataset`` objects built from raw floats (all
  features, top features, rest), each finding its own bins; this code path exists only here.

The naive path is slow, so by default it runs on the first ``--naive-guides`` guides only
(its per-guide cost does not depend on how many guides there are). Prints guides/s of both
and their ratio; ``--rounds`` changes num_boost_round (the ratio falls as training, which no
sharing can remove, grows).

    python benchmarks/classify_throughput.py [--rounds 100] [--guides 20] [--naive-guides 6]
"""

from __future__ import annotations

import argparse
import logging
import time

import lightgbm as lgb
import numpy as np
import pandas as pd

from phenoica.classify import (
    ClassifyOptions,
    Fold,
    classify_guides,
    control_mask,
    feature_matrix,
    guide_seed,
    guides_of,
    score_guide,
)
from phenoica.contract import (
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
    feature_name,
    validate_config,
)


def synthetic_screen(
    n_controls: int, n_features: int, n_guides: int, samples: int, n_batches: int, seed: int
) -> pd.DataFrame:
    """Controls and guides spread over batches; every third guide shifts 3 features by 1 SD."""
    rng = np.random.default_rng(seed)
    batch_of_ctrl = np.arange(n_controls) % n_batches
    genes, guides, batches, effects = [], [], [], []
    for g in range(n_guides):
        for s in range(samples):
            genes.append(f"GENE{g // 2:04d}")
            guides.append(f"GENE{g // 2:04d}_{g % 2 + 1}")
            batches.append(s % n_batches)
            effects.append(g % 3 == 0)
    n_pert = len(genes)
    n = n_controls + n_pert
    batch = np.r_[batch_of_ctrl, np.asarray(batches, dtype=np.int64)]
    X = rng.standard_normal((n, n_features)).astype(np.float32)
    X += 0.3 * rng.standard_normal((n_batches, n_features)).astype(np.float32)[batch]
    shifted = np.flatnonzero(np.r_[np.zeros(n_controls, bool), np.asarray(effects)])
    X[np.ix_(shifted, [0, 1, 2])] += 1.0
    meta = pd.DataFrame(
        {
            BATCH: [f"B{b}" for b in batch],
            PLATE: [f"B{b}P01" for b in batch],
            WELL: [f"W{i:06d}" for i in range(n)],
            SITE: 1,
            GENE: ["NTC"] * n_controls + genes,
            GUIDE: ["NTC_1"] * n_controls + guides,
            PERT_TYPE: [CONTROL] * n_controls + [PERTURBATION] * n_pert,
            IMAGE_INDEX: np.arange(n),
        }
    )
    feats = pd.DataFrame(X, columns=[feature_name(j) for j in range(n_features)])
    return pd.concat([meta, feats], axis=1)


def naive_scores(
    table: pd.DataFrame, guides: list[tuple[str, str]], fold: Fold, options: ClassifyOptions
) -> pd.DataFrame:
    """Rebuild all three datasets of every guide from raw floats (bins found per dataset)."""
    X, _ = feature_matrix(table)
    params, seed = options.booster_params(), options.seed
    rounds, k = options.num_boost_round, options.concentration_k
    train = np.zeros(len(table), bool)
    train[fold.train] = True
    ctrl = control_mask(table)
    tr_ctrl, te_ctrl = np.flatnonzero(train & ctrl), np.flatnonzero(~train & ctrl)
    out = []
    for gene, guide in guides:
        rows = np.flatnonzero(((table[GENE] == gene) & (table[GUIDE] == guide)).to_numpy())
        tr, te = rows[train[rows]], rows[~train[rows]]
        fit_rows = np.r_[tr_ctrl, tr]
        y = np.r_[np.zeros(len(tr_ctrl)), np.ones(len(tr))]

        def dataset_for(features, fit_rows=fit_rows, y=y):
            cols = np.arange(X.shape[1]) if features is None else features
            return lgb.Dataset(X[np.ix_(fit_rows, cols)], label=y, params=params)

        X_test = np.concatenate([X[te_ctrl], X[te]])
        y_test = np.r_[np.zeros(len(te_ctrl)), np.ones(len(te))]
        p = dict(params, seed=guide_seed(seed, gene, guide, fold.name))
        score = score_guide(dataset_for, X_test, y_test, p, rounds, k)
        out.append({GENE: gene, GUIDE: guide, **vars(score)})
    return pd.DataFrame(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--controls", type=int, default=22062)
    ap.add_argument("--features", type=int, default=384)
    ap.add_argument("--guides", type=int, default=20)
    ap.add_argument("--samples", type=int, default=30, help="samples per guide")
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=100, help="num_boost_round (classify default 100)")
    ap.add_argument("--naive-guides", type=int, default=6, help="guides timed on the naive path")
    ap.add_argument("--threads", type=int, default=1, help="LightGBM num_threads (classify default 1)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    table = synthetic_screen(args.controls, args.features, args.guides, args.samples, args.batches, args.seed)
    held = f"B{args.batches - 1}"
    batch = table[BATCH].to_numpy()
    fold = Fold(f"holdout_{held}", np.flatnonzero(batch != held), np.flatnonzero(batch == held), (held,))
    classify = {"num_boost_round": args.rounds, "lightgbm": {"num_threads": args.threads}}
    options = ClassifyOptions.from_config(validate_config({"classify": classify, "seed": args.seed}))
    guides = guides_of(table)
    n_train_ctrl = int((control_mask(table) & (batch != held)).sum())
    print(
        f"screen: {args.controls} controls ({n_train_ctrl} training) x {args.features} features, "
        f"{len(guides)} guides x {args.samples} samples, 1 fold, num_boost_round={args.rounds}, "
        f"num_threads={args.threads}; LightGBM {lgb.__version__}"
    )

    t0 = time.perf_counter()
    shared = classify_guides(table, guides, [fold], options, variant="base", model="bench")
    t_shared = time.perf_counter() - t0
    assert (shared["status"] == "ok").all(), shared["reason"].unique()

    naive_guides = guides[: args.naive_guides]
    t0 = time.perf_counter()
    naive = naive_scores(table, naive_guides, fold, options)
    t_naive = time.perf_counter() - t0

    # scale of run-to-run noise: the shared path with another seed, on the same guides
    other = classify_guides(
        table, naive_guides, [fold], options._replace(seed=args.seed + 1), variant="base", model="bench"
    )

    rate_shared = len(guides) / t_shared
    rate_naive = len(naive_guides) / t_naive
    both = naive.merge(shared, on=[GENE, GUIDE], suffixes=("_naive", ""))
    diff = (both["auroc_naive"] - both["auroc"]).abs()
    print(
        f"shared binning : {len(guides):4d} guides in {t_shared:7.1f} s = {rate_shared:.3f} guides/s "
        f"({t_shared / len(guides):.2f} s/guide, fold setup included)"
    )
    print(
        f"naive rebuild  : {len(naive_guides):4d} guides in {t_naive:7.1f} s = {rate_naive:.3f} guides/s "
        f"({t_naive / len(naive_guides):.2f} s/guide)"
    )
    print(f"ratio shared/naive guides/s: {rate_shared / rate_naive:.2f}x")
    noise = (other.set_index([GENE, GUIDE])["auroc"] - shared.set_index([GENE, GUIDE])["auroc"]).dropna().abs()
    print(
        f"AUROC, naive vs shared bins, same guides and seed: mean |diff| {diff.mean():.4f}, max {diff.max():.4f}; "
        f"for scale, shared with seed+1: mean |diff| {noise.mean():.4f}, max {noise.max():.4f}"
    )


if __name__ == "__main__":
    main()
