"""GPU throughput of the OpenPhenom-size encoder and the embedding stage's fixed costs, in one run.

Prepared for one call on an H100/H200-class GPU machine (about 5-7 minutes; nothing is downloaded):

    python benchmarks/embed_gpu.py --compile --json $OUT/embed_gpu.json

1. SDPA: which fused attention backend ``scaled_dot_product_attention`` picks for the model's
   attention shape (bf16), and the time of each backend forced (flash, cuDNN, efficient, math).
2. Forward sweep: the published OpenPhenom layout (ViT-S/16, 256 px, 6 channels = 1,537 tokens;
   random weights unless ``--checkpoint``) on in-memory normalized crops, under the embedding
   stage's own context (inference mode + bf16 autocast on CUDA), per batch size: images/s,
   TFLOP/s (FLOPs of one crop counted by ``torch.utils.flop_counter``) against the device's dense
   bf16 peak, peak GPU memory; eager, eager with the fastest forced SDPA backend, and with
   ``--compile`` ``torch.compile`` (each ``--compile-options`` variant; compilation excluded and
   timed apart as the first call; when the default compilation fails, inductor's coalescing
   analysis switched off; when SDPA's fastest backend is not the one it picks, also compiled with
   it forced). ``--profile``: the best forward's kernel time by kind (matrix products, attention,
   inductor's Triton kernels) with each kind's TFLOP/s.
3. Embed path: ``phenoica.embed.embed_plate`` on a ``--images`` (16,384) uint8 image plate at the
   fastest batch size vs the bare forward there (goal >= 0.9), with the chunk loop's per-phase split
   and the time outside it; once per ``--loader-threads`` count (4 and 8).
4. Jobs: ``phenoica.embed.embed_model_plates`` in fresh processes, as the workflow's jobs run
   (the model loaded from a checkpoint file; with --compile compiled, caches in
   ``embed.compile_cache``): one plate with a cold cache, the same with the warm cache, a second
   plate, and both plates in one job. A job's fixed cost is its wall time minus its plates' images
   at the embed path's steady rate (3.); its share of a ``--images`` plate's job is reported, and
   where it went: imports, outside the chunk loops (model, compile setup, work keys, assembly),
   the first loop's model launches (with the compilation) and the interpreter's exit.
5. ``tests/test_gpu.py`` (the GPU paths against the CPU reference), its result recorded.

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

from phenoica.contract import open_plate, validate_config, write_plate
from phenoica.embed import TIMING_KEY, EmbedOptions, EmbedTiming, PlateModel, embed_plate
from phenoica.models import (
    NORMALIZE,
    FeatureExtractor,
    OpenPhenomGeometry,
    build_feature_extractor,
    build_openphenom,
    inference_context,
    module_inputs,
    resolve_device,
)

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


def embed_options(checkpoint: Path | str | None, **embed) -> EmbedOptions:
    """The embedding job's options of these ``embed`` keys, for an OpenPhenom-layout model of
    ``checkpoint`` (None: the schema's model entry; ``embed_plate`` reads the ``embed`` keys only)."""
    entry = {"architecture": "openphenom", "checkpoint": str(checkpoint)} if checkpoint else {}
    return EmbedOptions.from_config(validate_config({"models": {"bench": entry}, "embed": embed}), model="bench")


def model_for(args: argparse.Namespace) -> FeatureExtractor:
    if args.checkpoint:
        options = embed_options(args.checkpoint)
        return build_feature_extractor(options.spec, args.channels, args.checkpoint)
    geometry = TINY if args.tiny else OpenPhenomGeometry()
    return FeatureExtractor(
        build_openphenom(geometry, seed=args.seed), normalize=NORMALIZE, architecture="openphenom"
    ).eval()


def flops_per_crop(model: torch.nn.Module, shape: tuple[int, ...], device: torch.device) -> tuple[int, dict]:
    """FLOPs of one crop's forward (matmuls, convolutions, attention), counted by torch; and
    their split by kind (:func:`op_kind`)."""
    counter = FlopCounterMode(display=False)
    with inference_context(device), counter:
        model(torch.zeros(1, *shape, device=device))
    kinds: dict[str, int] = {}
    for op, count in counter.get_flop_counts().get("Global", {}).items():
        kinds[op_kind(str(op))] = kinds.get(op_kind(str(op)), 0) + int(count)
    return int(counter.get_total_flops()), kinds


def op_kind(name: str) -> str:
    """The kind of a kernel or operator, by its name: attention, matmul (matrix products and
    convolutions), triton (inductor's generated kernels: fused elementwise and reductions), copy
    or other."""
    low = name.lower()
    if any(k in low for k in ("attention", "fmha", "flash", "sdpa", "attn")):
        return "attention"
    if low.startswith("triton"):
        return "triton"
    if any(k in low for k in ("gemm", "nvjet", "xmma", "cutlass", "matmul", "conv", "aten.mm", "aten::mm", "addmm")):
        return "matmul"
    if any(k in low for k in ("aten.bmm", "aten::bmm", "aten::linear", "wgmma")):
        return "matmul"
    if any(k in low for k in ("memcpy", "memset", "copy")):
        return "copy"
    return "other"


def kernel_split(
    runner: torch.nn.Module, batch: int, shape: tuple[int, ...], device: torch.device, flop_kinds: dict, iters: int = 3
) -> dict:
    """Where ``iters`` forwards of one batch spend their kernel time (torch.profiler; on the CPU,
    operator self time): seconds and share by kind (:func:`op_kind`), the TFLOP/s of each kind
    that does FLOPs (``flop_kinds``: FLOPs per crop by kind), and the longest kernels."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    x = torch.randn(batch, *shape, device=device)
    with inference_context(device):
        runner(x)
        sync(device)
        with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
            for _ in range(iters):
                runner(x)
            sync(device)
    seconds: dict[str, float] = {}
    kernels = []
    for event in prof.key_averages():
        us = event.self_device_time_total if cuda else event.self_cpu_time_total
        if us > 0:
            kind = op_kind(event.key)
            seconds[kind] = seconds.get(kind, 0.0) + us / 1e6
            kernels.append((us / 1e6, kind, event.key[:100]))
    total = sum(seconds.values()) or float("nan")
    print(f"\nkernel time of {iters} forwards at batch {batch} ({'CUDA kernels' if cuda else 'CPU operators'}):")
    split = {}
    for kind, sec in sorted(seconds.items(), key=lambda kv: -kv[1]):
        work = flop_kinds.get(kind, 0) * batch * iters
        tflops = work / sec / 1e12 if work else None
        split[kind] = {"s": sec, "share": sec / total, "tflops": tflops}
        rate = f", {tflops:6.1f} TFLOP/s" if tflops else ""
        print(f"  {kind:10s} {sec * 1e3:9.1f} ms  {100 * sec / total:5.1f} %{rate}")
    top = sorted(kernels, reverse=True)[:10]
    for sec, kind, key in top:
        print(f"    {sec * 1e3:8.1f} ms  {kind:9s} {key}")
    return {"batch": batch, "iters": iters, "total_s": total, "kinds": split, "top": top}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_forward(
    runner: torch.nn.Module, batch: int, shape: tuple[int, ...], device: torch.device, iters: int, warmup: int
) -> dict:
    """images/s and peak memory of ``iters`` forwards of one batch (after ``warmup`` untimed ones;
    the first of those is timed apart as ``first_call_s``: compiled, it holds the compilation)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    try:
        x = torch.randn(batch, *shape, device=device)
        with inference_context(device):
            t_first = time.perf_counter()
            runner(x)  # compiled: the compilation for this shape
            sync(device)
            first = time.perf_counter() - t_first
            for _ in range(warmup - 1):
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
    rate = batch * iters / seconds
    return {"batch": batch, "oom": False, "images_per_s": rate, "peak_gib": peak, "first_call_s": first}


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
            print(
                f"  {batch:5d}  {row['images_per_s']:10.1f}  {row['tflops']:8.2f}  {pct}  {row['peak_gib']:7.2f} GiB"
                f"  (first call {row['first_call_s']:.1f} s)"
            )
        rows.append(row)
    return rows


def plate_metadata(n: int, plate: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "Metadata_Batch": "B01",
            "Metadata_Plate": plate,
            "Metadata_Well": [f"W{i:06d}" for i in range(n)],
            "Metadata_Site": 1,
            "Metadata_Gene": "NTC",
            "Metadata_Guide": "NTC_1",
            "Metadata_PertType": "control",
            "Metadata_ImageIndex": np.arange(n),
        }
    )


