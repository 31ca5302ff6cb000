"""The chunk loop of one plate: read, prepare, embed and write chunks, five stages overlapped.

While the model runs on one chunk, ``loader_threads`` background threads read the next ones.
Preprocessing (:func:`phenoica.screen.prepare`: scale, per-channel normalization of each
image or each crop as the model's recipe says, centred non-overlapping crops) runs in those
threads on the CPU; on CUDA the raw integer tiles travel to the GPU (a quarter of the bytes of
float32 for uint8), through pinned memory on a side stream, and are prepared there. Crops go
through the model in batches (:func:`phenoica.models.embed_crops`) and an image's
embedding is the mean of its crops'. Reading, copying, the forward and the part writes of
different chunks overlap (:func:`run_chunks`); the plate's closing log line
(:class:`EmbedTiming`) says where the time went and which phase is left.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
import zarr
from torch import nn

from phenoica.contract import read_images
from phenoica.embed._parts import Chunk, check_embeddings_finite, write_part
from phenoica.models import InFlight, Staging, embed_crops
from phenoica.screen import NORMALIZE_IMAGE, dtype_max, prepare

TIMING_KEY = "phenoica_embed_timing"
"""LogRecord attribute of the plate's closing timing line: :class:`EmbedTiming` as a dict."""


@dataclass(frozen=True)
class EmbedTiming:
    """Where the wall time of one plate's chunk loop went (seconds).

    The model's thread (the loop) is either ``waiting_for_data_s`` (blocked on the loader
    threads: reading + decompression, and on the CPU preprocessing, or on CUDA pinning and the
    host-to-device copy), running ``model_s`` (taking the chunk, preparing it on the device,
    queueing the forward passes and the device-to-host copy of the result; on the CPU this is
    the forward itself, on CUDA only the launches), ``waiting_for_results_s`` (blocked on the
    results in flight: on CUDA the device's forward, then the part writes) or
    ``waiting_for_writes_s`` (the last writes, at the end). The background threads' own busy
    times (overlapped with the loop) are ``read_s``, ``prepare_s`` (CPU preprocessing),
    ``copy_s`` (pinning + queueing the copy), ``device_wait_s`` (the writer waiting for the
    device's results) and ``write_s`` (the part writes). :attr:`left` names what the loop waited
    on most: the phase to speed up next.
    """

    images: int
    chunks: int
    wall_s: float
    waiting_for_data_s: float
    model_s: float
    waiting_for_writes_s: float
    waiting_for_results_s: float = 0.0
    read_s: float = 0.0
    prepare_s: float = 0.0
    copy_s: float = 0.0
    device_wait_s: float = 0.0
    write_s: float = 0.0

    @property
    def images_per_s(self) -> float:
        return self.images / self.wall_s if self.wall_s > 0 else float("inf")

    @property
    def data_wait_fraction(self) -> float:
        return self.waiting_for_data_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def left(self) -> str:
        """The loop's largest share: ``"forward"`` (the model itself, the goal), ``"reading"``
        (the loader threads: raise embed.loader_threads, or a faster store) or ``"writing"``."""
        results = self.waiting_for_results_s + self.waiting_for_writes_s
        writing = results if self.write_s > self.device_wait_s else 0.0
        forward = self.model_s + (results - writing)
        return max((forward, "forward"), (self.waiting_for_data_s, "reading"), (writing, "writing"))[1]


@dataclass(frozen=True)
class ChunkRun:
    """What :func:`run_chunks` needs besides the chunks: how to read, prepare and embed them."""

    tiles: zarr.Array | np.ndarray
    model: nn.Module
    rows: pd.DataFrame
    parts: Path
    store: Path
    plate: str
    crop_size: int
    intensity_max: float | None
    batch_size: int
    device: torch.device
    channels: Sequence[int] | None = None
    normalize: str = NORMALIZE_IMAGE
    names: Sequence[str] | None = None
    loader_threads: int = 1
    on_device: bool = False

    @property
    def source(self) -> str:
        return f"{self.store} (plate {self.plate})"


