"""OME-Zarr HCS plates into the data contract.

NGFF plate layout, zarr v2 / NGFF 0.4 with attributes at the top level, or zarr v3 / NGFF 0.5
with attributes under ``"ome"``. Each field's full-resolution array (the first dataset of its
first multiscale) is read at t = 0; a z stack is reduced by its maximum projection; channel
names come from ``omero.channels[].label`` (else ``c0, c1, ...``). The site of an image is the
index of its field in the well's ``images`` list (0-based). The plate's name in the plate map
is the store's folder name without ``.zarr`` (``P1.zarr`` -> ``P1``; see ``hcs_plate_name``).
A well of the HCS plate that the plate map lacks is an error; plate-map wells absent from the
HCS plate are a warning in the log.

Well names are normalized and the plate map is read as :mod:`phenoica.screen._plate_map` says;
every failure raises ``ScreenError`` naming the array or well at fault and leaves neither a
store nor a metadata file behind.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import pandas as pd
import zarr

from phenoica.contract import SITE, SUPPORTED_DTYPES, WELL, ScreenError
from phenoica.screen._options import OmeZarrIngestOptions
from phenoica.screen._plate_map import (
    natural_key,
    natural_sorted,
    normalize_well,
    plate_map_rows,
    plate_metadata,
    warn_missing_wells,
    write_plate_outputs,
)
from phenoica.utils import get_logger


def hcs_plate_name(path: Path | str) -> str:
    """The plate name of an HCS store: its folder name without ``.zarr`` (``P1.zarr`` -> ``P1``)."""
    name = Path(path).name
    return name[: -len(".zarr")] if name.lower().endswith(".zarr") else name


def _ngff(node: zarr.Group) -> dict[str, Any]:
    """NGFF attributes of a group: under ``"ome"`` (NGFF 0.5, zarr v3) or top level (0.4)."""
    attrs = dict(node.attrs)
    ome = attrs.get("ome")
    return dict(ome) if isinstance(ome, Mapping) else attrs


@dataclass(frozen=True)
class _Field:
    """One field (site) of an HCS well: where its level-0 array is and how to read it."""

    well: str
    site: int
    array: zarr.Array
    name: str
    axes: tuple[str, ...]
    channels: tuple[str, ...]

    @property
    def size_cyx(self) -> tuple[int, int, int]:
        shape = dict(zip(self.axes, self.array.shape))
        return shape.get("c", 1), shape["y"], shape["x"]


def _axes_of(multiscale: Mapping[str, Any], ndim: int, where: str) -> tuple[str, ...]:
    """Axis names of a multiscale (NGFF 0.4+ dicts, 0.3 strings, or 5-D tczyx before 0.3)."""
    axes = multiscale.get("axes")
    if axes is None:
        if ndim == 5:
            return ("t", "c", "z", "y", "x")
        raise ScreenError(f"{where}: multiscales has no 'axes' and the array is {ndim}-D, not tczyx")
    names = tuple(str(a["name"] if isinstance(a, Mapping) else a).lower() for a in axes)
    if len(names) != ndim:
        raise ScreenError(f"{where}: axes {list(names)} do not match the array's {ndim} dimensions")
    unknown = [n for n in names if n not in ("t", "c", "z", "y", "x")]
    if unknown or len(set(names)) != len(names) or not {"y", "x"} <= set(names):
        raise ScreenError(f"{where}: axes {list(names)} not supported; expected a subset of t, c, z, y, x with y, x")
    return names


def _hcs_fields(plate_path: Path, log: logging.Logger) -> list[_Field]:
    """Every field of every well of an HCS plate, with its level-0 array, axes and channels."""
    if not plate_path.exists():
        raise ScreenError(f"{plate_path}: OME-Zarr plate not found")
    try:
        root = zarr.open_group(str(plate_path), mode="r")
    except Exception as exc:  # zarr raises FileNotFoundError, ValueError, KeyError... for non-groups
        raise ScreenError(f"{plate_path}: not a readable zarr group ({type(exc).__name__}: {exc})") from exc
    meta = _ngff(root).get("plate")
    if not isinstance(meta, Mapping) or not meta.get("wells"):
        raise ScreenError(f"{plate_path}: no NGFF 'plate' attributes with 'wells'; not an OME-Zarr HCS plate")
    row_names = [str(r["name"]) for r in meta.get("rows", [])]
    col_names = [str(c["name"]) for c in meta.get("columns", [])]
    fields: list[_Field] = []
    for entry in meta["wells"]:
        well_path = str(entry["path"]).strip("/")
        parts = well_path.split("/")
        if "rowIndex" in entry and "columnIndex" in entry and row_names and col_names:
            row, col = row_names[int(entry["rowIndex"])], col_names[int(entry["columnIndex"])]
        elif len(parts) == 2:
            row, col = parts
        else:
            raise ScreenError(f"{plate_path}: well path {well_path!r} is not 'row/column'")
        well = normalize_well(f"{row}{col}")
        where = f"{plate_path}/{well_path}"
        try:
            well_group = root[well_path]
        except KeyError:
            raise ScreenError(f"{where}: well {well} is listed in the plate attributes but missing") from None
        images = (_ngff(well_group).get("well") or {}).get("images") or []
        if not images:
            log.warning("%s: well %s has no fields ('well' attributes without images); skipped", where, well)
        for site, image in enumerate(images):
            fields.append(_hcs_field(well_group, well, site, f"{where}/{image['path']}", str(image["path"])))
    return fields


def _hcs_field(well_group: zarr.Group, well: str, site: int, where: str, path: str) -> _Field:
    """Open one field's level-0 array and read its axes and channel labels."""
    try:
        group = well_group[path]
    except KeyError:
        raise ScreenError(f"{where}: field {site} of well {well} is listed but missing") from None
    attrs = _ngff(group)
    multiscales = attrs.get("multiscales") or []
    if not multiscales or not multiscales[0].get("datasets"):
        raise ScreenError(f"{where}: no 'multiscales' datasets; not an NGFF image")
    dataset = str(multiscales[0]["datasets"][0]["path"])
    try:
        array = group[dataset]
    except KeyError:
        raise ScreenError(f"{where}/{dataset}: level-0 array listed in multiscales but missing") from None
    if not isinstance(array, zarr.Array):
        raise ScreenError(f"{where}/{dataset}: expected an array, found a group")
    axes = _axes_of(multiscales[0], array.ndim, f"{where}/{dataset}")
    if np.dtype(array.dtype) not in SUPPORTED_DTYPES:
        raise ScreenError(f"{where}/{dataset}: unsupported pixel dtype {array.dtype}; expected uint8 or uint16")
    n_channels = dict(zip(axes, array.shape)).get("c", 1)
    labels = [c.get("label") for c in (attrs.get("omero") or {}).get("channels", [])]
    if len(labels) == n_channels and all(labels):
        channels = tuple(str(label) for label in labels)
    else:
        channels = tuple(f"c{i}" for i in range(n_channels))
    if len(set(channels)) != len(channels):
        raise ScreenError(f"{where}: channel labels {list(channels)} are not unique")
    return _Field(well, site, array, f"{where}/{dataset}", axes, channels)