def write_store(path: Path, n: int, chunk: int, channels: int, size: int, seed: int) -> tuple[Path, float]:
    """A uint8 plate store of ``n`` images (chunks of ``chunk``); returns it and the seconds taken.
    Blocks repeat one random block (incompressible, as cell images nearly are) to write fast."""
    block = np.random.default_rng(seed).integers(0, 256, (chunk, channels, size, size), dtype=np.uint8)
    t0 = time.perf_counter()
    blocks = (block[: min(chunk, n - i)] for i in range(0, n, chunk))
    names = [f"ch{i}" for i in range(channels)]
    store = write_plate(path, blocks, names, shape=(n, channels, size, size), dtype="uint8", chunk_images=chunk)
    return store, time.perf_counter() - t0


def embed_path(
    runner: torch.nn.Module,
    model: FeatureExtractor,
    batch: int,
    bare_rate: float,
    args: argparse.Namespace,
    device: torch.device,
    store: Path,
    threads: int,
) -> dict:
    """embed_plate over the plate store (``threads`` loader threads) vs the bare forward's
    images/s, with the phase split."""
    n = int(open_plate(store).shape[0])
    log, timings = recording_logger()
    runs = []
    for _ in range(args.embed_repeats):
        sync(device)
        t0 = time.perf_counter()
        embed_plate(
            store,
            plate_metadata(n, "P01"),
            PlateModel(
                runner, inputs=module_inputs(model), identity={"benchmark": "embed_gpu"}, normalize=model.normalize
            ),
            store.with_name("embed_path.parquet"),
            embed_options(
                None,
                crop_size=model.img_size,
                batch_size=batch,
                chunk_images=args.chunk_images,
                device=str(device),
                loader_threads=threads,
            ),
            log=log,
        )
        sync(device)
        runs.append(time.perf_counter() - t0)
    rate = n / min(runs)
    print(f"\nembed path: {n} images, batch {batch}, chunk {args.chunk_images}, loader threads {threads}")
    print(
        f"  embed_plate (Zarr -> {device.type} preprocessing -> parquet): {rate:10.1f} images/s (runs {', '.join(f'{t:.1f}' for t in runs)} s)"
    )
    print(f"  bare forward at batch {batch:<5d}: {bare_rate:10.1f} images/s")
    print(f"  ratio embed path / bare forward: {rate / bare_rate:10.3f}  (goal >= 0.9)")
    best = timings.records[int(np.argmin(runs))] if len(timings.records) == len(runs) else None
    if best is not None:
        print(
            f"  fastest run's chunk loop {best['wall_s']:.2f} s: model {best['model_s']:.2f} s, waiting for data "
            f"{best['waiting_for_data_s']:.2f} s, for results {best['waiting_for_results_s']:.2f} s, for writes "
            f"{best['waiting_for_writes_s']:.2f} s; background: read {best['read_s']:.2f} s, preprocess "
            f"{best['prepare_s']:.2f} s, copy {best['copy_s']:.2f} s, device {best['device_wait_s']:.2f} s, write "
            f"{best['write_s']:.2f} s; left: {EmbedTiming(**best).left}; outside the loop (opening and checking "
            f"the plate, assembling the parquet) {min(runs) - best['wall_s']:.2f} s"
        )
    return {
        "images": n,
        "batch": batch,
        "chunk": args.chunk_images,
        "loader_threads": threads,
        "images_per_s": rate,
        "bare_images_per_s": bare_rate,
        "ratio": rate / bare_rate,
        "seconds": runs,
        "chunk_loop": timings.records,
        "left": EmbedTiming(**best).left if best else None,
        "outside_loop_s": min(runs) - best["wall_s"] if best else None,
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


def recording_logger() -> tuple[logging.Logger, TimingRecorder]:
    log = logging.getLogger("embed_gpu")
    log.propagate = False
    log.handlers = [timings := TimingRecorder()]
    log.setLevel(logging.INFO)
    return log, timings


# ------------------------------------------------------------------ 1. which SDPA backend


SDPA_BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "MATH")


