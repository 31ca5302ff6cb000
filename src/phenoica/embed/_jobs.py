"""One embedding job: one model, one or several plates, the model built (and compiled) once.

On a cluster each job pays a fixed cost outside the plates' forward: process start and imports,
the CUDA context, building the model and, with ``embed.compile``, the compilation and the first
batches' warm-up. Two things remove it from the per-plate bill:

- ``embed.plates_per_job``: the workflow gives one job several plates (rules/embed.smk), which
  :func:`embed_model_plates` embeds one after the other with one model
  (:func:`phenoica.embed.embed_plate`). Each plate keeps its own
  output file, written atomically; a plate whose output already records the same work (its
  store's files, its metadata rows, the model and every setting that changes the embeddings:
  :func:`plate_work_key`) is kept, not redone, so a changed plate reruns alone; every plate's
  finished chunks stay on disk until all plates of the job are written, so a killed job resumes
  without redoing finished plates or chunks.
- ``embed.compile_cache``: a folder, shared by the jobs, that holds inductor's on-disk caches
  (FX graph, AOTAutograd and Triton kernels: ``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``),
  so that only the first job anywhere compiles from scratch.

All checks that can fail (the cache folder, the device, the plates' channels) run before any
plate is embedded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import torch
from torch import nn

from phenoica.embed._groups import PlateJob, check_group_channels
from phenoica.embed._options import EmbedOptions
from phenoica.embed._parts import embedding_metadata, parts_dir
from phenoica.embed._plate import PlateModel, embed_plate, model_identity, plate_image_rows, torch_threads
from phenoica.models import module_inputs, resolve_device
from phenoica.utils import get_logger

WORK_KEY = "work_sha256"
"""Key, in an embeddings parquet's metadata, of :func:`plate_work_key` (what it was made from)."""


@dataclass(frozen=True)
class EmbedJob:
    """What a job embeds with: model ``model_name`` built from its config entry (``options.spec``;
    weights from ``checkpoint``, None = the entry's seeded init), the job's settings read once
    from the config (:class:`~phenoica.embed.EmbedOptions`) and its CPU threads."""

    model_name: str
    checkpoint: Path | str | None
    options: EmbedOptions
    threads: int | None = None

    @property
    def spec(self) -> Mapping[str, Any]:
        """The model's ``models`` entry."""
        return self.options.spec


def check_compile_cache(path: Path | str) -> Path:
    """The cache folder, created if needed; ValueError naming ``embed.compile_cache`` if it
    cannot be created or written (checked by writing a file there)."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".writable-"):
            pass
    except OSError as exc:
        raise ValueError(
            f"embed.compile_cache: {folder} is not a writable folder ({type(exc).__name__}: {exc}); "
            "give a folder every embedding job can write (on a cluster, on the shared filesystem), or null"
        ) from None
    return folder


def use_compile_cache(folder: Path) -> None:
    """Point inductor's on-disk caches (FX graph + AOTAutograd: ``TORCHINDUCTOR_CACHE_DIR``;
    Triton kernels: ``TRITON_CACHE_DIR``) at ``folder`` for this process, and switch them on."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(folder / "triton")
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = True
    functorch_config.enable_autograd_cache = True


def compiled(model: nn.Module, embed: EmbedOptions, model_name: str, log: logging.Logger) -> nn.Module:
    """``torch.compile(model, options=embed.compile_options)``; an option torch does not know is
    a ValueError naming the config key and the option."""
    options = dict(embed.compile_options)
    try:
        runner = torch.compile(model, options=options or None)
    except RuntimeError as exc:
        if "optimization option" not in str(exc):
            raise
        unknown = str(exc).split(",")[0].removeprefix("Unexpected optimization option ")
        raise ValueError(
            f"embed.compile_options: torch.compile does not know the option {unknown!r} "
            f"(given {sorted(options)}; the names are those of torch._inductor.config, e.g. triton.cudagraphs)"
        ) from None
    log.info(
        "model %s: compiled with torch.compile%s (the first batches include compilation)",
        model_name,
        f", options {options}" if options else "",
    )
    return runner  # type: ignore[return-value]


def _edges_sha1(path: Path, span: int = 4096) -> str:
    """SHA-1 of a file's first and last ``span`` bytes (its header and its tail)."""
    h = hashlib.sha1()
    with open(path, "rb") as f:
        h.update(f.read(span))
        size = path.stat().st_size
        if size > span:
            f.seek(max(span, size - span))
            h.update(f.read(span))
    return h.hexdigest()


def store_fingerprint(store: Path) -> list[tuple[str, int, str]]:
    """(relative path, size, SHA-1 of its first and last 4 KiB) of every file of the store, sorted:
    changes when the store's content is rewritten, yet is the same for a copy of the same store (no
    modification times), so the embeddings' bytes do not depend on when the store was written."""
    files = [p for p in store.rglob("*") if p.is_file()]
    return sorted((str(p.relative_to(store)), p.stat().st_size, _edges_sha1(p)) for p in files)


