"""The whole screen checked once, when the DAG is built, before any job runs.

Per-plate jobs see one plate; rules that span plates (a plate in one batch, a guide under one
gene, a gene under one PertType, controls in every batch) and the fit between the plates and
the models (channel counts, image size against the crop) would otherwise surface late: after
other plates were ingested, a model trained, or other plates embedded. :func:`validate_screen`
reads the user's table (metadata or plate map) whole and only the geometry of each plate (store
metadata, file names and one image header, or HCS metadata), builds each model once (weights
read, no forward pass on data) and applies the checks the embed stage applies.

The workflow calls :func:`check_screen_once` when it builds the DAG (``rules/common.smk``), so
that every such error stops ``snakemake`` (a dry run too) before the first job. A passed check
is recorded (``results/screen/validated.json``) under a key of everything it read (the config
keys, the tables' per-plate digests, the sizes and times of store metadata and checkpoints):
later invocations, and cluster jobs, check only the key. Why not a ``validate_screen`` job that
plate jobs depend on: Snakemake (9.27) skips the jobs downstream of a job it must rerun when
they depend on it through an ``ancient`` input, so a rerun of the check (a plate added) would
hide the new plate's jobs until the next invocation; without ``ancient``, every plate would rerun.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from phenoica import screen
from phenoica.io import atomic_path, get_logger
from phenoica.screen import ScreenError, raise_problems

#: Raise when the checks change, so that screens recorded as valid are checked again.
CHECKS_VERSION = 1


@dataclass(frozen=True)
class PlateGeometry:
    """What the models need to know of a plate: its batch, channel names and image size."""

    batch: str
    channels: list[str]
    height: int
    width: int
    images: int | None = None  # images in the store (source zarr); None before ingest


def _by_plate(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {str(p): rows for p, rows in table.groupby(screen.PLATE, sort=False)}


def _zarr_geometry(cfg: Mapping[str, Any], plates: Mapping[str, str], problems: list[str]) -> dict[str, PlateGeometry]:
    from phenoica.workflow import user_table

    path = str(cfg["metadata"])
    table = screen.validate_screen_metadata(user_table(path), source=path)
    rows = _by_plate(table)
    out = {}
    for plate, batch in plates.items():
        store = Path(cfg["plates_dir"]) / f"{plate}.zarr"
        try:
            tiles = screen.open_plate(store)
            screen.check_plate_against_metadata(tiles, rows[plate], str(store))
            n, _, height, width = (int(v) for v in tiles.shape)
            out[plate] = PlateGeometry(batch, screen.plate_channels(store), height, width, n)
        except ScreenError as exc:
            problems.append(str(exc))
    return out


def _plate_map_geometry(
    cfg: Mapping[str, Any], plates: Mapping[str, str], problems: list[str]
) -> dict[str, PlateGeometry]:
    from phenoica import ingest
    from phenoica.workflow import user_table

    plate_map = ingest.validate_plate_map(user_table(cfg["plate_map"]), source=str(cfg["plate_map"]))
    raise_problems(str(cfg["plate_map"]), screen.control_problems(plate_map))
    out = {}
    for plate, batch in plates.items():
        try:
            if cfg["source"] == "images":
                channels, (h, w) = ingest.image_plate_geometry(
                    cfg["images_dir"], cfg["image_pattern"], plate, cfg["channels"]
                )
            elif cfg["source"] == "loaddata":  # issue 25
                from phenoica.loaddata import plate_geometry as loaddata_geometry

                channels, (h, w) = loaddata_geometry(cfg["loaddata"], cfg["loaddata_channels"], plate)
            else:
                channels, (h, w) = ingest.hcs_plate_geometry(Path(cfg["ome_zarr_dir"]) / f"{plate}.zarr")
            out[plate] = PlateGeometry(batch, channels, h, w)
        except ScreenError as exc:
            problems.append(str(exc))
    return out


def plate_geometry(
    screen_cfg: Mapping[str, Any],
    plates: Mapping[str, str],
    problems: list[str],
    demo: Mapping[str, Any] | None = None,
) -> dict[str, PlateGeometry]:
    """Each plate's geometry, from the screen's source (``config["screen"]``; demo: the
    ``demo`` image size and channels; zarr: the metadata table, validated whole, and each
    store's metadata; images / ome_zarr: the plate map, validated whole, and each plate's file
    names or HCS metadata). Per-plate problems are appended to ``problems``; a table that
    breaks the contract raises at once."""
    source = screen_cfg["source"]
    if source == "demo":
        if demo is None:
            raise ValueError("plate_geometry: source demo needs the demo section")
        size = int(demo["image_size"])
        return {p: PlateGeometry(b, list(demo["channels"]), size, size) for p, b in plates.items()}
    if source == "zarr":
        return _zarr_geometry(screen_cfg, plates, problems)
    if source in ("images", "ome_zarr", "loaddata"):
        return _plate_map_geometry(screen_cfg, plates, problems)
    raise ValueError(f"validate_screen: source {source!r} has no plates")


def _fed_channels(spec: Mapping[str, Any], geometry: PlateGeometry) -> tuple[list[str], list[str]]:
    """(the channels a plate feeds the model, the names of ``models.NAME.channels`` it lacks):
    ``models.NAME.channels`` when set, else every channel of the plate."""
    chosen = spec.get("channels")
    if not chosen:
        return list(geometry.channels), []
    return list(chosen), [c for c in chosen if c not in geometry.channels]


def _grouped(failed: Mapping[str, list[str]]) -> list[str]:
    """One problem per kind, naming its plates (five, then a count)."""
    out = []
    for why, plates in failed.items():
        more = f" and {len(plates) - 5} more" if len(plates) > 5 else ""
        out.append(f"plate(s) {plates[:5]}{more}: {why}")
    return out


def check_models(
    models: Mapping[str, Mapping[str, Any]],
    crop_size: int | None,
    geometry: Mapping[str, PlateGeometry],
    problems: list[str],
    log: logging.Logger | None = None,
) -> dict[str, dict[str, Any]]:
    """Each model against each plate, as the embed stage will check it: the channels it is fed
    (``models.NAME.channels`` present; the count the model takes; one count for a model trained
    on the screen unless its channel projection is shared), and the crop (``embed.crop_size``,
    else the model's ``img_size``) against the image size. Builds each model once per channel
    count (a checkpoint's weights are loaded strictly, so a checkpoint that does not fit the
    spec fails here too). ``models`` is ``config["models"]``, ``crop_size`` ``embed.crop_size``.
    Problems are appended to ``problems``; returns a summary per model."""
    import torch

    from phenoica.embed import model_in_chans, probe_feature_dim
    from phenoica.models.checkpoint import CheckpointError
    from phenoica.models.features import build_feature_extractor

    log = log or logging.getLogger("phenoica.validate")
    summary: dict[str, dict[str, Any]] = {}
    for name, spec in models.items():
        fed: dict[str, list[str]] = {}
        absent: dict[str, list[str]] = {}
        for plate, geo in geometry.items():
            channels, missing = _fed_channels(spec, geo)
            if missing:
                why = f"channel(s) {missing} named by config key models.{name}.channels are not in the plate's channels {geo.channels}"
                absent.setdefault(why, []).append(plate)
            else:
                fed[plate] = channels
        problems += _grouped(absent)
        built: dict[int, Any] = {}
        for n in sorted({len(c) for c in fed.values()}):
            try:
                built[n] = build_feature_extractor(spec, n, spec.get("checkpoint"), log=log)
            except (ScreenError, CheckpointError, ValueError) as exc:
                plates = [p for p, c in fed.items() if len(c) == n]
                problems.append(f"model {name} for the {n} channel(s) of plate(s) {plates[:5]}: {exc}")
        trained = not spec.get("checkpoint")
        counts = {p: len(c) for p, c in fed.items()}
        if trained and len(set(counts.values())) > 1 and any(model_in_chans(m) is not None for m in built.values()):
            problems.append(
                f"model {name} is trained on the screen, but its plates feed different channel counts "
                f"{dict(list(counts.items())[:8])}; name the channels every plate has in models.{name}.channels, "
                "or use channel_agnostic: true"
            )
        crops: dict[str, int] = {}
        failed: dict[str, list[str]] = {}  # one line per kind of problem, naming its plates
        for plate, channels in fed.items():
            model = built.get(len(channels))
            if model is None:
                continue
            geo = geometry[plate]
            crop = crops[plate] = int(crop_size or model.img_size)
            what = f"{geo.height}x{geo.width} images, {len(channels)} channel(s) {channels}"
            most = getattr(model, "max_in_chans", None)
            expected = model_in_chans(model)
            if geo.height < crop or geo.width < crop:
                why = f"{what}: smaller than model {name}'s crop size {crop} (the model's img_size, or embed.crop_size)"
            elif expected is not None and expected != len(channels):
                why = f"{what}: model {name} expects {expected} channel(s)"
            elif isinstance(most, int) and len(channels) > most:
                why = f"{what}: model {name} embeds at most {most} channels; choose up to {most} with models.{name}.channels"
            else:
                try:
                    probe_feature_dim(model, len(channels), crop, torch.device("cpu"), Path(f"model {name}"))
                    continue
                except ScreenError as exc:
                    why = f"{what}: {exc}"
            failed.setdefault(why, []).append(plate)
        problems += _grouped(failed)
        summary[name] = {
            "checkpoint": spec.get("checkpoint"),
            "crop_size": sorted(set(crops.values())),
            "channels_fed": sorted(set(counts.values())),
        }
    return summary


def validate_screen(
    screen_cfg: Mapping[str, Any],
    plates: Mapping[str, str],
    models: Mapping[str, Mapping[str, Any]],
    crop_size: int | None = None,
    demo: Mapping[str, Any] | None = None,
    out: Path | str | None = None,
    log: logging.Logger | None = None,
) -> dict[str, Any]:
    """Check the whole screen (:func:`plate_geometry`) and every model against it
    (:func:`check_models`); raise one ScreenError listing every problem, else return (and
    write to ``out`` atomically, as JSON) the plates' geometry and the models' crops.

    ``screen_cfg``, ``models``, ``crop_size`` and ``demo`` are ``config["screen"]``,
    ``config["models"]``, ``config["embed"]["crop_size"]`` and ``config["demo"]``; ``plates``
    is {plate: batch} (:func:`phenoica.workflow.screen_plates`).
    """
    log = log or get_logger("phenoica.validate")
    if not plates:
        raise ScreenError("validate_screen: the screen has no plates")
    problems: list[str] = []
    geometry = plate_geometry(screen_cfg, plates, problems, demo)
    summary = check_models(models, crop_size, geometry, problems, log) if geometry else {}
    raise_problems(f"screen ({screen_cfg['source']}, {len(plates)} plates)", problems)
    report = {
        "source": screen_cfg["source"],
        "plates": {p: asdict(g) for p, g in geometry.items()},
        "models": summary,
    }
    batches = sorted({g.batch for g in geometry.values()})
    log.info(
        "screen valid: %d plates in %d batches; model crop sizes %s",
        len(geometry),
        len(batches),
        {m: s["crop_size"] for m, s in summary.items()},
    )
    if out is not None:
        with atomic_path(out) as tmp:
            tmp.write_text(json.dumps(report, indent=1, sort_keys=True))
    return report


def _stat(path: Path | str) -> list[int] | None:
    """(size, modification time in ns) of a file, None if absent."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [int(st.st_size), int(st.st_mtime_ns)]


def screen_key(config: Mapping[str, Any], plates: Mapping[str, str]) -> str:
    """SHA-256 of everything :func:`validate_screen` reads for this config: the screen, demo
    geometry, model and crop keys, the plates, the per-plate digests of the user's table, and
    the size and time of each plate store's metadata, HCS plate's metadata and checkpoint.
    Cheap: no table is read beyond what building the DAG reads anyway."""
    from phenoica import workflow as wf

    cfg = config["screen"]
    source = cfg["source"]
    files: list[str] = [str(m["checkpoint"]) for m in config["models"].values() if m.get("checkpoint")]
    digests: dict[str, str] = {}
    if source == "zarr":
        digests = wf.plate_digests(str(cfg["metadata"]))
        for plate in plates:
            store = Path(cfg["plates_dir"]) / f"{plate}.zarr"
            files += [str(store / "zarr.json"), str(store / screen.TILES / "zarr.json")]
    elif source in ("images", "ome_zarr", "loaddata"):
        digests = wf.plate_digests(str(cfg["plate_map"]))
        if source == "loaddata":  # issue 25: a changed LoadData CSV is checked again
            from phenoica.loaddata import csv_paths

            files += csv_paths(cfg["loaddata"])
        if source == "ome_zarr":
            for plate in plates:
                store = Path(cfg["ome_zarr_dir"]) / f"{plate}.zarr"
                files += [str(store / name) for name in ("zarr.json", ".zattrs", ".zgroup")]
    parts = {
        "checks": CHECKS_VERSION,
        "screen": wf.job_params(config, "screen"),
        "demo": wf.job_params(config, "demo", keys=("image_size", "channels")) if source == "demo" else None,
        "models": wf.canonical(config["models"]),
        "crop_size": config["embed"]["crop_size"],
        "plates": dict(plates),
        "digests": digests,
        "files": {f: _stat(f) for f in files},
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def check_screen_once(
    config: Mapping[str, Any],
    plates: Mapping[str, str],
    record: Path | str,
    log: logging.Logger | None = None,
) -> dict[str, Any]:
    """:func:`validate_screen` for a validated workflow config, unless ``record`` says this very
    screen (same :func:`screen_key`) passed before. Raises ScreenError listing every problem;
    on success writes ``record`` (JSON: the key, the plates' geometry, the models' crops)."""
    key = screen_key(config, plates)
    record = Path(record)
    try:
        known = json.loads(record.read_text())
    except (OSError, ValueError):
        known = {}
    if known.get("key") == key:
        return known
    log = log or logging.getLogger("phenoica.validate")
    report = validate_screen(
        config["screen"], plates, config["models"], config["embed"]["crop_size"], config["demo"], log=log
    )
    report = {"key": key, **report}
    with atomic_path(record) as tmp:
        tmp.write_text(json.dumps(report, indent=1, sort_keys=True))
    return report