RESULTS_IN_FLIGHT = 2
"""Chunks whose forward is queued but whose part is not yet written (bounds device memory)."""


def read_chunk(
    tiles: zarr.Array | np.ndarray, chunk: Chunk, channels: Sequence[int] | None = None, source: str = "plate store"
) -> np.ndarray:
    """One chunk's referenced images (n, C, H, W), channels selected in model order: a slice of
    the store's zarr array (decoded into one array; a damaged chunk is named with ``source``,
    :func:`phenoica.contract.read_images`)."""
    block = read_images(tiles, chunk.start, chunk.stop, source)
    if len(chunk.image_indices) < block.shape[0]:
        block = block[chunk.image_indices - chunk.start]
    if channels is not None:
        block = block[:, list(channels)]
    return block


def load_raw_chunk(
    tiles: zarr.Array | np.ndarray, chunk: Chunk, channels: Sequence[int] | None = None, source: str = "plate store"
) -> torch.Tensor:
    """Read one chunk as an integer tensor for preprocessing on the model's device (uint16
    widened to int32, which CUDA converts; uint8 kept, a quarter of float32's bytes)."""
    block = read_chunk(tiles, chunk, channels, source)
    if block.dtype == np.uint16:
        block = block.astype(np.int32)
    return torch.from_numpy(np.ascontiguousarray(block))


def load_for_model(run: ChunkRun, chunk: Chunk, staging: Staging) -> tuple[InFlight, dict[str, float]]:
    """The loader threads' work on one chunk: read (+ decompress) it, preprocess it on the CPU
    (or keep its raw integers for the device), and start its copy to the device."""
    t0 = time.perf_counter()
    if run.on_device:
        host = load_raw_chunk(run.tiles, chunk, run.channels, run.source)
        t1 = t2 = time.perf_counter()
    else:
        block = read_chunk(run.tiles, chunk, run.channels, run.source)
        t1 = time.perf_counter()
        host = prepare(block, run.crop_size, run.intensity_max, source=run.source, normalize=run.normalize)
        t2 = time.perf_counter()
    item = staging.upload(host)
    return item, {"read_s": t1 - t0, "prepare_s": t2 - t1, "copy_s": time.perf_counter() - t2}


def finish_part(run: ChunkRun, chunk: Chunk, result: InFlight) -> dict[str, float]:
    """The writer thread's work on one chunk: wait for its embeddings to reach the host, check
    them, write the part atomically."""
    t0 = time.perf_counter()
    emb = Staging.result(result)
    t1 = time.perf_counter()
    check_embeddings_finite(emb, chunk, run.rows, run.store)
    write_part(run.parts, chunk, emb, run.names)
    return {"device_wait_s": t1 - t0, "write_s": time.perf_counter() - t1}


