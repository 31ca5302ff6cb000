"""What keying plate jobs on store content costs when the DAG is built, on a genome-scale plate list.

Every invocation of the workflow (a dry run too) computes ``phenoica.workflow.dag.store_digest`` of
each plate's store: one ``os.scandir`` walk (name, size and modification time of every file),
the whole of the small metadata documents and the first and last 4 KiB of four chunk files.
This script lays out ``--plates`` Zarr-shaped stores of ``--chunks`` chunk files each (default:
1,400 plates of 6,144 images in chunks of 64 images: 96 chunks, the size of a genome-wide
pooled screen; the chunk files are small, since only their count and a few bytes are read), then
times, in the same run:

- baseline: what building the DAG read of each store before (``os.stat`` of its two
  ``zarr.json`` documents, the screen check's key);
- digest: :func:`phenoica.workflow.dag.store_digest` of every store, cold and warm (a second pass:
  the file system's metadata cached, as on a rerun).

It prints seconds, per-plate milliseconds and the ratio digest / baseline. Run:

    python benchmarks/store_digest.py            # 1,400 plates x 96 chunks in a temp folder
    python benchmarks/store_digest.py --plates 100 --chunks 20
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from phenoica.workflow.dag import store_digest


def lay_out(root: Path, plates: int, chunks: int, chunk_bytes: int) -> list[Path]:
    """``plates`` stores ``P0000.zarr ...`` with a group and array ``zarr.json`` and ``chunks``
    chunk files ``tiles/c/{i}/0/0/0`` of ``chunk_bytes`` bytes."""
    stores = []
    payload = os.urandom(chunk_bytes)
    for p in range(plates):
        store = root / f"P{p:04d}.zarr"
        (store / "tiles" / "c").mkdir(parents=True)
        (store / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group"}))
        (store / "tiles" / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "array"}))
        for i in range(chunks):
            folder = store / "tiles" / "c" / str(i) / "0" / "0"
            folder.mkdir(parents=True)
            (folder / "0").write_bytes(payload)
        stores.append(store)
    return stores


def timed(fn, stores: list[Path]) -> float:
    start = time.perf_counter()
    for store in stores:
        fn(store)
    return time.perf_counter() - start


def baseline(store: Path) -> None:
    for doc in (store / "zarr.json", store / "tiles" / "zarr.json"):
        os.stat(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plates", type=int, default=1400)
    parser.add_argument("--chunks", type=int, default=96, help="chunk files per store")
    parser.add_argument("--chunk-bytes", type=int, default=16384)
    parser.add_argument("--dir", type=Path, default=None, help="where to lay out the stores (default: a temp folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        start = time.perf_counter()
        stores = lay_out(Path(tmp), args.plates, args.chunks, args.chunk_bytes)
        made = time.perf_counter() - start
        print(
            f"laid out {args.plates} stores x {args.chunks} chunks ({args.plates * (args.chunks + 2)} files) in {made:.1f} s"
        )
        base = timed(baseline, stores)
        cold = timed(store_digest, stores)
        warm = timed(store_digest, stores)
        n = len(stores)
        print(f"baseline (stat of each store's zarr.json): {base:.3f} s ({1000 * base / n:.3f} ms/plate)")
        print(f"store_digest, first pass:  {cold:.3f} s ({1000 * cold / n:.3f} ms/plate), ratio {cold / base:.1f}x")
        print(f"store_digest, second pass: {warm:.3f} s ({1000 * warm / n:.3f} ms/plate), ratio {warm / base:.1f}x")


if __name__ == "__main__":
    main()
