"""Benchmark: the similarity and recall stage of the gene map at genome scale.

Synthetic gene profiles (``--genes`` x ``--d`` float32: Gaussian noise plus 300 planted
complexes of 3-8 genes sharing a direction) and an annotation source of ``--pairs`` gene pairs
(the planted complexes' pairs, then random pairs), in the shape of CORUM. Each measurement
runs in a fresh Python process that reports its wall time and peak resident memory
(``ru_maxrss``):

    import     a process that only imports phenoica and numpy (the memory floor)
    matmul     the baseline: one bare numpy float32 product U @ U.T of the unit profiles, the
               full (genes x genes) cosine matrix in memory, as EFAAR computes it
    stage      phenoica's stage: nearest_neighbors (top --k per gene) + relationship_recall
               (null of all gene-pair cosines, EFAAR's 5/95 and 10/90 thresholds), blocked in
               --block-rows genes

Printed: both times and peaks, the stage's time / matmul's time, and the stage's working set
(peak memory above the memory held once the data are made) / matmul's (below 1: the stage never
holds the matrix).

    python benchmarks/biomap_scale.py                      # 17,000 genes x 384 (the genome config)
    python benchmarks/biomap_scale.py --genes 3000         # quick look
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

STAGES = ("import", "matmul", "stage")


def peak_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_data(genes: int, d: int, n_pairs: int, seed: int) -> tuple[np.ndarray, list[str], "object"]:
    """Profiles with planted complexes, gene names and an annotation table of gene pairs."""
    import pandas as pd

    from phenoica.screen import canonical_pairs

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((genes, d), dtype=np.float32)
    names = [f"GENE{i:05d}" for i in range(genes)]
    pairs: list[tuple[str, str]] = []
    start = 0
    for _ in range(300):
        size = int(rng.integers(3, 9))
        if start + size > genes:
            break
        X[start : start + size] += rng.standard_normal(d).astype(np.float32)
        members = names[start : start + size]
        pairs += [(a, b) for i, a in enumerate(members) for b in members[i + 1 :]]
        start += size
    extra = max(0, n_pairs - len(pairs))
    a, b = rng.integers(0, genes, extra), rng.integers(0, genes, extra)
    pairs += [(names[i], names[j]) for i, j in zip(a, b)]
    table = canonical_pairs(pd.DataFrame(pairs, columns=["entity1", "entity2"]), "synthetic")
    return X, names, table


def run_stage(stage: str, args: argparse.Namespace) -> dict:
    """One measurement, in this process."""
    import phenoica  # noqa: F401  (the import floor includes the package)
    from phenoica.biomap import GeneMapOptions, nearest_neighbors, relationship_recall, unit_rows
    from phenoica.contract import validate_config

    if stage == "import":
        return {"stage": stage, "seconds": 0.0, "peak_mb": peak_mb()}
    X, names, pairs = make_data(args.genes, args.d, args.pairs, args.seed)
    schema = GeneMapOptions.from_config(validate_config({}))  # EFAAR's recall thresholds and minimum
    base = peak_mb()
    start = time.perf_counter()
    if stage == "matmul":
        U = unit_rows(X)
        S = U @ U.T
        checksum = float(S[0, 1])
        del S
        detail = {"checksum": checksum}
    else:
        q = np.linspace(0.0, 0.05, len(names))
        nn = nearest_neighbors(X, names, q, args.k, args.block_rows)
        recall, _ = relationship_recall(
            X,
            names,
            {"synthetic": pairs},
            thresholds=schema.recall_thresholds,
            min_entities=schema.min_entities,
            block_rows=args.block_rows,
        )
        detail = {
            "neighbor_rows": len(nn),
            "pairs": int(recall["n_pairs"].iloc[0]),
            "recall": recall[["lower", "upper", "recall"]].to_dict("records"),
        }
    seconds = time.perf_counter() - start
    return {"stage": stage, "seconds": seconds, "peak_mb": peak_mb(), "data_mb": base, **detail}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--genes", type=int, default=17000)
    parser.add_argument("--d", type=int, default=384)
    parser.add_argument("--pairs", type=int, default=75000, help="annotated pairs (CORUM.txt holds ~37,000 distinct)")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--block-rows", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.stage:
        print(json.dumps(run_stage(args.stage, args)))
        return
    results = {}
    for stage in STAGES:
        cmd = [
            sys.executable,
            __file__,
            "--stage",
            stage,
            "--genes",
            str(args.genes),
            "--d",
            str(args.d),
            "--pairs",
            str(args.pairs),
            "--k",
            str(args.k),
            "--block-rows",
            str(args.block_rows),
            "--seed",
            str(args.seed),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        results[stage] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{stage:7s} {results[stage]['seconds']:8.1f} s   peak {results[stage]['peak_mb']:8.0f} MB", flush=True)
    mm, st = results["matmul"], results["stage"]
    ratios = {
        "time_stage_over_matmul": st["seconds"] / mm["seconds"],
        "working_set_stage_over_matmul": (st["peak_mb"] - st["data_mb"]) / max(mm["peak_mb"] - mm["data_mb"], 1e-9),
        "working_set_stage_mb": st["peak_mb"] - st["data_mb"],
        "working_set_matmul_mb": mm["peak_mb"] - mm["data_mb"],
        "full_matrix_mb": args.genes * args.genes * 4 / 2**20,
    }
    print(
        f"genes {args.genes} x {args.d} features, {st['pairs']} annotated pairs in the map, k = {args.k}, "
        f"blocks of {args.block_rows} genes"
    )
    print(f"ratio time    stage / bare matmul: {ratios['time_stage_over_matmul']:.2f}")
    print(
        f"ratio memory  stage / bare matmul (peak above the memory once the data are made: "
        f"{ratios['working_set_stage_mb']:.0f} MB / {ratios['working_set_matmul_mb']:.0f} MB): "
        f"{ratios['working_set_stage_over_matmul']:.2f}  (the full matrix alone: {ratios['full_matrix_mb']:.0f} MB)"
    )
    print("recall:", st["recall"])
    if args.json:
        args.json.write_text(
            json.dumps(
                {"args": vars(args) | {"json": str(args.json)}, "results": results, "ratios": ratios},
                indent=2,
                default=str,
            )
        )


if __name__ == "__main__":
    main()