def run_chunks(todo: list[Chunk], run: ChunkRun, log: logging.Logger) -> EmbedTiming | None:
    """Embed ``todo`` chunk by chunk, five stages overlapped: ``run.loader_threads`` threads
    read (+ decompress) the next chunks and start their copies to the device (pinned memory,
    a side stream on CUDA; on the CPU they also preprocess); the loop prepares a chunk on the
    device (``run.on_device``) and queues its forward and the copy of its embeddings back; a
    writer thread waits for those, checks them and writes the part. At most
    ``loader_threads + 1`` chunks are being loaded and ``RESULTS_IN_FLIGHT`` are being
    embedded/written at a time. The same code runs on the CPU, where copies are no-ops.

    Logs a line per chunk and, closing, where the time went and which phase is left; the
    :class:`EmbedTiming` rides on that record as attribute ``TIMING_KEY`` and is returned."""
    if not todo:
        return None
    total, done, t0 = sum(len(c.image_indices) for c in todo), 0, time.perf_counter()
    loop = {"waiting_for_data_s": 0.0, "model_s": 0.0, "waiting_for_results_s": 0.0}
    background = {"read_s": 0.0, "prepare_s": 0.0, "copy_s": 0.0, "device_wait_s": 0.0, "write_s": 0.0}
    staging = Staging(run.device)
    top = run.intensity_max if run.intensity_max is not None else dtype_max(run.tiles.dtype)
    queue = iter(todo)
    pending: deque[Future[tuple[InFlight, dict[str, float]]]] = deque()
    writes: deque[Future[dict[str, float]]] = deque()

    def settle(future: Future[dict[str, float]]) -> None:
        for key, value in future.result().items():  # a failed write stops the run here
            background[key] += value

    with (
        ThreadPoolExecutor(max_workers=run.loader_threads, thread_name_prefix="phenoica-load") as loader,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="phenoica-write") as writer,
    ):

        def load_next() -> None:
            chunk = next(queue, None)
            if chunk is not None:
                pending.append(loader.submit(load_for_model, run, chunk, staging))

        for _ in range(run.loader_threads):
            load_next()
        for i, chunk in enumerate(todo):
            t_wait = time.perf_counter()
            item, times = pending.popleft().result()
            t_model = time.perf_counter()
            loop["waiting_for_data_s"] += t_model - t_wait
            for key, value in times.items():
                background[key] += value
            load_next()
            crops = staging.take(item)
            if run.on_device:
                crops = prepare(crops, run.crop_size, top, source=run.source, normalize=run.normalize)
            result = staging.download(embed_crops(run.model, crops, run.batch_size, run.device))
            del crops, item
            writes.append(writer.submit(finish_part, run, chunk, result))
            t_results = time.perf_counter()
            loop["model_s"] += t_results - t_model
            while len(writes) > RESULTS_IN_FLIGHT or (writes and writes[0].done()):
                settle(writes.popleft())
            loop["waiting_for_results_s"] += time.perf_counter() - t_results
            done += len(chunk.image_indices)
            log_progress(log, run.plate, i + 1, len(todo), len(chunk.image_indices), done, total, t0)
        t_write = time.perf_counter()
        while writes:
            settle(writes.popleft())  # surface a failed write before the parts are assembled
        write_wait = time.perf_counter() - t_write
    timing = EmbedTiming(
        images=total,
        chunks=len(todo),
        wall_s=time.perf_counter() - t0,
        waiting_for_writes_s=write_wait,
        **loop,
        **background,
    )
    log_timing(log, run.plate, timing)
    return timing


def log_progress(
    log: logging.Logger, plate: str, i: int, n: int, images: int, done: int, total: int, t0: float
) -> None:
    """One chunk's progress line: images/s so far and the ETA."""
    elapsed = time.perf_counter() - t0
    rate = done / elapsed if elapsed > 0 else float("inf")
    eta = (total - done) / rate if rate > 0 else float("nan")
    log.info("plate %s: chunk %d/%d, %d image(s), %.1f images/s, ETA %.0f s", plate, i, n, images, rate, eta)


def log_timing(log: logging.Logger, plate: str, t: EmbedTiming) -> None:
    """The plate's closing line: where the loop's time went, the background threads' busy
    times, and the phase left (the :class:`EmbedTiming` rides on the record as ``TIMING_KEY``)."""
    log.info(
        "plate %s: %d image(s) in %.1f s (%.1f images/s): model %.1f s, waiting for data %.1f s (%.0f%%), "
        "for results %.1f s, for writes %.1f s; background: read %.1f s, preprocess %.1f s, copy %.1f s, "
        "device %.1f s, write %.1f s; left: %s",
        plate,
        t.images,
        t.wall_s,
        t.images_per_s,
        t.model_s,
        t.waiting_for_data_s,
        100 * t.data_wait_fraction,
        t.waiting_for_results_s,
        t.waiting_for_writes_s,
        t.read_s,
        t.prepare_s,
        t.copy_s,
        t.device_wait_s,
        t.write_s,
        t.left,
        extra={TIMING_KEY: asdict(t)},
    )
