"""Streaming, resumable embedding of one plate store: tiles -> one embedding per image.

The plate's ``tiles`` array is read through dask chunk by chunk along images, keeping the
channels the model takes in the model's order (``channels``: names of the store's channels);
while the model runs on one chunk, ``loader_threads`` background threads read the next ones.
Preprocessing (:func:`phenoica.sources.preprocess.prepare`: scale, per-channel normalization of each
image or each crop as the model's recipe says, centred non-overlapping crops) runs in those
threads on the CPU; on CUDA the raw integer tiles travel to the GPU (a quarter of the bytes of
float32 for uint8), through pinned memory on a side stream, and are prepared there. Crops go
through the model in batches under ``torch.inference_mode`` (bf16 autocast on CUDA, float32 on
the CPU) and an image's embedding is the mean of its crops'. Reading, copying, the forward and
the part writes of different chunks overlap (:func:`run_chunks`); the plate's closing log line
(:class:`EmbedTiming`) says where the time went and which phase is left.

Resume: every finished chunk is written atomically to ``{out}.parts/chunk_{i:05d}.parquet``
(``Metadata_ImageIndex`` + features) beside a ``manifest.json`` recording the identity of the
work (store, shape, dtype, chunking, channels, crop size, normalization, intensity_max, model
identity and options, feature names). A rerun after a kill skips chunks already finished; parts
written under another identity are discarded. The final parquet is assembled from the parts in
row groups (memory bounded by one row group, not the plate), renamed into place atomically, and
the parts folder is removed. Its schema metadata (key ``phenoica.embedding``, JSON) records how
the embedding was made: model identity, channels, crop size, normalization and the embedding
options (architecture, pool, block, per_channel); :func:`embedding_metadata` reads it back.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import dask.array as da
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch import nn

from phenoica.io import atomic_path, get_logger
from phenoica.models.checkpoint import file_sha256
from phenoica.models.device import InFlight, Staging, resolve_device
from phenoica.models.vit import shares_channels
from phenoica.screen import (
    IMAGE_INDEX,
    PLATE,
    SITE,
    WELL,
    ScreenError,
    check_plate_against_metadata,
    feature_name,
    metadata_columns,
    open_plate,
    plate_channels,
    read_metadata,
    validate_metadata,
)
from phenoica.sources.preprocess import NORMALIZATIONS, NORMALIZE_IMAGE, dtype_max, prepare

MANIFEST = "manifest.json"
PARTS_FORMAT = 2
METADATA_KEY = "phenoica.embedding"
"""Schema-metadata key of the embeddings parquet: JSON of how the embedding was made."""
ROW_GROUP_ROWS = 16384  # rows per row group of the final parquet
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


@dataclass(frozen=True, eq=False)
class Chunk:
    """One unit of streamed work: store images ``[start, stop)`` and the referenced ones in it."""

    number: int  # position along the store's images (0-based), names the part file
    start: int
    stop: int
    image_indices: np.ndarray  # sorted Metadata_ImageIndex values inside [start, stop)
    rows: slice  # the matching rows of the plate's metadata, sorted by image index


def model_in_chans(model: nn.Module) -> int | None:
    """Channels the model expects, or None for any count (checked then by the probe pass only).

    In order: a patch embedding shared by all channels (phenoica.models) -> None; the model's
    ``in_chans`` attribute (phenoica FeatureExtractor: an int, or None when channel-agnostic;
    a timm ViT: an int); else ``model.patch_embed.proj.in_channels``; else None.
    """
    if shares_channels(model):
        return None
    if hasattr(model, "in_chans"):
        value = getattr(model, "in_chans")
        return value if isinstance(value, int) else None
    proj = getattr(getattr(model, "patch_embed", None), "proj", None)
    value = getattr(proj, "in_channels", None)
    return value if isinstance(value, int) else None


def model_digest(model: nn.Module) -> str:
    """SHA-256 over the model's class and state dict (names, dtypes, shapes, bytes)."""
    h = hashlib.sha256(type(model).__qualname__.encode())
    for name, tensor in model.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def model_identity(checkpoint: Path | str | None, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Resume identity of a model built from ``spec`` with weights from ``checkpoint``:
    the SHA-256 of the checkpoint file (None = seeded random init, decided by the spec) and
    the spec itself. Pass it as ``embed_plate(identity=...)``."""
    digest = None
    if checkpoint is not None:
        path = Path(checkpoint)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: checkpoint not found")
        digest = file_sha256(path)
    return {"checkpoint_sha256": digest, "spec": dict(spec)}


def plate_rows(metadata: pd.DataFrame | Path | str, store: Path) -> pd.DataFrame:
    """The validated metadata rows of the plate in ``store``, sorted by ``Metadata_ImageIndex``.

    A table of one plate is taken as is. A table of several plates is filtered to the plate
    named by the store (``{plate}.zarr``); if that plate is not in the table, ScreenError.
    Only ``Metadata_*`` columns are kept (any other column would read as a feature).
    """
    if isinstance(metadata, pd.DataFrame):
        meta = validate_metadata(metadata, source="metadata")
    else:
        meta = read_metadata(metadata)
    plates = list(dict.fromkeys(meta[PLATE]))
    if len(plates) > 1:
        name = store.name.removesuffix(".zarr")
        if name not in plates:
            raise ScreenError(
                f"{store}: metadata holds plates {plates[:5]}{'...' if len(plates) > 5 else ''} but none "
                f"named {name!r} after the store; pass this plate's rows only or name the store {{plate}}.zarr"
            )
        meta = meta[meta[PLATE] == name]
    if meta.empty:
        raise ScreenError(f"{store}: metadata has no rows for this plate")
    meta = meta[metadata_columns(meta)]  # anything else would read as a feature downstream
    return meta.sort_values(IMAGE_INDEX, kind="stable").reset_index(drop=True)


def iter_chunks(chunk_lengths: tuple[int, ...], image_indices: np.ndarray) -> Iterator[Chunk]:
    """The chunks (store chunk lengths along images) holding at least one referenced image.

    ``image_indices`` are the plate's sorted image indices; chunks without any are skipped.
    """
    bounds = np.concatenate([[0], np.cumsum(chunk_lengths)]).astype(np.int64)
    cuts = np.searchsorted(image_indices, bounds)
    for number in range(len(chunk_lengths)):
        lo, hi = int(cuts[number]), int(cuts[number + 1])
        if hi > lo:
            yield Chunk(number, int(bounds[number]), int(bounds[number + 1]), image_indices[lo:hi], slice(lo, hi))


@contextmanager
def inference_context(device: torch.device) -> Iterator[None]:
    """How the model runs when embedding: ``torch.inference_mode``, plus bf16 autocast on CUDA
    (float32 on the CPU)."""
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
    with torch.inference_mode(), autocast:
        yield


def embed_crops(model: nn.Module, crops: torch.Tensor, batch_size: int, device: torch.device) -> torch.Tensor:
    """Crops (n, k, C, s, s) -> float32 embeddings (n, D): the model on batches of ``batch_size``
    crops (bf16 autocast on CUDA), then the mean over each image's k crops."""
    n, k = crops.shape[:2]
    flat = crops.reshape(n * k, *crops.shape[2:])
    outs = []
    with inference_context(device):
        for i in range(0, n * k, batch_size):
            batch = flat[i : i + batch_size].to(device, non_blocking=True)
            outs.append(model(batch).float().clone())  # a CUDA-graph replay (compile option) reuses its output
    feats = torch.cat(outs)
    if feats.ndim != 2 or feats.shape[0] != n * k:
        raise ValueError(f"model returned shape {tuple(feats.shape)} for {n * k} crops; expected (B, D)")
    return feats.reshape(n, k, -1).mean(dim=1)


def probe_feature_dim(model: nn.Module, in_chans: int, crop_size: int, device: torch.device, store: Path) -> int:
    """D, the model's features per crop; a model rejecting the crop raises ScreenError.

    A phenoica FeatureExtractor says both without a forward pass (``check`` on the crop's shape,
    ``output_dim``), which saves a foundation model's first forward (and, compiled, a
    compilation for batch 1); any other model runs one zero crop.
    """
    shape = (1, in_chans, crop_size, crop_size)
    declared_dim, check = getattr(model, "output_dim", None), getattr(model, "check", None)
    try:
        if callable(declared_dim) and callable(check):
            check(torch.empty(shape, device="meta"))
            return int(declared_dim(in_chans))
        out = embed_crops(model, torch.zeros(1, *shape), 1, device)
    except Exception as exc:  # a model's failure mode is arbitrary; name the inputs it rejected
        raise ScreenError(
            f"{store}: the model rejects crops of shape {shape} "
            f"({type(exc).__name__}: {exc}); check embed.crop_size against the model's img_size"
        ) from exc
    dim = int(out.shape[1])
    declared = getattr(model, "feature_dim", None)
    if isinstance(declared, int) and declared != dim:
        raise ValueError(f"model.feature_dim is {declared} but its forward pass returns {dim} features")
    return dim


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Set torch's CPU intra-op threads for the block (None = leave as is), then restore."""
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def parts_dir(out: Path) -> Path:
    """The folder of finished chunks beside ``out``: ``{out}.parts``."""
    return out.with_name(out.name + ".parts")


def prepare_parts(parts: Path, manifest: Mapping[str, Any], log: logging.Logger) -> None:
    """Keep ``parts`` if its manifest equals ``manifest``; otherwise discard it and start afresh."""
    path = parts / MANIFEST
    if parts.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError):
            old = None
        if old == manifest:
            return
        stale = len(list(parts.glob("chunk_*.parquet")))
        log.info("discarding %d part(s) in %s: written for other work (manifest differs)", stale, parts)
        shutil.rmtree(parts)
    parts.mkdir(parents=True)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))


