"""Peak memory of streaming plate embedding: N images vs 4N images (goal: growth <= 10%).

Two plate stores (N and 4N images) are written to a temporary folder; each is embedded by
phenoica.embed.embed_plate in a fresh subprocess, whose peak RSS (resource.getrusage) is
reported, so that the two peaks do not mix. A third subprocess does everything but the
embedding (imports, model, metadata) to show the floor that both share.

    python benchmarks/embed_memory.py                     # ~1 minute on 2 CPU cores
    python benchmarks/embed_memory.py --images 2048 --size 128 --chunk-images 128
"""

from __future__ import annotations

import argparse
import logging
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def child(store: str, n: int, args: argparse.Namespace, embed: bool) -> None:
    """Runs in the subprocess: embed one store and print the peak RSS in MiB."""
    import torch
    from embed_throughput import embed_options, plate_metadata, small_vit

    from phenoica.embed import PlateModel, embed_plate

    torch.set_num_threads(args.threads)
    model = small_vit(args.channels, args.seed)
    meta = plate_metadata(n, "P01")
    if embed:
        log = logging.getLogger("embed_memory")
        log.propagate = False
        log.addHandler(logging.NullHandler())
        embed_plate(
            Path(store),
            meta,
            PlateModel(model),
            Path(store).with_suffix(".parquet"),
            embed_options(
                crop_size=args.crop,
                batch_size=args.batch_size,
                chunk_images=args.chunk_images,
                device=args.device,
                threads=args.threads,
            ),
            log=log,
        )
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # Linux: KiB -> MiB


def write_store(path: Path, n: int, args: argparse.Namespace) -> Path:
    """A plate of n random images, written block by block (the parent never holds it whole)."""
    from phenoica.contract import write_plate

    rng = np.random.default_rng(args.seed)
    shape = (n, args.channels, args.size, args.size)
    blocks = (rng.integers(0, 256, (min(256, n - i), *shape[1:]), dtype=np.uint8) for i in range(0, n, 256))
    return write_plate(
        path,
        blocks,
        [f"ch{i}" for i in range(args.channels)],
        shape=shape,
        dtype="uint8",
        chunk_images=args.chunk_images,
    )


def peak_mib(store: Path | str, n: int, argv: list[str], embed: bool = True) -> float:
    cmd = [sys.executable, __file__, *argv, "--child", str(store), str(n), "1" if embed else "0"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=512, help="N; the large plate has 4N")
    ap.add_argument("--channels", type=int, default=5)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--crop", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--chunk-images", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", nargs=3, metavar=("STORE", "N", "EMBED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args, args.child[2] == "1")
        return

    argv = sys.argv[1:]
    n = args.images
    with tempfile.TemporaryDirectory() as tmp:
        small = write_store(Path(tmp) / "small" / "P01.zarr", n, args)
        large = write_store(Path(tmp) / "large" / "P01.zarr", 4 * n, args)
        floor = peak_mib(small, n, argv, embed=False)
        p_small = peak_mib(small, n, argv)
        p_large = peak_mib(large, 4 * n, argv)
    mb = args.channels * args.size * args.size * n / 2**20
    print(
        f"setup: {args.channels} ch x {args.size}x{args.size} uint8, chunk {args.chunk_images}, batch "
        f"{args.batch_size}, threads {args.threads}, device {args.device}; N = {n} images ({mb:.1f} MiB of tiles)"
    )
    print(f"floor (imports + model + metadata, no embedding): {floor:8.1f} MiB peak RSS")
    print(f"embed_plate on N  = {n:6d} images           : {p_small:8.1f} MiB peak RSS")
    print(f"embed_plate on 4N = {4 * n:6d} images           : {p_large:8.1f} MiB peak RSS")
    print(
        f"growth N -> 4N                                  : {100 * (p_large - p_small) / p_small:8.1f} %  (goal <= 10%)"
    )
    print(
        f"growth of the part above the floor              : "
        f"{100 * ((p_large - floor) / (p_small - floor) - 1):8.1f} %  ({p_small - floor:.1f} -> {p_large - floor:.1f} MiB)"
    )
    print(f"tiles of the 4N plate, for scale                : {4 * mb:8.1f} MiB")


if __name__ == "__main__":
    main()