def sdpa_check(model: FeatureExtractor, tokens: int, batch: int, device: torch.device, iters: int) -> dict:
    """The backend SDPA picks for the model's attention (batch, heads, tokens, head dim) under
    the embedding context, and the seconds per call of each backend forced (None = unsupported)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    block = model.encoder.blocks[0]
    heads = getattr(block, "num_heads", None) or block.attn.num_heads
    dim = model.embed_dim // heads
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    q, k, v = (torch.randn(batch, heads, tokens, dim, device=device, dtype=dtype) for _ in range(3))
    try:
        picked = SDPBackend(torch._fused_sdp_choice(q, k, v)).name
    except Exception as exc:  # a private helper: report, do not stop
        picked = f"unknown ({type(exc).__name__})"
    times: dict[str, float | None] = {}
    for name in SDPA_BACKENDS:
        try:
            with sdpa_kernel([getattr(SDPBackend, name)]), torch.inference_mode():
                torch.nn.functional.scaled_dot_product_attention(q, k, v)
                sync(device)
                t0 = time.perf_counter()
                for _ in range(iters):
                    torch.nn.functional.scaled_dot_product_attention(q, k, v)
                sync(device)
            times[name] = (time.perf_counter() - t0) / iters
        except RuntimeError:
            times[name] = None
    print(f"\nSDPA on ({batch}, {heads}, {tokens}, {dim}) {dtype}: picks {picked}")
    for name, sec in times.items():
        print(f"  {name:20s} {'unsupported' if sec is None else f'{1e3 * sec:8.3f} ms'}")
    ok = {n: t for n, t in times.items() if t is not None}
    return {"shape": [batch, heads, tokens, dim], "picked": picked, "seconds": times, "fastest": min(ok, key=ok.get)}


class ForcedSdpa(torch.nn.Module):
    """The model with SDPA restricted to one backend (to sweep it like the default)."""

    def __init__(self, model: torch.nn.Module, backend: str) -> None:
        super().__init__()
        self.model, self.backend = model, backend

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([getattr(SDPBackend, self.backend)]):
            return self.model(x)


# --------------------------------------------------------------- 4. the workflow's jobs


def save_checkpoint(model: FeatureExtractor, path: Path) -> Path:
    """The encoder in the OpenPhenom checkpoint layout (``encoder.vit_backbone.*``), safetensors."""
    from safetensors.torch import save_file

    state = {f"encoder.vit_backbone.{k}": v.detach().cpu().contiguous() for k, v in model.encoder.state_dict().items()}
    save_file(state, str(path))
    return path


def process_started() -> float:
    """When this process started (seconds since the epoch)."""
    import psutil

    return psutil.Process().create_time()


def job_child(spec_json: str) -> None:
    """A job in a fresh process (``--job-child``): embed_model_plates, then its timings as JSON."""
    started = process_started()
    job = json.loads(spec_json)
    from phenoica.embed import EmbedJob, PlateJob, embed_model_plates

    imported = time.time() - started
    log, timings = recording_logger()
    plates = [PlateJob(Path(s), plate_metadata(n, Path(s).stem), Path(o)) for s, n, o in job["plates"]]
    t0 = time.time()
    embed_model_plates(
        plates, EmbedJob("bench", job["checkpoint"], embed_options(job["checkpoint"], **job["embed"])), log=log
    )
    done = time.time()
    print(json.dumps({"imports_s": imported, "embed_s": done - t0, "plate_loops": timings.records, "done_epoch": done}))


def run_job(name: str, plates: list, checkpoint: Path, embed: dict, steady_rate: float, plate_images: int) -> dict:
    """One job in a fresh process; its fixed cost = wall - its images at ``steady_rate``."""
    import subprocess
    import sys

    spec = json.dumps({"plates": plates, "checkpoint": str(checkpoint), "embed": embed})
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--job-child", spec], capture_output=True, text=True, timeout=900, check=False
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(f"  {name}: failed ({proc.stderr.strip().splitlines()[-1:] or ['?']})")
        return {"job": name, "error": proc.stderr[-2000:]}
    ended = time.time()
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    images = sum(n for _, n, _ in plates)
    fixed = max(0.0, wall - images / steady_rate)
    share = fixed / (fixed + plate_images / steady_rate)
    loops = [p["wall_s"] for p in child["plate_loops"]]
    split = {
        "exit_s": ended - child["done_epoch"],  # the interpreter's shutdown after the job's last line
        "outside_loops_s": child["embed_s"] - sum(loops),  # model, compile setup, work keys, assembly
        "first_loop_model_s": child["plate_loops"][0]["model_s"] if loops else None,  # with the compilation
    }
    print(
        f"  {name:28s} {len(plates)} plate(s), {images:6d} images: wall {wall:7.1f} s, imports {child['imports_s']:5.1f} s, "
        f"fixed {fixed:6.1f} s -> {100 * share:5.1f} % of a {plate_images}-image plate's job\n"
        f"  {'':28s} chunk loops {' + '.join(f'{t:.1f}' for t in loops)} s (the first's model launches "
        f"{split['first_loop_model_s'] or 0:.1f} s), outside them {split['outside_loops_s']:.1f} s, "
        f"process exit {split['exit_s']:.1f} s"
    )
    return {"job": name, "plates": len(plates), "images": images, "wall_s": wall, "fixed_s": fixed, **child, **split}


def jobs_section(
    model: FeatureExtractor, args: argparse.Namespace, embed: dict, store: Path, steady_rate: float, tmp: Path
) -> dict:
    """Cold cache, warm cache, a second plate, and both plates in one job (each a fresh process)."""
    checkpoint = save_checkpoint(model, tmp / "encoder.safetensors")
    n = int(open_plate(store).shape[0])
    second = tmp / "P02.zarr"
    second.symlink_to(store.resolve(), target_is_directory=True)  # same tiles, another plate name
    embed = embed | {"compile_cache": str(tmp / "compile_cache")}
    print(f"\njobs (fresh processes; embed settings {json.dumps(embed)}), steady rate {steady_rate:.1f} images/s:")

    def plate(path: Path, out: str) -> list:
        return [str(path), n, str(tmp / f"{out}.parquet")]

    cold = run_job("one plate, cold cache", [plate(store, "cold")], checkpoint, embed, steady_rate, args.images)
    warm = run_job("one plate, warm cache", [plate(store, "warm")], checkpoint, embed, steady_rate, args.images)
    other = run_job("second plate, warm cache", [plate(second, "other")], checkpoint, embed, steady_rate, args.images)
    grouped = run_job(
        "two plates in one job", [plate(store, "g1"), plate(second, "g2")], checkpoint, embed, steady_rate, args.images
    )
    singles = warm.get("wall_s", float("nan")) + other.get("wall_s", float("nan"))
    ratio = grouped.get("wall_s", float("nan")) / singles
    print(
        f"  two plates: one job {grouped.get('wall_s', float('nan')):.1f} s vs two jobs {singles:.1f} s: ratio {ratio:.3f}"
    )
    return {"cold": cold, "warm": warm, "second": other, "grouped": grouped, "grouped_over_two_jobs": ratio}


def gpu_tests() -> dict:
    """tests/test_gpu.py in a subprocess (from the repository root): its exit status and summary."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "pytest", "tests/test_gpu.py", "-q", "-p", "no:cacheprovider"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=600, check=False)
    summary = (proc.stdout.strip().splitlines() or [""])[-1]
    print(f"\ntests/test_gpu.py: {summary} (exit {proc.returncode})")
    return {"returncode": proc.returncode, "summary": summary, "tail": proc.stdout[-3000:]}