def _read_hcs_field(field: _Field) -> np.ndarray:
    """A field's image as (C, Y, X): t = 0, maximum projection over z."""
    index = tuple(0 if a == "t" else slice(None) for a in field.axes)
    data = np.asarray(field.array[index])
    kept = [a for a in field.axes if a != "t"]
    for axis in ("c", "z"):
        if axis not in kept:
            data = data[np.newaxis]
            kept.insert(0, axis)
    data = np.transpose(data, [kept.index(a) for a in ("c", "z", "y", "x")])
    return data.max(axis=1)


def ingest_ome_zarr_plate(
    plate_path: Path | str,
    plate_map: pd.DataFrame,
    plate: str,
    store: Path | str,
    metadata_out: Path | str,
    options: OmeZarrIngestOptions,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """An OME-Zarr HCS plate -> its plate store (chunks of ``options.chunk_images`` images) and
    metadata table.

    One image per field (site = field index), full resolution, t = 0, maximum projection over
    z, channels from omero labels (else c0..). Returns the validated metadata written to
    ``metadata_out``. Raises ScreenError naming the well or array for a well that is not in
    the plate map, fields of different channels, size or dtype, and unsupported axes/dtypes.
    """
    log = log or get_logger("phenoica.ingest")
    chunk_images = options.chunk_images
    plate_path = Path(plate_path)
    plate = str(plate)
    rows = plate_map_rows(plate_map, plate)
    if hcs_plate_name(plate_path) != plate:
        log.info("plate %s: reading HCS store %s (folder name differs from the plate name)", plate, plate_path)
    fields = _hcs_fields(plate_path, log)
    if not fields:
        raise ScreenError(f"{plate_path}: the HCS plate has no fields")
    mapped = set(rows[WELL])
    unmapped = natural_sorted({f.well for f in fields} - mapped)
    if unmapped:
        raise ScreenError(
            f"{plate_path}: well(s) {unmapped[:20]} of the HCS plate are not in the plate map "
            f"{rows.attrs.get('source', '')} for plate {plate!r}"
        )
    first = fields[0]
    for f in fields[1:]:
        if f.channels != first.channels:
            raise ScreenError(
                f"{f.name}: channels {list(f.channels)} differ from {list(first.channels)} of {first.name}"
            )
        if f.size_cyx != first.size_cyx:
            raise ScreenError(
                f"{f.name}: (C, Y, X) {f.size_cyx} differs from {first.size_cyx} of {first.name}; "
                "all fields of a plate must have one size"
            )
        if f.array.dtype != first.array.dtype:
            raise ScreenError(f"{f.name}: dtype {f.array.dtype} differs from {first.array.dtype} of {first.name}")
    fields.sort(key=lambda f: (natural_key(f.well), f.site))
    warn_missing_wells(rows, {f.well for f in fields}, plate, log)
    sizes = dict(zip(first.axes, first.array.shape))
    if sizes.get("t", 1) > 1 or sizes.get("z", 1) > 1:
        log.info("plate %s: taking t=0 of %d and the maximum over z of %d", plate, sizes.get("t", 1), sizes.get("z", 1))

    sites = pd.DataFrame([(f.well, f.site) for f in fields], columns=[WELL, SITE])
    metadata = plate_metadata(rows, sites, str(metadata_out))
    channels = list(first.channels)
    dtype = np.dtype(first.array.dtype)
    n_channels, height, width = first.size_cyx
    shape = (len(fields), n_channels, height, width)
    log.info("plate %s: %d fields x %d channels %s of %s %s", plate, shape[0], shape[1], channels, shape[2:], dtype)

    def blocks() -> Iterator[np.ndarray]:
        for start in range(0, len(fields), chunk_images):
            part = fields[start : start + chunk_images]
            block = np.empty((len(part), *shape[1:]), dtype=dtype)
            for i, f in enumerate(part):
                block[i] = _read_hcs_field(f)
            yield block

    write_plate_outputs(store, metadata_out, metadata, blocks(), channels, shape, dtype, chunk_images)
    log.info("plate %s: wrote %s and %s", plate, store, metadata_out)
    return metadata


def hcs_plate_geometry(plate_path: Path | str) -> tuple[list[str], tuple[int, int]]:
    """(channel names, (height, width)) of an OME-Zarr HCS plate's first field, from its
    metadata alone (no pixels read)."""
    fields = _hcs_fields(Path(plate_path), logging.getLogger("phenoica.ingest"))
    if not fields:
        raise ScreenError(f"{plate_path}: the HCS plate has no fields")
    _, height, width = fields[0].size_cyx
    return list(fields[0].channels), (int(height), int(width))