def plate_work_key(plate: PlateJob, identity: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """SHA-256 of what one plate's embeddings are made from: the store's files, the plate's
    metadata rows, the model's identity and ``settings`` (crop size, intensity_max, channels,
    device type: what changes the numbers)."""
    rows = plate_image_rows(plate.metadata, plate.store)
    digest = hashlib.sha256()
    digest.update(json.dumps(store_fingerprint(plate.store)).encode())
    digest.update(json.dumps(list(map(str, rows.columns))).encode())
    digest.update(pd.util.hash_pandas_object(rows, index=False).to_numpy().tobytes())
    digest.update(json.dumps({"model": identity, **settings}, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def is_up_to_date(out: Path, key: str) -> bool:
    """Whether ``out`` exists and records the work key ``key``."""
    if not out.is_file():
        return False
    try:
        return embedding_metadata(out).get(WORK_KEY) == key
    except (OSError, ValueError):
        return False


def embed_model_plates(plates: Sequence[PlateJob], job: EmbedJob, log: logging.Logger | None = None) -> list[Path]:
    """The ``embed`` rule's function: embed ``plates`` with one model (module docstring).

    Checks first, before any plate is embedded: the compile cache folder (writable), the device
    (``embed.device``, ``embed.without_cuda``), the plates' channel sets (one set). Plates whose
    output records the same work are kept (their file's time is refreshed, so that Snakemake
    sees the job's outputs as newer than its inputs); if none is left, no model is built."""
    from phenoica.models import build_feature_extractor  # imports timm

    log = log or get_logger("phenoica.embed")
    embed = job.options
    cache = check_compile_cache(embed.compile_cache) if embed.compile_cache and embed.compile else None
    device = resolve_device(embed.device, embed.without_cuda, log)
    channels = job.spec.get("channels")
    fed = check_group_channels(plates, channels, f"models.{job.model_name}.channels")
    identity = model_identity(job.checkpoint, job.spec)
    settings = {
        "crop_size": embed.crop_size,
        "intensity_max": embed.intensity_max,
        "channels": fed,
        "device": device.type,
    }
    keys = {plate.out: plate_work_key(plate, identity, settings) for plate in plates}
    todo = [plate for plate in plates if not is_up_to_date(plate.out, keys[plate.out])]
    for plate in plates:
        if plate not in todo:
            log.info(
                "plate %s: %s is up to date (same store, metadata, model and settings); kept", plate.name, plate.out
            )
            plate.out.touch()
            shutil.rmtree(parts_dir(plate.out), ignore_errors=True)
    if not todo:
        return [plate.out for plate in plates]
    if cache is not None:
        use_compile_cache(cache)
        log.info("compile cache: %s (inductor's FX graph, AOTAutograd and Triton caches)", cache)
    with torch_threads(job.threads):
        model = build_feature_extractor(job.spec, len(fed), job.checkpoint, log=log)
    runner = compiled(model, embed, job.model_name, log) if embed.compile else model
    options = embed._replace(
        crop_size=embed.crop_size or model.img_size, device=str(device), threads=embed.threads or job.threads
    )
    inputs = module_inputs(model)  # the declared interface, also when the runner is compiled
    for i, plate in enumerate(todo):
        log.info("job: plate %d/%d of this job (%s)", i + 1, len(todo), plate.name)
        recorded = {"model_name": job.model_name, **model.options(), WORK_KEY: keys[plate.out]}
        plate_model = PlateModel(
            runner,
            inputs=inputs,
            identity=identity,
            channels=channels,
            channels_key=f"models.{job.model_name}.channels",
            normalize=model.normalize,
            feature_names=model.feature_names(fed),
            options=recorded,
        )
        embed_plate(plate.store, plate.metadata, plate_model, plate.out, options, log=log, keep_parts=len(plates) > 1)
    for plate in plates:
        shutil.rmtree(parts_dir(plate.out), ignore_errors=True)
    return [plate.out for plate in plates]


__all__ = [
    "WORK_KEY",
    "EmbedJob",
    "check_compile_cache",
    "compiled",
    "embed_model_plate",
    "embed_model_plates",
    "plate_work_key",
]


def embed_model_plate(
    store: Path | str,
    metadata: pd.DataFrame | Path | str,
    out: Path | str,
    job: EmbedJob,
    log: logging.Logger | None = None,
) -> Path:
    """One plate through :func:`embed_model_plates` (the ``embed`` rule's
    function for a job of one plate)."""
    embed_model_plates([PlateJob(Path(store), metadata, Path(out))], job, log=log)
    return Path(out)
