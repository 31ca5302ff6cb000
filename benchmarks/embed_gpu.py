"""GPU throughput of the OpenPhenom-size encoder: bf16 forward sweep, TFLOP/s vs peak, embed path.

Prepared for one short run on a GPU machine (about 3-6 minutes; nothing is downloaded):

    python benchmarks/embed_gpu.py --json $OUT/embed_gpu.json            # eager sweep + embed path
    python benchmarks/embed_gpu.py --compile --json $OUT/embed_gpu.json  # + torch.compile sweep
    python benchmarks/embed_gpu.py --compile --compile-options '{"triton.coalesce_tiling_analysis": false}' \
        --compile-options '{"triton.coalesce_tiling_analysis": false, "triton.cudagraphs": true}'  # two variants

1. Forward sweep: the published OpenPhenom layout (ViT-S/16, 256 px, 6 channels = 1,537
   tokens; random weights unless ``--checkpoint``) on in-memory normalized crops, under the
   embedding stage's own context (``phenoica.embed.inference_context``: inference mode + bf16
   autocast on CUDA), for each batch size: images/s, achieved TFLOP/s (FLOPs of one crop counted
   by ``torch.utils.flop_counter`` x images/s) against the device's dense bf16 peak, and peak GPU
   memory. With ``--compile`` the same sweep for ``torch.compile(model)`` (compilation excluded).
2. Embed path: ``phenoica.embed.embed_plate`` on a plate store of ``--images`` uint8 images at
   the fastest batch size (raw tiles shipped to the GPU and normalized there; ``--loader-threads``
   reading ahead), against the bare forward at that batch size: the goal is >= 0.9, with >= 40%
   of bf16 peak in the forward on an H100-class GPU.

``--tiny --device cpu`` runs the whole script on a CPU with a small encoder (a check that it works,
not a measurement).
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch.utils.flop_counter import FlopCounterMode

from phenoica.embed import TIMING_KEY, embed_plate, inference_context
from phenoica.models.device import resolve_device
from phenoica.models.features import FeatureExtractor, build_feature_extractor
from phenoica.models.openphenom import NORMALIZE, OpenPhenomGeometry, build_openphenom
from phenoica.screen import write_plate

TINY = OpenPhenomGeometry(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, mlp_ratio=4.0, max_in_chans=11)

# Dense (no sparsity) bf16 tensor-core peaks from the vendors' data sheets, TFLOP/s; the first
# name fragment found in torch.cuda.get_device_name() wins. --peak-tflops overrides.
BF16_PEAK_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),
    ("H200", 989.0),
    ("GH200", 989.0),
    ("B200", 2250.0),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("L4", 121.0),
    ("A10", 125.0),
)


def bf16_peak(device: torch.device, override: float | None) -> float | None:
    if override:
        return override
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((tflops for fragment, tflops in BF16_PEAK_TFLOPS if fragment in name), None)


def model_for(args: argparse.Namespace) -> FeatureExtractor:
    if args.checkpoint:
        spec = {"architecture": "openphenom", "pool": "mean", "block": None, "per_channel": False}
        return build_feature_extractor(spec, args.channels, args.checkpoint)
    geometry = TINY if args.tiny else OpenPhenomGeometry()
    return FeatureExtractor(
        build_openphenom(geometry, seed=args.seed), normalize=NORMALIZE, architecture="openphenom"
    ).eval()


def flops_per_crop(model: torch.nn.Module, shape: tuple[int, ...], device: torch.device) -> int:
    """FLOPs of one crop's forward (matmuls, convolutions, attention), counted by torch."""
    counter = FlopCounterMode(display=False)
    with inference_context(device), counter:
        model(torch.zeros(1, *shape, device=device))
    return int(counter.get_total_flops())


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_forward(
    runner: torch.nn.Module, batch: int, shape: tuple[int, ...], device: torch.device, iters: int, warmup: int
) -> dict:
    """images/s and peak memory of ``iters`` forwards of one batch (after ``warmup`` untimed ones)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    try:
        x = torch.randn(batch, *shape, device=device)
        with inference_context(device):
            for _ in range(warmup):
                runner(x)
            sync(device)
            t0 = time.perf_counter()
            for _ in range(iters):
                runner(x)
            sync(device)
            seconds = time.perf_counter() - t0
    except torch.cuda.OutOfMemoryError:
        return {"batch": batch, "oom": True}
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
    return {"batch": batch, "oom": False, "images_per_s": batch * iters / seconds, "peak_gib": peak}


def sweep(
    runner: torch.nn.Module,
    label: str,
    args: argparse.Namespace,
    shape: tuple[int, ...],
    device: torch.device,
    flops: int,
    peak: float | None,
    batches: list[int],
) -> list[dict]:
    rows = []
    print(f"\n{label}: batch, images/s, TFLOP/s, % of bf16 peak, peak GPU memory")
    for batch in batches:
        row = time_forward(runner, batch, shape, device, args.iters, args.warmup)
        row["mode"] = label
        if row["oom"]:
            print(f"  {batch:5d}  out of memory")
        else:
            row["tflops"] = flops * row["images_per_s"] / 1e12
            row["pct_peak"] = 100 * row["tflops"] / peak if peak else None
            pct = f"{row['pct_peak']:6.1f} %" if peak else "   n/a  "
            print(f"  {batch:5d}  {row['images_per_s']:10.1f}  {row['tflops']:8.2f}  {pct}  {row['peak_gib']:7.2f} GiB")
        rows.append(row)
    return rows


def embed_path(
    runner: torch.nn.Module,
    model: FeatureExtractor,
    batch: int,
    bare_rate: float,
    args: argparse.Namespace,
    device: torch.device,
    tmp: Path,
) -> dict:
    """embed_plate over a plate of --images uint8 images vs the bare forward's images/s."""
    size = model.img_size
    chunk = max(batch, (args.chunk_images // batch) * batch)  # whole batches only: one compiled shape
    n = max(chunk, (args.images // chunk) * chunk)
    rng = np.random.default_rng(args.seed)
    shape = (n, args.channels, size, size)
    blocks = (rng.integers(0, 256, (min(chunk, n - i), *shape[1:]), dtype=np.uint8) for i in range(0, n, chunk))
    t0 = time.perf_counter()
    store = write_plate(
        tmp / "P01.zarr",
        blocks,
        [f"ch{i}" for i in range(args.channels)],
        shape=shape,
        dtype="uint8",
        chunk_images=chunk,
    )
    write_s = time.perf_counter() - t0
    meta = pd.DataFrame(
        {
            "Metadata_Batch": "B01",
            "Metadata_Plate": "P01",
            "Metadata_Well": [f"W{i:06d}" for i in range(n)],
            "Metadata_Site": 1,
            "Metadata_Gene": "NTC",
            "Metadata_Guide": "NTC_1",
            "Metadata_PertType": "control",
            "Metadata_ImageIndex": np.arange(n),
        }
    )
    log = logging.getLogger("embed_gpu")
    log.propagate = False
    timings = TimingRecorder()
    log.addHandler(timings)
    log.setLevel(logging.INFO)
    runs = []
    for _ in range(args.embed_repeats):
        sync(device)
        t0 = time.perf_counter()
        embed_plate(
            store,
            meta,
            runner,
            tmp / "P01.parquet",
            crop_size=size,
            batch_size=batch,
            chunk_images=chunk,
            device=str(device),
            log=log,
            identity={"benchmark": "embed_gpu"},
            normalize=model.normalize,
            loader_threads=args.loader_threads,
        )
        sync(device)
        runs.append(time.perf_counter() - t0)
    rate = n / min(runs)
    print(
        f"\nembed path: {n} images ({n * args.channels * size * size / 2**30:.2f} GiB uint8, written in "
        f"{write_s:.1f} s), batch {batch}, chunk {chunk}, loader threads {args.loader_threads}"
    )
    print(
        f"  embed_plate (Zarr -> {device.type} preprocessing -> parquet): {rate:10.1f} images/s (runs {', '.join(f'{t:.1f}' for t in runs)} s)"
    )
    print(f"  bare forward at batch {batch:<5d}: {bare_rate:10.1f} images/s")
    print(f"  ratio embed path / bare forward: {rate / bare_rate:10.3f}  (goal >= 0.9)")
    best = timings.records[int(np.argmin(runs))] if len(timings.records) == len(runs) else None
    if best is not None:
        print(
            f"  where the fastest run's chunk loop went: model (H2D, prepare, forward, D2H) {best['model_s']:.2f} s, "
            f"waiting for data {best['waiting_for_data_s']:.2f} s, waiting for writes {best['waiting_for_writes_s']:.2f} s, "
            f"loop {best['wall_s']:.2f} s of {min(runs):.2f} s (the rest: opening the store, probing, assembling)"
        )
    return {
        "images": n,
        "batch": batch,
        "chunk": chunk,
        "loader_threads": args.loader_threads,
        "images_per_s": rate,
        "bare_images_per_s": bare_rate,
        "ratio": rate / bare_rate,
        "seconds": runs,
        "chunk_loop": timings.records,
    }


class TimingRecorder(logging.Handler):
    """Keeps the chunk loop's timing of every embed_plate run (``phenoica.embed.TIMING_KEY``)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        timing = getattr(record, TIMING_KEY, None)
        if timing is not None:
            self.records.append(timing)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch-sizes", default="32,64,128,256,512")
    ap.add_argument("--compile", action="store_true", help="also sweep torch.compile(model)")
    ap.add_argument(
        "--compile-options",
        action="append",
        default=None,
        metavar="JSON",
        help="with --compile: torch.compile options (inductor settings by name, as embed.compile_options), "
        "one compiled variant per use, e.g. '{\"triton.coalesce_tiling_analysis\": false}' (torch 2.11's "
        "tiling analysis failed on this model) or add '\"triton.cudagraphs\": true'; default one variant, no options",
    )
    ap.add_argument("--compile-batch-sizes", default="256,512", help="each size is one compilation (~1 min)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--channels", type=int, default=6)
    ap.add_argument("--images", type=int, default=8192, help="images of the embed-path plate; 0 = skip it")
    ap.add_argument("--chunk-images", type=int, default=512)
    ap.add_argument("--loader-threads", type=int, default=4)
    ap.add_argument("--embed-repeats", type=int, default=2)
    ap.add_argument("--checkpoint", default=None, help="real OpenPhenom-layout weights (optional)")
    ap.add_argument("--peak-tflops", type=float, default=None, help="dense bf16 peak, if the table lacks the device")
    ap.add_argument("--tiny", action="store_true", help="small encoder: check the script on a CPU")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()

    device = resolve_device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    model = model_for(args).to(device)
    size = model.img_size
    shape = (args.channels, size, size)
    flops = flops_per_crop(model, shape, device)
    peak = bf16_peak(device, args.peak_tflops)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    tokens = 1 + args.channels * (size // model.encoder.patch_embed.patch_size[0]) ** 2
    print(
        f"device: {name}; dense bf16 peak {f'{peak:.0f} TFLOP/s' if peak else 'unknown (pass --peak-tflops)'}; "
        f"torch {torch.__version__}"
    )
    print(
        f"model: OpenPhenom layout, D {model.embed_dim}, {len(model.encoder.blocks)} blocks, {args.channels} channels "
        f"x {size} px = {tokens} tokens; {flops / 1e9:.1f} GFLOP per crop"
    )

    precision = "bf16 autocast" if device.type == "cuda" else "float32"  # the embedding stage's policy
    eager, compiled_label = f"eager {precision}", f"compiled {precision}"
    rows = sweep(model, eager, args, shape, device, flops, peak, [int(b) for b in args.batch_sizes.split(",")])
    runners = {eager: model}
    if args.compile:
        for options in [json.loads(text) for text in args.compile_options or ["{}"]]:
            label = f"{compiled_label} {json.dumps(options)}" if options else compiled_label
            try:
                compiled = torch.compile(model, dynamic=False, options=options or None)  # one shape per batch size
                rows += sweep(
                    compiled,
                    label,
                    args,
                    shape,
                    device,
                    flops,
                    peak,
                    [int(b) for b in args.compile_batch_sizes.split(",")],
                )
            except Exception as exc:  # a compiler crash ends this variant, not the run
                first = (str(exc).strip().splitlines() or [""])[0][:300]
                print(f"  compilation failed: {type(exc).__name__}: {first}")
                rows.append({"mode": label, "error": f"{type(exc).__name__}: {first}", "oom": False})
                continue
            runners[label] = compiled
    ok = [r for r in rows if "images_per_s" in r and not r["oom"]]
    best = max(ok, key=lambda r: r["images_per_s"])
    pct = f", {best['pct_peak']:.1f} % of peak" if best.get("pct_peak") else ""
    print(
        f"\nbest forward: {best['mode']} batch {best['batch']}: {best['images_per_s']:.1f} images/s, "
        f"{best['tflops']:.2f} TFLOP/s{pct} (goal >= 40 % on an H100-class GPU)"
    )
    result = {
        "device": name,
        "torch": torch.__version__,
        "bf16_peak_tflops": peak,
        "flops_per_crop": flops,
        "tokens": tokens,
        "sweep": rows,
        "best": best,
    }
    if args.images:
        with tempfile.TemporaryDirectory() as tmp:
            result["embed_path"] = embed_path(
                runners[best["mode"]], model, best["batch"], best["images_per_s"], args, device, Path(tmp)
            )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
