"""How much the demo's hit recall moves when only the classifier's seed changes.

Re-scores a finished demo run's guides (the variants ``--variants`` of every model, the run's own
transform tables and folds) with the run's classify settings at seeds 0 .. ``--seeds`` - 1 of the
classifier alone (LightGBM's feature sampling, the pseudo-guides' draw); the embeddings, the
variants and the folds stay the run's. Seed ``config seed`` reproduces the run's own calls. Calls
are the run's hit calls (``hits`` section; q < ``--q``), scored against the simulated truth and
pooled over the cells as ``tests/test_demo_truth.py`` pools them. Prints one line per seed (pooled
recall, observed FDR, true positives per cell), then the mean, standard deviation and range: the
spread a floor on the pooled recall must clear.

    python benchmarks/demo_recall_spread.py results --config config.yaml [--seeds 8]

The test's floor is pooled over both seeds: re-score a run of its config, e.g. the folder
``benchmarks/demo_truth_floors.py --dir DIR`` ran (``DIR/results --config DIR/config.yaml``); the
default run scores one model.

Concentration models are not trained (they do not change the full model's AUROC); LightGBM runs on
one thread per process, two processes side by side.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from phenoica.classify import ClassifyOptions, classify_shard, read_folds
from phenoica.contract import OUTPUTS, load_config
from phenoica.hits import HitOptions, pooled_recall_fdr, recall_fdr, screen_calls


def score_cell(results: Path, options: ClassifyOptions, model: str, variant: str, seeds: int) -> list[pd.DataFrame]:
    """The guide-fold rows of one (model, variant) at each classifier seed 0 .. ``seeds`` - 1
    (``options`` with that seed; its table and folds read once)."""
    table = pd.read_parquet(results / OUTPUTS["transforms"]["variant"].format(model=model, variant=variant))
    folds = read_folds(results / OUTPUTS["splits"]["folds"].format(model=model), table)
    return [
        classify_shard(table, 0, folds, options._replace(seed=seed), variant=variant, model=model)
        for seed in range(seeds)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="a finished demo run's results folder")
    ap.add_argument("--config", type=Path, required=True, help="the config the run used")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--variants", nargs="+", default=["pca", "pca_ica"])
    ap.add_argument("--q", type=float, default=0.1)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    config = load_config(args.config)
    run = ClassifyOptions.from_config(config)
    options = run._replace(
        concentration=False, n_shards=1, lightgbm_run_time=dict(run.lightgbm_run_time, num_threads=1)
    )
    null_model = HitOptions.from_config(config).null_model
    models = sorted(config["models"])
    truth = pd.read_parquet(args.results / OUTPUTS["screen"]["truth"])
    print(
        f"{args.results}: models {models}, variants {args.variants}, classifier seeds 0..{args.seeds - 1} "
        f"(the run's: {config['seed']}), q < {args.q}, null {null_model}",
        flush=True,
    )
    t0 = time.time()
    jobs = [(args.results, options, m, v, args.seeds) for m in models for v in args.variants]
    # spawned workers: this process has run LightGBM (the parameter check of ClassifyOptions), and
    # a worker forked after OpenMP has started can hang in its first LightGBM call
    with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        by_cell = list(pool.map(score_cell, *zip(*jobs)))  # cell -> rows per seed
    recalls = []
    for seed, parts in enumerate(zip(*by_cell)):
        calls = screen_calls(pd.concat(parts, ignore_index=True), None, null_model, args.q)
        table = recall_fdr(calls["guides"], truth, (args.q,))
        guide = table[table["level"] == "guide"]
        tp, n = int(guide["true_positives"].sum()), int(guide["n_true_effects"].sum())
        recall, fdr = pooled_recall_fdr(guide)
        cells = " ".join(f"{r.model}/{r.variant} {r.true_positives}" for r in guide.itertuples())
        print(f"seed {seed}: pooled recall {recall:.3f} ({tp} of {n}), observed FDR {fdr:.3f}; {cells}", flush=True)
        recalls.append(recall)
    r = np.asarray(recalls)
    print(
        f"pooled recall over {len(r)} seeds: mean {r.mean():.3f}, sd {r.std(ddof=1):.3f}, "
        f"range {r.min():.3f}-{r.max():.3f}; mean - 3 sd {r.mean() - 3 * r.std(ddof=1):.3f} ({time.time() - t0:.0f} s wall)"
    )


if __name__ == "__main__":
    main()