def part_path(parts: Path, chunk: Chunk) -> Path:
    """File of a finished chunk."""
    return parts / f"chunk_{chunk.number:05d}.parquet"


def part_is_done(parts: Path, chunk: Chunk, dim: int) -> bool:
    """Whether a part file exists holding exactly this chunk's image indices and D features
    (their names are in the manifest, which the parts folder was kept for)."""
    path = part_path(parts, chunk)
    if not path.exists():
        return False
    try:
        part = pq.ParquetFile(path)
        idx = part.read(columns=[IMAGE_INDEX], use_threads=False).column(0).to_numpy()
    except (OSError, pa.ArrowException, KeyError):
        return False
    return len(part.schema_arrow.names) == dim + 1 and np.array_equal(idx, chunk.image_indices)


def write_part(parts: Path, chunk: Chunk, emb: np.ndarray, names: Sequence[str] | None = None) -> Path:
    """Write a finished chunk atomically: ``Metadata_ImageIndex`` + float32 features ``names``
    (default ``emb_0000 ...``)."""
    cols = [pa.array(chunk.image_indices.astype(np.int64))] + [pa.array(emb[:, j]) for j in range(emb.shape[1])]
    names = [IMAGE_INDEX] + (list(names) if names is not None else [feature_name(j) for j in range(emb.shape[1])])
    path = part_path(parts, chunk)
    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_arrays(cols, names=names), tmp)
    return path