def main() -> None:
    args = parse_args()
    if args.job_child:
        job_child(args.job_child)
        return
    device = resolve_device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    model = model_for(args).to(device)
    size = model.img_size
    shape = (args.channels, size, size)
    flops, flop_kinds = flops_per_crop(model, shape, device)
    peak = bf16_peak(device, args.peak_tflops)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    tokens = 1 + args.channels * (size // model.encoder.patch_embed.patch_size[0]) ** 2
    print(
        f"device: {name}; dense bf16 peak {f'{peak:.0f} TFLOP/s' if peak else 'unknown (pass --peak-tflops)'}; "
        f"torch {torch.__version__}\nmodel: OpenPhenom layout, D {model.embed_dim}, {len(model.encoder.blocks)} "
        f"blocks, {args.channels} channels x {size} px = {tokens} tokens; {flops / 1e9:.1f} GFLOP per crop"
        f" ({', '.join(f'{kind} {count / 1e9:.1f}' for kind, count in flop_kinds.items())})"
    )
    batches = [int(b) for b in args.batch_sizes.split(",")]
    result: dict = {"device": name, "torch": torch.__version__, "bf16_peak_tflops": peak, "flops_per_crop": flops}
    result["flops_per_crop_by_kind"] = flop_kinds
    result["tokens"] = tokens
    section: dict[str, float] = {"startup": time.time() - process_started()}  # wall seconds of each part
    result["section_s"] = section
    t_section = time.perf_counter()

    def save(part: str) -> None:
        """Close a part: its seconds; the JSON so far written (a run stopped later keeps it)."""
        nonlocal t_section
        section[part] = time.perf_counter() - t_section
        t_section = time.perf_counter()
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1, default=str))

    result["sdpa"] = sdpa_check(model, tokens, max(batches), device, args.iters)
    precision = "bf16 autocast" if device.type == "cuda" else "float32"  # the embedding stage's policy
    eager = f"eager {precision}"
    rows = sweep(model, eager, args, shape, device, flops, peak, batches)
    result["sweep"] = rows
    runners: dict = {eager: model}
    fastest = result["sdpa"]["fastest"]
    forced = fastest if fastest != result["sdpa"]["picked"] else None
    if forced:
        label = f"eager {precision}, SDPA forced to {forced}"
        runners[label] = ForcedSdpa(model, forced)
        rows += sweep(runners[label], label, args, shape, device, flops, peak, batches)
    save("eager")
    compiled_variants = compile_sweeps(model, args, (shape, device, flops, peak, precision), rows, runners, forced)
    save("compiled")
    ok = [r for r in rows if "images_per_s" in r and not r["oom"]]
    best = max(ok, key=lambda r: r["images_per_s"])
    traced_last = [label for label in runners if label.startswith("compiled")][-1:]
    if best["mode"].startswith("compiled") and forced and [best["mode"]] != traced_last:
        torch._dynamo.reset()  # traced since with SDPA forced: the best variant traces afresh (first embed run)
    pct = f", {best['pct_peak']:.1f} % of peak" if best.get("pct_peak") else ""
    print(
        f"\nbest forward: {best['mode']} batch {best['batch']}: {best['images_per_s']:.1f} images/s, "
        f"{best['tflops']:.2f} TFLOP/s{pct} (goal >= 40 % on an H100-class GPU)"
    )
    result["best"] = best
    if args.profile:
        runner = runners[best["mode"]]
        result["kernels"] = kernel_split(runner, best["batch"], shape, device, flop_kinds)
        save("profile")
    with tempfile.TemporaryDirectory() as tmp:
        store, write_s = write_store(
            Path(tmp) / "P01.zarr", args.images, args.chunk_images, args.channels, size, args.seed
        )
        print(f"\nplate store: {args.images} images written in {write_s:.1f} s")
        paths = [
            embed_path(runners[best["mode"]], model, best["batch"], best["images_per_s"], args, device, store, threads)
            for threads in args.loader_threads
        ]
        result["embed_paths"] = paths
        result["embed_path"] = max(paths, key=lambda path: path["images_per_s"])
        save("embed_path")
        if not args.skip_jobs:
            embed = {"device": str(device), "batch_size": best["batch"], "chunk_images": args.chunk_images}
            embed |= {"loader_threads": result["embed_path"]["loader_threads"]}
            if compiled_variants:
                embed |= {"compile": True, "compile_options": compiled_variants[0]}
            steady = result["embed_path"]["images_per_s"]
            job_store, _ = write_store(
                Path(tmp) / "jobs" / "P01.zarr", args.job_images, args.chunk_images, args.channels, size, args.seed
            )
            result["jobs"] = jobs_section(model, args, embed, job_store, steady, Path(tmp) / "jobs")
            save("jobs")
    if not args.skip_tests:
        result["tests"] = gpu_tests()
        save("tests")
    print("\nseconds: " + ", ".join(f"{part} {sec:.0f}" for part, sec in section.items()))


