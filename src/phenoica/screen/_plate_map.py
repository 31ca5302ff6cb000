"""The plate map, well names and the steps every image source shares (images, OME-Zarr, LoadData).

Each converter (:mod:`phenoica.screen._images`, :mod:`phenoica.screen._ome_zarr`,
:mod:`phenoica.screen._loaddata`) works one plate at a time (the workflow runs one job per plate)
and writes the plate's tile store (``phenoica.contract.write_plate``, streamed in blocks of images
so a big plate is never held in memory whole) and the plate's metadata table (one row per image):
:func:`write_plate_outputs`.

The plate map is the authority on what a well holds: one row per (plate, well) with
``Metadata_Batch, Metadata_Plate, Metadata_Well, Metadata_Gene, Metadata_Guide,
Metadata_PertType`` and any extra ``Metadata_*`` columns, which are carried through
untouched. Each image's metadata row is its well's plate-map row plus ``Metadata_Site`` and
``Metadata_ImageIndex`` (0..n-1 in (well, site) order, wells in natural order):
:func:`plate_metadata`.

Well names. Names of the form letters + column number (``A1``, ``a01``, ``AB012``) are
normalized to upper-case letters + a column of at least two digits (``A01``, ``AB12``), in
the plate map, in file names and in HCS plates alike, so ``A1`` and ``A01`` match each other
and the metadata always says ``A01``. Other names (``r01c01``, ``well_7``) are kept verbatim.

Every failure raises ``ScreenError`` naming the file, array, well or column at fault, and
leaves neither a store nor a metadata file behind.
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import pandas as pd

from phenoica.contract import (
    BATCH,
    GENE,
    GUIDE,
    IMAGE_INDEX,
    KEY_COLUMNS,
    PERT_TYPE,
    PERT_TYPES,
    PLATE,
    REQUIRED_COLUMNS,
    SITE,
    WELL,
    ScreenError,
    check_columns,
    name_problems,
    normalize_names,
    raise_problems,
    relation_problems,
    validate_metadata,
    write_plate,
)
from phenoica.utils import read_table, write_parquet

PLATE_MAP_COLUMNS: tuple[str, ...] = (BATCH, PLATE, WELL, GENE, GUIDE, PERT_TYPE)
_WELL_RE = re.compile(r"^([A-Za-z]{1,2})0*(\d{1,3})$")


# --------------------------------------------------------------------------- names


def natural_key(text: str) -> list[Any]:
    """Sort key that orders embedded numbers by value: ``w2 < w10``, ``A02 < A10``."""
    parts = re.split(r"(\d+)", str(text))
    return [int(p) if i % 2 else p.lower() for i, p in enumerate(parts)]


def natural_sorted(values: Iterable[str]) -> list[str]:
    """``values`` sorted naturally (see ``natural_key``)."""
    return sorted(values, key=natural_key)


def normalize_well(well: str) -> str:
    """``A1``/``a01`` -> ``A01``; names not of the form letters + number are returned as given."""
    text = str(well).strip()
    m = _WELL_RE.match(text)
    if m is None:
        return text
    return f"{m.group(1).upper()}{int(m.group(2)):02d}"


# --------------------------------------------------------------------------- plate map


def validate_plate_map(df: pd.DataFrame, source: str | None = None) -> pd.DataFrame:
    """Check a per-well plate map and return a copy with string keys and normalized wells.

    Raises ScreenError naming ``source`` (default: ``df.attrs["source"]`` or "plate map") and
    the column or rows at fault for: no rows, missing required columns (all of them, with the
    column probably meant), a column that is not ``Metadata_*``, a ``Metadata_Site``/
    ``Metadata_ImageIndex`` column (ingest sets those), missing values, a PertType other than
    control/perturbation, duplicate (plate, well), and the data contract's relations
    (:func:`phenoica.contract.relation_problems`: a guide under two genes, a gene under both
    PertTypes, a plate in two batches), a name that is not plain text
    (:func:`phenoica.contract.name_problems`). Names lose surrounding whitespace
    (:func:`phenoica.contract.normalize_names`).
    """
    source = source or str(df.attrs.get("source", "plate map"))
    if len(df) == 0:
        raise ScreenError(f"{source}: the plate map has no rows; expected one row per well")
    check_columns(df.columns, PLATE_MAP_COLUMNS, source, "a plate map needs")
    other = [c for c in df.columns if not str(c).startswith("Metadata_")]
    if other:
        raise ScreenError(
            f"{source}: column(s) {other} are not Metadata_* columns; rename them Metadata_<name> "
            "to carry them through, or drop them"
        )
    per_image = [c for c in (SITE, IMAGE_INDEX) if c in df.columns]
    if per_image:
        raise ScreenError(
            f"{source}: column(s) {per_image} are per image; a plate map has one row per well and ingest sets them"
        )
    out = normalize_names(df)
    out.attrs["source"] = source
    for col in PLATE_MAP_COLUMNS:
        bad = out[col].isna()
        if bad.any():
            rows = [int(r) for r in np.flatnonzero(bad.to_numpy())[:5]]
            raise ScreenError(f"{source}: column {col} has missing values at row(s) {rows}")
    raise_problems(source, name_problems(out, KEY_COLUMNS))
    out[WELL] = out[WELL].map(normalize_well).astype(str)
    bad_type = ~out[PERT_TYPE].isin(PERT_TYPES)
    if bad_type.any():
        row = int(np.flatnonzero(bad_type.to_numpy())[0])
        raise ScreenError(
            f"{source}: column {PERT_TYPE} row {row} is {out[PERT_TYPE].iloc[row]!r}; expected one of {PERT_TYPES}"
        )
    dup = out.duplicated([PLATE, WELL], keep=False)
    if dup.any():
        rows = [int(r) for r in np.flatnonzero(dup.to_numpy())[:6]]
        first = out.iloc[rows[0]]
        raise ScreenError(
            f"{source}: duplicate (plate, well) ({first[PLATE]}, {first[WELL]}) at rows {rows} "
            "(wells compared after normalizing A1 -> A01); a plate map has one row per well"
        )
    raise_problems(source, relation_problems(out))
    return out


def read_plate_map(path: Path | str) -> pd.DataFrame:
    """Read (CSV or parquet) and validate a per-well plate map; see ``validate_plate_map``."""
    df = read_table(path, text_columns=KEY_COLUMNS)
    return validate_plate_map(df, source=str(path))


def plate_map_rows(plate_map: pd.DataFrame, plate: str) -> pd.DataFrame:
    """The validated plate-map rows of one plate; ScreenError if the plate is not there."""
    pm = validate_plate_map(plate_map)
    rows = pm[pm[PLATE] == str(plate)].reset_index(drop=True)
    rows.attrs["source"] = pm.attrs["source"]
    if rows.empty:
        known = natural_sorted(pm[PLATE].unique().tolist())[:10]
        raise ScreenError(f"{pm.attrs['source']}: no rows for plate {plate!r}; plates there include {known}")
    return rows


# --------------------------------------------------------------------------- writing a plate


def warn_missing_wells(rows: pd.DataFrame, present: set[str], plate: str, log: logging.Logger) -> None:
    """Log (warning) the plate-map wells of ``plate`` that have no image."""
    absent = natural_sorted([w for w in rows[WELL] if w not in present])
    if absent:
        log.warning("plate %s: %d plate-map well(s) have no image: %s", plate, len(absent), absent[:20])


def plate_metadata(rows: pd.DataFrame, sites: pd.DataFrame, source: str) -> pd.DataFrame:
    """Plate-map rows x sites -> validated per-image metadata, image index in ``sites`` order."""
    merged = sites.merge(rows, on=WELL, how="left", validate="many_to_one")
    merged[IMAGE_INDEX] = np.arange(len(merged), dtype=np.int64)
    extras = [c for c in rows.columns if c not in REQUIRED_COLUMNS]
    merged = merged[list(REQUIRED_COLUMNS) + extras]
    merged.attrs = {}
    return validate_metadata(merged, source=source)


def write_plate_outputs(
    store: Path | str,
    metadata_out: Path | str,
    metadata: pd.DataFrame,
    blocks: Iterator[np.ndarray],
    channels: list[str],
    shape: tuple[int, int, int, int],
    dtype: np.dtype,
    chunk_images: int,
) -> None:
    """Stream the tiles into the store, then write the metadata; neither is left on failure."""
    if chunk_images < 1:
        raise ValueError(f"chunk_images must be >= 1, got {chunk_images}")
    write_plate(store, blocks, channels, shape=shape, dtype=dtype, chunk_images=chunk_images)
    try:
        write_parquet(metadata, metadata_out)
    except BaseException:
        shutil.rmtree(store, ignore_errors=True)
        raise
