"""Benchmark: how a sweep point's hit calls move when its null has fewer pseudo-guides.

A component-sweep point classifies every real guide and ``classify.n_null_guides`` pseudo-guides
at its component count; the pseudo-guides are most of that work (the demo: 36 guides and 100
pseudo-guides per fold). Pseudo-guide ``j`` and its classifiers do not change with the number
drawn (``classify.null.null_guide_design`` and the per-guide seeds), so a null of ``n``
pseudo-guides is the first ``n`` of a larger one: this script takes a finished run's classify
shards (every (model, variant) scored with the full null) and calls the guides and genes again
with the first ``n`` pseudo-guides only, as a sweep point with ``sweep.null_guides: n`` would.

Printed per (model, variant) and ``n``: guide and gene hits at ``q < --q`` (the sweep's
threshold), the Jaccard index of the guide hits against the full null's, and the CPU share of
a sweep point's classification that ``n`` keeps (guides + n over guides + full null; every
classifier of a guide costs about the same).

    python benchmarks/sweep_null_size.py [--results results] [--sizes 50 25 10]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from phenoica.classify import NULL_GENE
from phenoica.contract import GENE, GUIDE
from phenoica.hits import screen_calls
from phenoica.sweep import first_null_guides


def calls(rows: pd.DataFrame, q: float) -> tuple[set[str], int]:
    """Guide hits (names) and the number of gene hits at ``q`` under the parametric null."""
    out = screen_calls(rows, None, "parametric", q)
    guides = out["guides"][~out["guides"]["is_null_guide"].astype(bool)]
    return set(guides.loc[guides["q_value"] < q, GUIDE].astype(str)), int((out["genes"]["q_value"] < q).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 25, 10])
    parser.add_argument("--q", type=float, default=0.1, help="the sweep's q threshold")
    args = parser.parse_args()
    shards = sorted((args.results / "classify").glob("*/*/shard_*.parquet"))
    if not shards:
        raise SystemExit(f"{args.results}/classify: no shards; is {args.results} a finished run's results folder?")
    tables = pd.concat([pd.read_parquet(p) for p in shards], ignore_index=True)
    print(f"{'model/variant':<20} {'null':>5} {'guide hits':>10} {'gene hits':>9} {'Jaccard':>8} {'CPU share':>9}")
    for (model, variant), rows in tables.groupby(["model", "variant"], sort=True):
        n_full = int(rows.loc[rows[GENE].astype(str) == NULL_GENE, GUIDE].nunique())
        n_real = int(rows.loc[rows[GENE].astype(str) != NULL_GENE, GUIDE].nunique())
        full, full_genes = calls(rows, args.q)
        print(f"{model + '/' + variant:<20} {n_full:>5} {len(full):>10} {full_genes:>9} {1.0:8.2f} {1.0:9.2f}")
        for n in args.sizes:
            hits, genes = calls(first_null_guides(rows, n, n_full), args.q)
            union = hits | full
            jaccard = len(hits & full) / len(union) if union else 1.0
            share = (n_real + n) / (n_real + n_full)
            print(f"{'':<20} {n:>5} {len(hits):>10} {genes:>9} {jaccard:8.2f} {share:9.2f}")


if __name__ == "__main__":
    main()
