"""Streaming embed vs bare forward, and peak RSS N vs 4N, for the OpenPhenom-size encoder (CPU).

The encoder is the published OpenPhenom layout at its published size (ViT-S/16, 256 px,
ParallelScalingBlock, 6 channels = 1 + 6 x 256 = 1,537 tokens per crop) with seeded random
weights: throughput does not depend on the weights. In one run:

1. throughput: the same FeatureExtractor, batch size and torch threads embed a plate of N
   256 px images (a) through ``phenoica.embed.embed_plate`` (Zarr chunks -> read-ahead
   thread + crop-wise instance norm -> model -> parquet parts -> final parquet) and (b), the
   baseline, as the bare forward over the already preprocessed crops held in memory
   (``embed_crops``); interleaved, best of ``--repeats``; prints images/s and the ratio (goal >= 0.9);
2. memory: ``embed_plate`` on plates of M and 4M images, each in a fresh subprocess, and a
   third subprocess doing everything but embedding (the floor); prints peak RSS (goal: flat).

    python benchmarks/embed_foundation.py                       # ~6 minutes on 2 CPU cores
    python benchmarks/embed_foundation.py --images 16 --rss-images 8 --threads 2
"""

from __future__ import annotations

import argparse
import logging
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import torch

from phenoica.contract import validate_config, write_plate
from phenoica.embed import EmbedOptions, PlateModel, embed_plate
from phenoica.models import (
    NORMALIZE,
    FeatureExtractor,
    OpenPhenomGeometry,
    build_openphenom,
    embed_crops,
    resolve_device,
)
from phenoica.screen import prepare

CHANNELS = ["DNA", "ER", "RNA", "AGP", "Mito", "BF"]


def embed_options(**embed) -> EmbedOptions:
    """The embedding job's options of these ``embed`` keys, the rest at the schema's defaults (the
    model entry too: ``embed_plate`` reads the ``embed`` keys only)."""
    return EmbedOptions.from_config(validate_config({"models": {"bench": {}}, "embed": embed}), model="bench")


def openphenom_extractor(seed: int = 0) -> FeatureExtractor:
    """The published size of the layout with seeded random weights, as the embed rule wraps it."""
    return FeatureExtractor(
        build_openphenom(OpenPhenomGeometry(), seed=seed), normalize=NORMALIZE, architecture="openphenom"
    ).eval()


def plate_metadata(n: int, plate: str = "P01") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "Metadata_Batch": "B01",
            "Metadata_Plate": plate,
            "Metadata_Well": [f"W{i:05d}" for i in range(n)],
            "Metadata_Site": 1,
            "Metadata_Gene": "NTC",
            "Metadata_Guide": "NTC_1",
            "Metadata_PertType": "control",
            "Metadata_ImageIndex": np.arange(n),
        }
    )


def write_store(path: Path, n: int, args: argparse.Namespace) -> Path:
    """A plate of n random uint8 images, written block by block."""
    rng = np.random.default_rng(args.seed)
    shape = (n, args.channels, args.size, args.size)
    blocks = (rng.integers(0, 256, (min(64, n - i), *shape[1:]), dtype=np.uint8) for i in range(0, n, 64))
    return write_plate(
        path, blocks, CHANNELS[: args.channels], shape=shape, dtype="uint8", chunk_images=args.chunk_images
    )


def quiet_log() -> logging.Logger:
    log = logging.getLogger("embed_foundation")
    log.propagate = False
    log.addHandler(logging.NullHandler())
    return log


def run_embed(store: Path, n: int, model: FeatureExtractor, out: Path, args: argparse.Namespace) -> None:
    embed_plate(
        store,
        plate_metadata(n),
        PlateModel(model, identity={"benchmark": "openphenom-random"}, normalize=model.normalize),
        out,
        embed_options(
            crop_size=256,
            batch_size=args.batch_size,
            chunk_images=args.chunk_images,
            device=args.device,
            threads=args.threads,
        ),
        log=quiet_log(),
    )


def child(store: str, n: int, args: argparse.Namespace, embed: bool) -> None:
    """Runs in a subprocess: embed one store (or only set up); print the process's peak RSS and
    the peak RSS sampled (every 5 ms) while embedding, and the RSS before it, in MiB.

    torch's import alone leaves a high-water mark above 1 GiB, which would hide the embedding's
    own memory in the process peak; the sampled peak above the pre-embedding RSS shows it."""
    torch.set_num_threads(args.threads)
    model = openphenom_extractor(args.seed)
    proc = psutil.Process()
    before = sampled = proc.memory_info().rss
    if embed:
        stop = threading.Event()

        def sample() -> None:
            nonlocal sampled
            while not stop.wait(0.005):
                sampled = max(sampled, proc.memory_info().rss)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        run_embed(Path(store), n, model, Path(store).with_suffix(".parquet"), args)
        stop.set()
        sampler.join()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB -> MiB
    print(f"{peak} {sampled / 2**20} {before / 2**20}")