def read_chunk(tiles: da.Array, chunk: Chunk, channels: Sequence[int] | None = None) -> np.ndarray:
    """One chunk's referenced images (n, C, H, W) through dask, channels selected in model order."""
    block = tiles[chunk.start : chunk.stop].compute(scheduler="synchronous")
    if len(chunk.image_indices) < block.shape[0]:
        block = block[chunk.image_indices - chunk.start]
    if channels is not None:
        block = block[:, list(channels)]
    return block


def load_raw_chunk(tiles: da.Array, chunk: Chunk, channels: Sequence[int] | None = None) -> torch.Tensor:
    """Read one chunk as an integer tensor for preprocessing on the model's device (uint16
    widened to int32, which CUDA converts; uint8 kept, a quarter of float32's bytes)."""
    block = read_chunk(tiles, chunk, channels)
    if block.dtype == np.uint16:
        block = block.astype(np.int32)
    return torch.from_numpy(np.ascontiguousarray(block))


def channel_indices(
    store: Path, channels: Sequence[str] | None, key: str = "channels"
) -> tuple[list[int] | None, list[str]]:
    """(indices into the store's channels, names fed to the model) for ``channels``, the store's
    channel names in the model's order (None = all, in the store's order). A name the store
    lacks, or a name given twice, raises ScreenError naming ``key`` and the store's channels."""
    names = plate_channels(store)
    if channels is None:
        return None, names
    missing = [c for c in channels if c not in names]
    if missing:
        raise ScreenError(
            f"{store}: channel(s) {missing} named by config key {key} are not in the plate's channels {names}"
        )
    twice = sorted({c for c in channels if list(channels).count(c) > 1})
    if twice:
        raise ScreenError(f"config key {key}: channel(s) {twice} listed more than once")
    idx = [names.index(c) for c in channels]
    return (None if idx == list(range(len(names))) else idx), list(channels)


