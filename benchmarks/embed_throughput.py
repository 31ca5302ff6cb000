"""Throughput of streaming plate embedding vs the bare model on in-memory crops.

One plate store of N images is written to a temporary folder; the same timm ViT, batch size
and torch threads embed it (a) through phenoica.embed.embed_plate (Zarr chunks ->
prefetch + preprocessing -> model -> parquet parts -> final parquet) and (b) as the baseline,
the bare forward pass over the already preprocessed crops held in memory (no IO, no
preprocessing). Prints images/s of both and the ratio (goal >= 0.9).

    python benchmarks/embed_throughput.py                 # ~1 minute on 2 CPU cores
    python benchmarks/embed_throughput.py --images 4096 --threads 4 --device auto
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from timm.models.vision_transformer import VisionTransformer

from phenoica.contract import validate_config, write_plate
from phenoica.embed import EmbedOptions, PlateModel, embed_plate
from phenoica.models import embed_crops, resolve_device
from phenoica.screen import prepare


def embed_options(**embed) -> EmbedOptions:
    """The embedding job's options of these ``embed`` keys, the rest at the schema's defaults (the
    model entry too: ``embed_plate`` reads the ``embed`` keys only)."""
    return EmbedOptions.from_config(validate_config({"models": {"bench": {}}, "embed": embed}), model="bench")


def small_vit(in_chans: int, seed: int) -> VisionTransformer:
    """A small ViT: img 32, patch 8, dim 96, depth 4, heads 4, random weights (not the demo's encoder,
    which is config.yaml's default_models)."""
    torch.manual_seed(seed)
    return VisionTransformer(
        img_size=32, patch_size=8, in_chans=in_chans, embed_dim=96, depth=4, num_heads=4, num_classes=0
    ).eval()


def plate_metadata(n: int, plate: str) -> pd.DataFrame:
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--channels", type=int, default=5)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--crop", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--chunk-images", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=2, help="best of this many runs of each")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    model = small_vit(args.channels, args.seed).to(device)
    rng = np.random.default_rng(args.seed)
    tiles = rng.integers(0, 256, (args.images, args.channels, args.size, args.size), dtype=np.uint8)
    log = logging.getLogger("embed_throughput")
    log.addHandler(logging.NullHandler())
    log.propagate = False

    with tempfile.TemporaryDirectory() as tmp:
        store = write_plate(
            Path(tmp) / "P01.zarr", tiles, [f"ch{i}" for i in range(args.channels)], chunk_images=args.chunk_images
        )
        meta = plate_metadata(args.images, "P01")
        crops = prepare(tiles, args.crop)
        embed_crops(model, crops[:4], args.batch_size, device)  # warm-up

        def bare() -> tuple[float, float]:
            t0, c0 = time.perf_counter(), time.process_time()
            embed_crops(model, crops, args.batch_size, device)
            if device.type == "cuda":
                torch.cuda.synchronize()
            return time.perf_counter() - t0, time.process_time() - c0

        def streamed() -> tuple[float, float]:
            t0, c0 = time.perf_counter(), time.process_time()
            embed_plate(
                store,
                meta,
                PlateModel(model, identity={"benchmark": 1}),
                Path(tmp) / "P01.parquet",
                embed_options(
                    crop_size=args.crop,
                    batch_size=args.batch_size,
                    chunk_images=args.chunk_images,
                    device=args.device,
                    threads=args.threads,
                ),
                log=log,
            )
            return time.perf_counter() - t0, time.process_time() - c0

        t_bare, t_stream, c_bare, c_stream = [], [], [], []
        for _ in range(args.repeats):  # interleaved, so drift in machine load hits both alike
            for fn, wall, cpu in ((bare, t_bare, c_bare), (streamed, t_stream, c_stream)):
                w, c = fn()
                wall.append(w)
                cpu.append(c)

    n, k = crops.shape[:2]
    r_bare, r_stream = args.images / min(t_bare), args.images / min(t_stream)
    print(
        f"setup: {args.images} images x {args.channels} ch x {args.size}x{args.size} uint8, {k} crops of "
        f"{args.crop} per image, ViT dim 96 depth 4, batch {args.batch_size}, chunk {args.chunk_images}, "
        f"threads {args.threads}, device {device}"
    )
    print(f"baseline  bare forward on in-memory crops : {r_bare:8.1f} images/s  ({min(t_bare):.2f} s)")
    print(f"streamed  embed_plate (Zarr -> parquet)    : {r_stream:8.1f} images/s  ({min(t_stream):.2f} s)")
    print(f"ratio streamed / baseline                  : {r_stream / r_bare:8.3f}  (goal >= 0.9)")
    print(
        f"CPU ms per image (all threads): baseline {1e3 * min(c_bare) / args.images:.2f}, streamed "
        f"{1e3 * min(c_stream) / args.images:.2f} (the streamed extra is reading + preprocessing + parquet; "
        "hidden by the prefetch thread only when a core is free)"
    )


if __name__ == "__main__":
    main()
