"""One plate store through one model: :func:`embed_plate` (tiles -> one embedding per image).

The plate's ``tiles`` array is read chunk by chunk along images (:func:`chunk_lengths`: the
store's chunk length or ``embed.chunk_images``, each chunk's slice read straight from zarr), keeping the channels the model takes in the model's order
(:class:`PlateModel`: names of the store's channels), and streamed through the model (:func:`phenoica.embed._chunks.run_chunks`); crops go
through it under ``torch.inference_mode`` (bf16 autocast on CUDA, float32 on the CPU).

Resume: finished chunks are kept as parts beside the output (:mod:`phenoica.embed._parts`) under
a manifest recording the identity of the work (store, shape, dtype, chunking, channels, crop
size, normalization, intensity_max, model identity and options, feature names). The final
parquet's schema metadata (key ``phenoica.embedding``, JSON) records how the embedding was
made: model identity, channels, crop size, normalization and the embedding options
(architecture, pool, block, per_channel).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pandas as pd
import torch
import zarr
from torch import nn

from phenoica.contract import (
    IMAGE_INDEX,
    PLATE,
    ScreenError,
    channel_indices,
    check_plate_against_metadata,
    feature_name,
    metadata_columns,
    open_plate,
    read_metadata,
    validate_metadata,
)
from phenoica.embed._chunks import ChunkRun, run_chunks
from phenoica.embed._options import EmbedOptions
from phenoica.embed._parts import PARTS_FORMAT, Chunk, assemble, iter_chunks, part_is_done, parts_dir, prepare_parts
from phenoica.models import ModelInputs, check_fit, file_sha256, module_inputs, probe_feature_dim, resolve_device
from phenoica.screen import NORMALIZATIONS, NORMALIZE_IMAGE
from phenoica.utils import get_logger


@dataclass(frozen=True, eq=False)
class PlateModel:
    """The model a plate is embedded with, and what is recorded of it.

    ``module`` maps (B, C, s, s) crops to (B, D); it is put in eval mode and moved to the
    device. ``inputs``: what it takes (None = :func:`phenoica.models.module_inputs` the module; a job passes
    those of the model it compiled). ``identity`` names the model in the resume manifest (a
    JSON-able dict, e.g. a checkpoint hash; it alone decides whether parts of an earlier run
    were made by the same model; None = a hash of the module's class and state dict).
    ``channels`` names the store's channels the model takes, in its order (None = all, as
    stored; ``channels_key`` names the config key in errors); ``normalize`` is the model's
    preprocessing (:mod:`phenoica.screen._preprocess`); ``feature_names`` name the features (their
    count must be the model's output width; None = ``emb_0000 ...``); ``options`` (JSON-able)
    are recorded with the identity in the output's schema metadata.
    """

    module: nn.Module
    inputs: ModelInputs | None = None
    identity: Mapping[str, Any] | None = None
    channels: Sequence[str] | None = None
    channels_key: str = "channels"
    normalize: str = NORMALIZE_IMAGE
    feature_names: Sequence[str] | None = None
    options: Mapping[str, Any] | None = None


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


def plate_image_rows(metadata: pd.DataFrame | Path | str, store: Path) -> pd.DataFrame:
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


def _as_json(value: dict[str, Any], what: str) -> dict[str, Any]:
    """``value`` after a JSON round trip; ValueError naming ``what`` if it does not survive one."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be a JSON-serializable dict, got {value!r} ({exc})") from None


def chunk_lengths(n_images: int, chunk_images: int) -> tuple[int, ...]:
    """Images per streamed chunk: ``chunk_images`` each, the last one the rest (one empty chunk
    for a store without images)."""
    if chunk_images < 1:
        raise ValueError(f"chunk_images must be >= 1, got {chunk_images}")
    return tuple(min(chunk_images, n_images - start) for start in range(0, n_images, chunk_images)) or (0,)


@dataclass(frozen=True, eq=False)
class _Plate:
    """A plate store opened for embedding: its tiles (the store's array, which the chunks are
    read from, and the images per chunk), its metadata rows, the channels fed to the model and
    the chunks to embed."""

    store: Path
    name: str
    rows: pd.DataFrame
    array: zarr.Array
    lengths: tuple[int, ...]
    shape: list[int]  # images, channels fed, height, width
    dtype: str
    selected: list[int] | None
    fed: list[str]
    chunks: list[Chunk]


def _open_plate(
    store: Path, metadata: pd.DataFrame | Path, model: PlateModel, inputs: ModelInputs, options: EmbedOptions
) -> _Plate:
    """Open ``store``, check it against its metadata rows and against the model's ``inputs`` (ScreenError)."""
    tiles_z = open_plate(store)
    rows = plate_image_rows(metadata, store)
    plate = str(rows[PLATE].iloc[0])
    check_plate_against_metadata(tiles_z, rows, str(store))
    n_images, _, height, width = (int(v) for v in tiles_z.shape)
    selected, fed = channel_indices(store, model.channels, model.channels_key)
    misfit = check_fit(inputs, (height, width), int(options.crop_size or 0), fed)
    if misfit is not None:
        raise ScreenError(misfit.plate_message(f"{store}: plate {plate}", model.channels_key))
    lengths = chunk_lengths(n_images, options.chunk_images or int(tiles_z.chunks[0]))
    chunks = list(iter_chunks(lengths, rows[IMAGE_INDEX].to_numpy()))
    shape = [n_images, len(fed), height, width]
    return _Plate(store, plate, rows, tiles_z, lengths, shape, str(tiles_z.dtype), selected, fed, chunks)


