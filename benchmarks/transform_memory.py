"""Benchmark: peak memory of the streaming profile stages does not grow with the screen.

Synthetic per-plate embedding parquets (``--plate-rows`` images per plate, ``--d`` float32
features: a few Laplace sources mixed into the features + unit Gaussian noise + a per-batch
offset and scale; a quarter of the images controls) are written for N and 4N images. Then,
for each size, each stage runs in a fresh Python process, which reports its peak resident
memory (``ru_maxrss``) and wall time:

    gather   phenoica.profiles.write_profiles: plate files -> profile parquet (image level)
    fit      phenoica.transforms.fit_transforms on the profile parquet (all four variants)
    apply    phenoica.transforms.apply_transform_file, variant pca_ica (``--apply``)

and a process that only imports phenoica gives the import baseline. Printed per stage: both
peaks, the growth of the 4N peak over the N peak in percent, and the same growth measured
above the import baseline (the working set: what streaming must keep flat).

    python benchmarks/transform_memory.py                  # N = 250,000 -> 4N = 1,000,000 (< 4 min on 2 cores)
    python benchmarks/transform_memory.py --n 50000        # quick look
    python benchmarks/transform_memory.py --batch-rows 16384 --apply base pca_ica

Needs ~2 x 4N x d x 4 bytes of free disk in ``--dir`` (default: a temporary folder, removed).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

STAGES = ("gather", "fit", "apply")


def peak_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_plates(folder: Path, n: int, d: int, plate_rows: int, plates_per_batch: int, seed: int) -> list[Path]:
    """Synthetic plate embedding files for ``n`` images, one parquet per plate (features stored
    plain, as phenoica writes profiles: dictionary-encoded floats take ~5x longer to write)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from scipy.stats import ortho_group

    from phenoica.contract import feature_name

    rng = np.random.default_rng(seed)
    sources = 8
    mixing = (3.0 * ortho_group.rvs(d, random_state=seed)[:sources]).astype(np.float32)
    names = [feature_name(i) for i in range(d)]
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for p, start in enumerate(range(0, n, plate_rows)):
        m = min(plate_rows, n - start)
        batch = p // plates_per_batch
        brng = np.random.default_rng([seed, batch])
        offset, scale = brng.normal(0, 1, d).astype(np.float32), brng.uniform(0.7, 1.4, d).astype(np.float32)
        S = (rng.laplace(size=(m, sources)) / np.sqrt(2)).astype(np.float32)
        X = (S @ mixing + rng.standard_normal((m, d), dtype=np.float32)) * scale + offset
        control = np.arange(m) % 4 == 0
        gene = np.where(control, "non-targeting", np.char.add("G", (np.arange(m) % 500).astype(str)))
        meta = {
            "Metadata_Batch": np.full(m, f"B{batch:02d}"),
            "Metadata_Plate": np.full(m, f"P{p:04d}"),
            "Metadata_Well": np.char.add("W", (np.arange(m) // 9).astype(str)),
            "Metadata_Site": np.arange(m) % 9,
            "Metadata_Gene": gene,
            "Metadata_Guide": np.char.add(gene, "_g1"),
            "Metadata_PertType": np.where(control, "control", "perturbation"),
            "Metadata_ImageIndex": np.arange(m),
        }
        columns = [pa.array(v) for v in meta.values()] + [pa.array(col) for col in np.ascontiguousarray(X.T)]
        path = folder / f"P{p:04d}.parquet"
        pq.write_table(
            pa.Table.from_arrays(columns, names=[*meta, *names]),
            path,
            row_group_size=16384,
            use_dictionary=list(meta),
            compression="none",
        )
        paths.append(path)
    return paths


def child(args: argparse.Namespace) -> None:
    """One stage in this (fresh) process; prints a JSON line with its peak memory and time."""
    from phenoica.contract import validate_config
    from phenoica.profiles import write_profiles
    from phenoica.transforms import TransformOptions, apply_transform_file, fit_transforms

    work = Path(args.dir) / f"n{args.n}"
    profiles = work / "profiles.parquet"
    transforms = {"batch_rows": args.batch_rows, "n_components": "parallel", "ica_max_samples": args.ica_rows}
    options = TransformOptions.from_config(validate_config({"transforms": transforms}))
    base = peak_mb()
    t0 = time.perf_counter()
    if args.stage == "gather":
        rows = write_profiles(sorted((work / "plates").glob("*.parquet")), profiles, "image", None, args.batch_rows)
        info = {"rows": rows}
    elif args.stage == "fit":
        fit_transforms(profiles, options, work / "transforms")
        report = json.loads((work / "transforms" / "fit_report.json").read_text())
        info = {"n_components": report["pca"]["n_components"], "ica_rows": report["pca_ica"]["ica"]["n_samples"]}
    elif args.stage == "apply":
        rows = 0
        for variant in args.apply:
            rows += apply_transform_file(
                profiles, work / "transforms" / f"{variant}.npz", work / f"{variant}.parquet", args.batch_rows
            )
        info = {"rows": rows}
    else:  # imports only
        info = {}
    seconds = time.perf_counter() - t0
    print(
        json.dumps(
            {"stage": args.stage, "n": args.n, "import_mb": base, "peak_mb": peak_mb(), "seconds": seconds, **info}
        )
    )


def run_child(args: argparse.Namespace, stage: str, n: int) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--stage",
        stage,
        "--n",
        str(n),
        "--dir",
        str(args.dir),
        "--batch-rows",
        str(args.batch_rows),
        "--ica-rows",
        str(args.ica_rows),
        "--apply",
        *args.apply,
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=250_000, help="images of the small screen (the large one has 4N)")
    parser.add_argument("--d", type=int, default=384, help="embedding dimension")
    parser.add_argument("--plate-rows", type=int, default=25_000, help="images per plate file")
    parser.add_argument("--plates-per-batch", type=int, default=4)
    parser.add_argument("--batch-rows", type=int, default=65_536, help="transforms.batch_rows / profiles.batch_rows")
    parser.add_argument("--ica-rows", type=int, default=200_000, help="transforms.ica_max_samples")
    parser.add_argument("--apply", nargs="+", default=["pca_ica"], help="variants applied in the apply stage")
    parser.add_argument("--dir", default=None, help="work folder (default: a temporary one, removed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stage", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    owned = args.dir is None
    args.dir = Path(args.dir or tempfile.mkdtemp(prefix="phenoica-bench-"))
    sizes = (args.n, 4 * args.n)
    try:
        t0 = time.perf_counter()
        for n in sizes:
            write_plates(args.dir / f"n{n}" / "plates", n, args.d, args.plate_rows, args.plates_per_batch, args.seed)
        print(
            f"data: {sizes[0]:,} and {sizes[1]:,} images x {args.d} float32 features, "
            f"{args.plate_rows:,} images per plate file ({time.perf_counter() - t0:.0f} s to write)"
        )
        print(
            f"batch_rows {args.batch_rows:,}; ica_max_samples {args.ica_rows:,}; apply: {', '.join(args.apply)}; "
            f"{os.cpu_count()} CPUs"
        )
        baseline = run_child(args, "imports", sizes[0])["peak_mb"]
        print(f"import baseline (python + phenoica): {baseline:.0f} MB peak RSS\n")
        results = {(s, n): run_child(args, s, n) for n in sizes for s in STAGES}
        head = f"{'stage':8s} {'peak N':>9s} {'peak 4N':>9s} {'growth':>8s} {'growth above baseline':>22s} {'time N':>8s} {'time 4N':>8s}"
        print(head)
        print("-" * len(head))
        for stage in STAGES:
            small, large = results[(stage, sizes[0])], results[(stage, sizes[1])]
            growth = 100 * (large["peak_mb"] / small["peak_mb"] - 1)
            above = 100 * ((large["peak_mb"] - baseline) / max(small["peak_mb"] - baseline, 1e-9) - 1)
            print(
                f"{stage:8s} {small['peak_mb']:7.0f}MB {large['peak_mb']:7.0f}MB {growth:+7.1f}% {above:+21.1f}% "
                f"{small['seconds']:7.1f}s {large['seconds']:7.1f}s"
            )
        fit = results[("fit", sizes[1])]
        print(f"\nfit: {fit['n_components']} components by parallel analysis; ICA on {fit['ica_rows']:,} rows")
        total = sum(r["seconds"] for r in results.values())
        print(f"stage time in all: {total:.0f} s; whole run {time.perf_counter() - t0:.0f} s")
    finally:
        if owned:
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
