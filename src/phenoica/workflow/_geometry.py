"""What the models need to know of each plate before any job: its batch, channels and image size,
read from the plate stores (a zarr screen) or the plate map and the image files' headers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from phenoica.contract import (
    PLATE,
    ScreenError,
    check_plate_against_metadata,
    control_problems,
    missing_chunk_problems,
    open_plate,
    plate_channels,
    raise_problems,
    validate_screen_metadata,
)


@dataclass(frozen=True)
class PlateGeometry:
    """What the models need to know of a plate: its batch, channel names and image size."""

    batch: str
    channels: list[str]
    height: int
    width: int
    images: int | None = None  # images in the store (source zarr); None before ingest


def _by_plate(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {str(p): rows for p, rows in table.groupby(PLATE, sort=False)}


def _zarr_geometry(cfg: Mapping[str, Any], plates: Mapping[str, str], problems: list[str]) -> dict[str, PlateGeometry]:
    from phenoica.workflow._dag import user_table

    path = str(cfg["metadata"])
    table = validate_screen_metadata(user_table(path), source=path)
    rows = _by_plate(table)
    out = {}
    for plate, batch in plates.items():
        store = Path(cfg["plates_dir"]) / f"{plate}.zarr"
        try:
            tiles = open_plate(store)
            check_plate_against_metadata(tiles, rows[plate], str(store))
            problems += missing_chunk_problems(store, plate, tiles)  # absent chunks read as blank images
            n, _, height, width = (int(v) for v in tiles.shape)
            out[plate] = PlateGeometry(batch, plate_channels(store), height, width, n)
        except ScreenError as exc:
            problems.append(str(exc))
    return out


def _plate_map_geometry(
    cfg: Mapping[str, Any], plates: Mapping[str, str], problems: list[str]
) -> dict[str, PlateGeometry]:
    from phenoica.screen import hcs_plate_geometry, image_plate_geometry, validate_plate_map
    from phenoica.workflow._dag import user_table

    plate_map = validate_plate_map(user_table(cfg["plate_map"]), source=str(cfg["plate_map"]))
    raise_problems(str(cfg["plate_map"]), control_problems(plate_map))
    out = {}
    for plate, batch in plates.items():
        try:
            if cfg["source"] == "images":
                channels, (h, w) = image_plate_geometry(cfg["images_dir"], cfg["image_pattern"], plate, cfg["channels"])
            elif cfg["source"] == "loaddata":
                from phenoica.screen import plate_geometry as loaddata_geometry

                channels, (h, w) = loaddata_geometry(
                    cfg["loaddata"], cfg["loaddata_channels"], plate, cfg["loaddata_illum"]
                )
            else:
                channels, (h, w) = hcs_plate_geometry(Path(cfg["ome_zarr_dir"]) / f"{plate}.zarr")
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