def peak_mib(store: Path, n: int, embed: bool = True) -> tuple[float, float, float]:
    """(process peak RSS, sampled peak while embedding, RSS before embedding) of one child, MiB."""
    cmd = [sys.executable, __file__, *sys.argv[1:], "--child", str(store), str(n), "1" if embed else "0"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    peak, sampled, before = (float(v) for v in out.stdout.strip().splitlines()[-1].split())
    return peak, sampled, before


def throughput(args: argparse.Namespace, tmp: Path) -> None:
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    model = openphenom_extractor(args.seed).to(device)
    store = write_store(tmp / "tp" / "P01.zarr", args.images, args)
    tiles = np.asarray(__import__("zarr").open_group(str(store), mode="r")["tiles"][:])
    crops = prepare(tiles, 256, normalize=NORMALIZE)
    tokens = 1 + args.channels * (256 // 16) ** 2
    embed_crops(model, crops[:1], args.batch_size, device)  # warm-up

    def bare() -> float:
        t0 = time.perf_counter()
        embed_crops(model, crops, args.batch_size, device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    def streamed() -> float:
        t0 = time.perf_counter()
        run_embed(store, args.images, model, tmp / "tp" / "P01.parquet", args)
        return time.perf_counter() - t0

    t_bare, t_stream = [], []
    for _ in range(args.repeats):  # interleaved, so drift in machine load hits both alike
        t_bare.append(bare())
        t_stream.append(streamed())
    r_bare, r_stream = args.images / min(t_bare), args.images / min(t_stream)
    print(
        f"setup: OpenPhenom layout ViT-S/16 (12 blocks, D 384, ParallelScalingBlock), {args.channels} channels x "
        f"256 px = {tokens} tokens per crop, random weights; {args.images} uint8 images, batch {args.batch_size}, "
        f"chunk {args.chunk_images}, torch threads {args.threads}, device {device}"
    )
    print(
        f"baseline  bare forward on in-memory crops : {r_bare:8.3f} images/s  ({min(t_bare):.1f} s; all: "
        f"{', '.join(f'{t:.1f}' for t in t_bare)})"
    )
    print(
        f"streamed  embed_plate (Zarr -> parquet)    : {r_stream:8.3f} images/s  ({min(t_stream):.1f} s; all: "
        f"{', '.join(f'{t:.1f}' for t in t_stream)})"
    )
    print(f"ratio streamed / baseline                  : {r_stream / r_bare:8.3f}  (goal >= 0.9)")


def memory(args: argparse.Namespace, tmp: Path) -> None:
    n = args.rss_images
    small = write_store(tmp / "small" / "P01.zarr", n, args)
    large = write_store(tmp / "large" / "P01.zarr", 4 * n, args)
    floor = peak_mib(small, n, embed=False)[0]
    (p_small, s_small, b_small), (p_large, s_large, b_large) = peak_mib(small, n), peak_mib(large, 4 * n)
    mib = args.channels * args.size * args.size * n / 2**20
    print(
        f"memory: N = {n} images ({mib:.1f} MiB of tiles), 4N = {4 * n}; chunk {args.chunk_images}, "
        f"batch {args.batch_size}, each in a fresh process"
    )
    print(f"floor (imports + model, no embedding)      : {floor:8.1f} MiB process peak RSS")
    print(
        f"embed_plate on N  = {n:5d} images       : {p_small:8.1f} MiB process peak RSS; while embedding "
        f"{s_small:8.1f} MiB ({s_small - b_small:+.1f} over the {b_small:.1f} before)"
    )
    print(
        f"embed_plate on 4N = {4 * n:5d} images       : {p_large:8.1f} MiB process peak RSS; while embedding "
        f"{s_large:8.1f} MiB ({s_large - b_large:+.1f} over the {b_large:.1f} before)"
    )
    print(
        f"growth N -> 4N: process peak {100 * (p_large - p_small) / p_small:+.1f} %, peak while embedding "
        f"{100 * (s_large - s_small) / s_small:+.1f} %  (goal: flat)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=8, help="images of the throughput plate")
    ap.add_argument("--rss-images", type=int, default=4, help="N of the memory measurement (the large plate has 4N)")
    ap.add_argument("--channels", type=int, default=6)
    ap.add_argument("--size", type=int, default=256, help="image side (256 = one crop per image)")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--chunk-images", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=2, help="best of this many runs of each")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--child", nargs=3, metavar=("STORE", "N", "EMBED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args, args.child[2] == "1")
        return
    with tempfile.TemporaryDirectory() as tmp:
        throughput(args, Path(tmp))
        if not args.skip_memory:
            memory(args, Path(tmp))


if __name__ == "__main__":
    main()