COALESCE_OFF = {"triton.coalesce_tiling_analysis": False}
"""The inductor setting tried when the default compilation fails: torch 2.11's coalescing/tiling
analysis raised an AssertionError on this model (H200, 2026-11-30)."""


def compile_sweeps(
    model: torch.nn.Module, args: argparse.Namespace, setup: tuple, rows: list, runners: dict, forced: str | None
) -> list[dict]:
    """With --compile: the compiled sweep of each --compile-options variant (a variant that fails
    to compile is reported, and the run goes on; without --compile-options, when the default
    fails, :data:`COALESCE_OFF` is tried); then, when SDPA's fastest backend (``forced``) is not
    the one it picks, the first variant that compiled with SDPA forced to it (compiled afresh
    after ``torch._dynamo.reset()``: the backend is chosen when the graph is traced). Returns the
    options of the variants that compiled (without forcing: what the jobs can use). ``setup``:
    (crop shape, device, FLOPs per crop, bf16 peak, precision label)."""
    if not args.compile:
        return []
    shape, device, flops, peak, precision = setup
    batches = [int(b) for b in args.compile_batch_sizes.split(",")]
    variants = [json.loads(text) for text in args.compile_options or ["{}"]]
    worked = []

    def try_variant(options: dict, backend: str | None = None) -> bool:
        label = f"compiled {precision} {json.dumps(options)}" if options else f"compiled {precision}"
        if backend:
            label += f", SDPA forced to {backend}"
        t0 = time.perf_counter()
        try:
            compiled = torch.compile(model, dynamic=False, options=options or None)  # one shape per batch size
            runner = ForcedSdpa(compiled, backend) if backend else compiled
            rows.extend(sweep(runner, label, args, shape, device, flops, peak, batches))
        except Exception as exc:  # a compiler crash ends this variant, not the run
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            print(f"  compilation failed after {time.perf_counter() - t0:.1f} s: {type(exc).__name__}: {first}")
            rows.append({"mode": label, "error": f"{type(exc).__name__}: {first}", "oom": False})
            return False
        runners[label] = runner
        return True

    for options in variants:
        if try_variant(options):
            worked.append(options)
    if not worked and not args.compile_options:
        print(f"  the default compilation failed: trying {json.dumps(COALESCE_OFF)}")
        if try_variant(COALESCE_OFF):
            worked.append(COALESCE_OFF)
    if forced and worked:
        torch._dynamo.reset()  # the SDPA backend is fixed when a graph is traced: trace afresh
        try_variant(worked[0], forced)
    return worked


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch-sizes", default="64,128,256,512")
    ap.add_argument("--compile", action="store_true", help="also sweep torch.compile(model); jobs compile too")
    ap.add_argument(
        "--compile-options",
        action="append",
        default=None,
        metavar="JSON",
        help="with --compile: torch.compile options (inductor settings by name, as embed.compile_options), "
        "one compiled variant per use, e.g. '{\"triton.cudagraphs\": true}'; the first that compiles is the jobs'",
    )
    ap.add_argument("--compile-batch-sizes", default="256,512", help="each size is one compilation (~1 min)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--channels", type=int, default=6)
    ap.add_argument("--images", type=int, default=16384, help="images of the embed-path plate")
    ap.add_argument("--job-images", type=int, default=4096, help="images of each job's plate")
    ap.add_argument("--chunk-images", type=int, default=512)
    ap.add_argument(
        "--loader-threads",
        type=lambda text: [int(t) for t in text.split(",")],
        default=[4, 8],
        help="loader threads of the embed path, one run each (comma-separated); the fastest is the jobs'",
    )
    ap.add_argument("--embed-repeats", type=int, default=2)
    ap.add_argument("--skip-jobs", action="store_true", help="no job processes (section 4)")
    ap.add_argument("--skip-tests", action="store_true", help="do not run tests/test_gpu.py")
    ap.add_argument("--checkpoint", default=None, help="real OpenPhenom-layout weights (optional)")
    ap.add_argument("--peak-tflops", type=float, default=None, help="dense bf16 peak, if the table lacks the device")
    ap.add_argument("--profile", action="store_true", help="the best forward's kernel time by kind (torch.profiler)")
    ap.add_argument("--tiny", action="store_true", help="small encoder: check the script on a CPU")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--job-child", default=None, help=argparse.SUPPRESS)
    return ap.parse_args()


if __name__ == "__main__":
    main()