def embed_plate(
    store: Path,
    metadata: pd.DataFrame | Path,
    model: PlateModel,
    out: Path,
    options: EmbedOptions,
    log: logging.Logger | None = None,
    keep_parts: bool = False,
    preprocess_on_device: bool | None = None,
) -> Path:
    """Embed the images of one plate store referenced by ``metadata``; write ``out`` (parquet).

    ``out`` holds the plate's metadata rows (all ``Metadata_*`` columns, sorted by
    ``Metadata_ImageIndex``) and float32 features, one row per image (mean of its
    non-overlapping ``options.crop_size`` crops), named by ``model.feature_names`` (default
    ``emb_0000 ... emb_{D-1}``). ``metadata`` is a table (or file) of this plate, or of several
    plates, then filtered to the one named by the store (``{plate}.zarr``). ``model`` is the
    model and what is recorded of it (:class:`PlateModel`), ``options`` the embedding settings
    (:class:`~phenoica.embed.EmbedOptions`: batch, chunking, device, threads, read-ahead).
    ``keep_parts`` leaves the finished parts beside ``out`` (a job of several plates removes
    them when all its plates are written, so a kill loses none of them).
    ``preprocess_on_device``: ship raw tiles to the device and prepare them there (None = on
    CUDA only).
    """
    store, out = Path(store), Path(out)
    log = log or get_logger("phenoica.embed")
    if options.crop_size is None:
        raise ValueError("embed_plate needs options.crop_size (None = the model's img_size is decided by the job)")
    if model.normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {model.normalize!r}")
    inputs = model.inputs or module_inputs(model.module)
    plate = _open_plate(store, metadata, model, inputs, options)
    crop_size, intensity_max = int(options.crop_size), options.intensity_max
    dev = resolve_device(options.device)
    identity = model.identity
    model_id = dict(identity) if identity is not None else {"state_sha256": model_digest(model.module)}
    model_id = _as_json(model_id, "identity")  # as saved: compared with the manifest read back from JSON
    opts = _as_json(dict(model.options or {}), "options")
    model.module.eval().to(dev)

    with torch_threads(options.threads):
        dim = probe_feature_dim(model.module, inputs, len(plate.fed), crop_size, dev, store)
        names = list(model.feature_names) if model.feature_names is not None else [feature_name(j) for j in range(dim)]
        if len(names) != dim:
            raise ValueError(f"{len(names)} feature names given, but the model returns {dim} features")
        manifest = {
            "format": PARTS_FORMAT,
            "store": str(store.resolve()),
            "shape": plate.shape,
            "dtype": plate.dtype,
            "chunks": list(plate.lengths),
            "channels": plate.fed,
            "crop_size": crop_size,
            "normalize": model.normalize,
            "intensity_max": intensity_max,
            "model": model_id,
            "options": opts,
            "feature_names": names,
        }
        parts = parts_dir(out)
        prepare_parts(parts, manifest, log)
        todo = [c for c in plate.chunks if not part_is_done(parts, c, dim)]
        _log_start(log, plate, todo, parts, f"on {dev}, channels {plate.fed}, {model.normalize} normalization, D={dim}")
        run = ChunkRun(
            tiles=plate.array,  # a chunk's slice read from zarr is one array
            model=model.module,
            rows=plate.rows,
            parts=parts,
            store=store,
            plate=plate.name,
            crop_size=crop_size,
            intensity_max=intensity_max,
            batch_size=options.batch_size,
            device=dev,
            channels=plate.selected,
            normalize=model.normalize,
            names=names,
            loader_threads=options.loader_threads,
            on_device=dev.type == "cuda" if preprocess_on_device is None else preprocess_on_device,
        )
        run_chunks(todo, run, log)
    record = {
        "model": model_id,
        **opts,
        "channels": plate.fed,
        "crop_size": crop_size,
        "normalize": model.normalize,
        "intensity_max": intensity_max,
        "feature_dim": dim,
    }
    assemble(out, parts, plate.chunks, plate.rows, dim, names=names, metadata=record)
    if not keep_parts:
        shutil.rmtree(parts)
    log.info("plate %s: wrote %s (%d rows x %d features)", plate.name, out, len(plate.rows), dim)
    return out


def _log_start(log: logging.Logger, plate: _Plate, todo: list[Chunk], parts: Path, how: str) -> None:
    """The plate's opening lines: the chunks already done (resuming), then what is embedded how."""
    if len(todo) < len(plate.chunks):
        log.info(
            "plate %s: resuming from %s, %d/%d chunk(s) already done",
            plate.name,
            parts,
            len(plate.chunks) - len(todo),
            len(plate.chunks),
        )
    images = sum(len(c.image_indices) for c in todo)
    log.info("plate %s: embedding %d image(s) in %d chunk(s) %s", plate.name, images, len(todo), how)