def embedding_metadata(path: Path | str) -> dict[str, Any]:
    """How an embeddings parquet was made (its ``phenoica.embedding`` schema metadata); {} if absent."""
    raw = (pq.read_schema(path).metadata or {}).get(METADATA_KEY.encode())
    return json.loads(raw) if raw else {}


def check_finite(emb: np.ndarray, chunk: Chunk, rows: pd.DataFrame, store: Path) -> None:
    """Raise ScreenError naming the plate and image of the first non-finite embedding."""
    ok = np.isfinite(emb).all(axis=1)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        row = rows.iloc[chunk.rows.start + i]
        raise ScreenError(
            f"{store}: non-finite embedding for plate {row[PLATE]}, well {row[WELL]}, site {row[SITE]}, "
            f"{IMAGE_INDEX} {int(chunk.image_indices[i])}"
        )


def assemble(
    out: Path,
    parts: Path,
    chunks: list[Chunk],
    rows: pd.DataFrame,
    dim: int,
    row_group_rows: int = ROW_GROUP_ROWS,
    names: Sequence[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``out`` atomically: metadata rows + float32 features ``names`` (default
    ``emb_0000 ...``), streamed from the parts; whole parts are gathered into row groups of at
    least ``row_group_rows`` rows (the last may be smaller), so memory is bounded by one row
    group, not by the plate. ``metadata`` goes into the schema metadata as JSON (``METADATA_KEY``)."""
    meta = pa.Table.from_pandas(rows, preserve_index=False).replace_schema_metadata(None)
    names = list(names) if names is not None else [feature_name(j) for j in range(dim)]
    if len(names) != dim:
        raise ValueError(f"{len(names)} feature names for {dim} features")
    schema = pa.schema(list(meta.schema) + [pa.field(n, pa.float32()) for n in names])
    if metadata is not None:
        schema = schema.with_metadata({METADATA_KEY: json.dumps(dict(metadata), sort_keys=True)})
    with atomic_path(out) as tmp, pq.ParquetWriter(tmp, schema) as writer:
        buffered: list[pa.Table] = []
        for chunk in chunks:
            path = part_path(parts, chunk)
            part = pq.ParquetFile(path).read(use_threads=False)
            if not np.array_equal(part.column(IMAGE_INDEX).to_numpy(), chunk.image_indices):
                raise ValueError(f"{path}: image indices do not match the metadata")
            piece = meta.slice(chunk.rows.start, chunk.rows.stop - chunk.rows.start)
            buffered.append(pa.Table.from_arrays(piece.columns + [part.column(n) for n in names], schema=schema))
            if sum(t.num_rows for t in buffered) >= row_group_rows or chunk is chunks[-1]:
                writer.write_table(pa.concat_tables(buffered).combine_chunks())  # one row group
                buffered = []
    return out


def _as_json(value: dict[str, Any], what: str) -> dict[str, Any]:
    """``value`` after a JSON round trip; ValueError naming ``what`` if it does not survive one."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be a JSON-serializable dict, got {value!r} ({exc})") from None


def check_model_fits_plate(
    model: nn.Module, where: str, image_size: tuple[int, int], crop_size: int, fed: Sequence[str], channels_key: str
) -> None:
    """ScreenError (prefixed ``where``) if the images are smaller than the crop, or the model
    expects another channel count than ``fed``, or embeds fewer channels (``max_in_chans``)."""
    height, width = image_size
    if height < crop_size or width < crop_size:
        raise ScreenError(
            f"{where} images are {height}x{width}, smaller than the crop size {crop_size} "
            "(the model's img_size, or embed.crop_size)"
        )
    n_chans = len(fed)
    expected = model_in_chans(model)
    if expected is not None and expected != n_chans:
        raise ScreenError(f"{where} has {n_chans} channels but the model expects {expected}")
    most = getattr(model, "max_in_chans", None)
    if isinstance(most, int) and n_chans > most:
        raise ScreenError(
            f"{where} gives {n_chans} channels {list(fed)} but the model embeds at most {most} "
            f"(max_in_chans); choose up to {most} with config key {channels_key}"
        )


def embed_plate(
    store: Path,
    metadata: pd.DataFrame | Path,
    model: nn.Module,
    out: Path,
    *,
    crop_size: int,
    intensity_max: float | None = None,
    batch_size: int = 128,
    chunk_images: int | None = None,
    device: str = "auto",
    threads: int | None = None,
    log: logging.Logger | None = None,
    identity: Mapping[str, Any] | None = None,
    channels: Sequence[str] | None = None,
    channels_key: str = "channels",
    normalize: str = NORMALIZE_IMAGE,
    feature_names: Sequence[str] | None = None,
    options: Mapping[str, Any] | None = None,
    loader_threads: int = 1,
    preprocess_on_device: bool | None = None,
    keep_parts: bool = False,
) -> Path:
    """Embed the images of one plate store referenced by ``metadata``; write ``out`` (parquet).

    ``out`` holds the plate's metadata rows (all ``Metadata_*`` columns, sorted by
    ``Metadata_ImageIndex``) and float32 features, one row per image (mean of its
    non-overlapping ``crop_size`` crops): ``feature_names`` when given (their count must be the
    model's output width), else ``emb_0000 ... emb_{D-1}``. ``metadata`` is a table (or file)
    of this plate, or of several plates, then filtered to the one named by the store
    (``{plate}.zarr``). ``model`` maps (B, C, s, s) crops to (B, D); it is put in eval mode and
    moved to the device. ``channels`` names the store's channels the model takes, in its order
    (None = all, as stored; ``channels_key`` names the config key in errors); ``normalize`` is
    the model's preprocessing (:mod:`phenoica.sources.preprocess`). ``batch_size`` counts crops per
    forward pass; ``chunk_images`` images are streamed (and resumed) at a time, default the
    store's chunk length; ``loader_threads`` chunks are read ahead. ``preprocess_on_device``
    ships raw tiles to the device and prepares them there (None = on CUDA only). ``identity`` names the model
    in the resume manifest (a JSON-able dict, e.g. a checkpoint hash; it alone decides whether
    parts of an earlier run were made by the same model); None = a hash of the model's class
    and state dict. ``options`` (JSON-able) is recorded with the identity in the output's
    schema metadata. ``keep_parts`` leaves the finished parts beside ``out`` (a job of several
    plates removes them when all its plates are written, so a kill loses none of them).
    """
    store, out = Path(store), Path(out)
    log = log or get_logger("phenoica.embed")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if chunk_images is not None and chunk_images < 1:
        raise ValueError(f"chunk_images must be >= 1, got {chunk_images}")
    if loader_threads < 1:
        raise ValueError(f"loader_threads must be >= 1, got {loader_threads}")
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {normalize!r}")
    tiles_z = open_plate(store)
    rows = plate_rows(metadata, store)
    plate = str(rows[PLATE].iloc[0])
    check_plate_against_metadata(tiles_z, rows, str(store))
    n_images, _, height, width = (int(v) for v in tiles_z.shape)
    selected, fed = channel_indices(store, channels, channels_key)
    n_chans = len(fed)
    check_model_fits_plate(model, f"{store}: plate {plate}", (height, width), crop_size, fed, channels_key)

    tiles = da.from_zarr(tiles_z)
    tiles = tiles.rechunk({0: chunk_images or tiles.chunks[0][0], 1: -1, 2: -1, 3: -1})
    chunks = list(iter_chunks(tiles.chunks[0], rows[IMAGE_INDEX].to_numpy()))
    dev = resolve_device(device)
    model_id = dict(identity) if identity is not None else {"state_sha256": model_digest(model)}
    model_id = _as_json(model_id, "identity")  # as saved: compared with the manifest read back from JSON
    opts = _as_json(dict(options or {}), "options")
    model.eval().to(dev)

    with torch_threads(threads):
        dim = probe_feature_dim(model, n_chans, crop_size, dev, store)
        names = list(feature_names) if feature_names is not None else [feature_name(j) for j in range(dim)]
        if len(names) != dim:
            raise ValueError(f"{len(names)} feature names given, but the model returns {dim} features")
        manifest = {
            "format": PARTS_FORMAT,
            "store": str(store.resolve()),
            "shape": [n_images, n_chans, height, width],
            "dtype": str(tiles_z.dtype),
            "chunks": [int(c) for c in tiles.chunks[0]],
            "channels": fed,
            "crop_size": int(crop_size),
            "normalize": normalize,
            "intensity_max": intensity_max,
            "model": model_id,
            "options": opts,
            "feature_names": names,
        }
        parts = parts_dir(out)
        prepare_parts(parts, manifest, log)
        todo = [c for c in chunks if not part_is_done(parts, c, dim)]
        if len(todo) < len(chunks):
            log.info(
                "plate %s: resuming from %s, %d/%d chunk(s) already done",
                plate,
                parts,
                len(chunks) - len(todo),
                len(chunks),
            )
        log.info(
            "plate %s: embedding %d image(s) in %d chunk(s) on %s, channels %s, %s normalization, D=%d",
            plate,
            sum(len(c.image_indices) for c in todo),
            len(todo),
            dev,
            fed,
            normalize,
            dim,
        )
        run = ChunkRun(
            tiles=tiles,
            model=model,
            rows=rows,
            parts=parts,
            store=store,
            plate=plate,
            crop_size=crop_size,
            intensity_max=intensity_max,
            batch_size=batch_size,
            device=dev,
            channels=selected,
            normalize=normalize,
            names=names,
            loader_threads=loader_threads,
            on_device=dev.type == "cuda" if preprocess_on_device is None else preprocess_on_device,
        )
        run_chunks(todo, run, log)
    record = {
        "model": model_id,
        **opts,
        "channels": fed,
        "crop_size": int(crop_size),
        "normalize": normalize,
        "intensity_max": intensity_max,
        "feature_dim": dim,
    }
    assemble(out, parts, chunks, rows, dim, names=names, metadata=record)
    if not keep_parts:
        shutil.rmtree(parts)
    log.info("plate %s: wrote %s (%d rows x %d features)", plate, out, len(rows), dim)
    return out


@dataclass(frozen=True)
class ChunkRun:
    """What :func:`run_chunks` needs besides the chunks: how to read, prepare and embed them."""

    tiles: da.Array
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


def load_for_model(run: ChunkRun, chunk: Chunk, staging: Staging) -> tuple[InFlight, dict[str, float]]:
    """The loader threads' work on one chunk: read (+ decompress) it, preprocess it on the CPU
    (or keep its raw integers for the device), and start its copy to the device."""
    t0 = time.perf_counter()
    if run.on_device:
        host = load_raw_chunk(run.tiles, chunk, run.channels)
        t1 = t2 = time.perf_counter()
    else:
        block = read_chunk(run.tiles, chunk, run.channels)
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
    check_finite(emb, chunk, run.rows, run.store)
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
