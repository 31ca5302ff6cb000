"""The data contract: screen metadata, plate stores and embedding tables.

Metadata: one row per image (site), ``Metadata_*`` columns (pycytominer / copairs idiom).
Plate store: a Zarr v3 group ``{plate}.zarr`` with array ``tiles`` (n_images, C, H, W), uint8
or uint16, chunked along images, attribute ``channels``.
Embeddings: all ``Metadata_*`` columns plus float32 ``emb_0000 ... emb_{D-1}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import zarr

from phenoica.io import atomic_path, read_table

BATCH = "Metadata_Batch"
PLATE = "Metadata_Plate"
WELL = "Metadata_Well"
SITE = "Metadata_Site"
GENE = "Metadata_Gene"
GUIDE = "Metadata_Guide"
PERT_TYPE = "Metadata_PertType"
IMAGE_INDEX = "Metadata_ImageIndex"

REQUIRED_COLUMNS: tuple[str, ...] = (BATCH, PLATE, WELL, SITE, GENE, GUIDE, PERT_TYPE, IMAGE_INDEX)
CONTROL = "control"
PERTURBATION = "perturbation"
PERT_TYPES = (CONTROL, PERTURBATION)
TILES = "tiles"
SUPPORTED_DTYPES = (np.dtype("uint8"), np.dtype("uint16"))
FEATURE_PREFIX = "emb_"


class ScreenError(ValueError):
    """Input that breaks the data contract; the message names file, column or row."""


def feature_name(i: int) -> str:
    """Name of embedding feature ``i``: ``emb_0000``."""
    return f"{FEATURE_PREFIX}{i:04d}"


def metadata_columns(df: pd.DataFrame) -> list[str]:
    """The ``Metadata_*`` columns of a table, in order."""
    return [c for c in df.columns if str(c).startswith("Metadata_")]


def feature_columns(df: pd.DataFrame) -> list[str]:
    """The feature columns of a table: everything that is not ``Metadata_*``."""
    return [c for c in df.columns if not str(c).startswith("Metadata_")]


def validate_metadata(df: pd.DataFrame, source: str = "metadata") -> pd.DataFrame:
    """Check a metadata table against the contract and return it with normalized dtypes.

    Raises ScreenError naming ``source`` and the column or rows at fault for: a missing
    required column, missing values, a PertType other than control/perturbation, duplicate
    (plate, well, site), duplicate (plate, image index), a negative image index, a plate in
    two batches, and a gene listed under two PertTypes.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ScreenError(f"{source}: missing required column(s) {missing}; expected {list(REQUIRED_COLUMNS)}")
    df = df.copy()
    for col in REQUIRED_COLUMNS:
        bad = df[col].isna()
        if bad.any():
            rows = [int(r) for r in np.flatnonzero(bad.to_numpy())[:5]]
            raise ScreenError(f"{source}: column {col} has missing values at row(s) {rows}")
    for col in (BATCH, PLATE, WELL, GENE, GUIDE, PERT_TYPE):
        df[col] = df[col].astype(str)
    for col in (SITE, IMAGE_INDEX):
        try:
            df[col] = df[col].astype(np.int64)
        except (TypeError, ValueError) as exc:
            raise ScreenError(f"{source}: column {col} must hold integers ({exc})") from None
    bad_type = ~df[PERT_TYPE].isin(PERT_TYPES)
    if bad_type.any():
        row = int(np.flatnonzero(bad_type.to_numpy())[0])
        raise ScreenError(
            f"{source}: column {PERT_TYPE} row {row} is {df[PERT_TYPE].iloc[row]!r}; expected one of {PERT_TYPES}"
        )
    dup = df.duplicated([PLATE, WELL, SITE], keep=False)
    if dup.any():
        rows = [int(r) for r in np.flatnonzero(dup.to_numpy())[:6]]
        first = df.iloc[rows[0]]
        raise ScreenError(
            f"{source}: duplicate (plate, well, site) ({first[PLATE]}, {first[WELL]}, {first[SITE]}) "
            f"at rows {rows}; each image must appear once"
        )
    dup = df.duplicated([PLATE, IMAGE_INDEX], keep=False)
    if dup.any():
        rows = [int(r) for r in np.flatnonzero(dup.to_numpy())[:6]]
        raise ScreenError(f"{source}: duplicate ({PLATE}, {IMAGE_INDEX}) at rows {rows}")
    neg = df[IMAGE_INDEX] < 0
    if neg.any():
        row = int(np.flatnonzero(neg.to_numpy())[0])
        raise ScreenError(f"{source}: column {IMAGE_INDEX} row {row} is negative")
    batches_per_plate = df.groupby(PLATE)[BATCH].nunique()
    if (batches_per_plate > 1).any():
        plate = batches_per_plate[batches_per_plate > 1].index[0]
        raise ScreenError(f"{source}: plate {plate!r} appears in more than one {BATCH}")
    types_per_gene = df.groupby(GENE)[PERT_TYPE].nunique()
    if (types_per_gene > 1).any():
        gene = types_per_gene[types_per_gene > 1].index[0]
        raise ScreenError(f"{source}: gene {gene!r} is listed under both PertTypes (control and perturbation)")
    return df


PROFILE_COLUMNS: tuple[str, ...] = (BATCH, PLATE, GENE, GUIDE, PERT_TYPE)


def validate_profile_metadata(df: pd.DataFrame, source: str = "profiles") -> None:
    """Check what the analysis stages need of a profile table (image- or well-level, or
    embeddings from elsewhere): the batch/plate/gene/guide/PertType columns, without missing
    values, PertTypes control/perturbation, and no gene under two PertTypes."""
    missing = [c for c in PROFILE_COLUMNS if c not in df.columns]
    if missing:
        raise ScreenError(f"{source}: missing metadata column(s) {missing}; expected {list(PROFILE_COLUMNS)}")
    for col in PROFILE_COLUMNS:
        bad = df[col].isna()
        if bad.any():
            rows = [int(r) for r in np.flatnonzero(bad.to_numpy())[:5]]
            raise ScreenError(f"{source}: column {col} has missing values at row(s) {rows}")
    bad_type = ~df[PERT_TYPE].astype(str).isin(PERT_TYPES)
    if bad_type.any():
        row = int(np.flatnonzero(bad_type.to_numpy())[0])
        raise ScreenError(
            f"{source}: column {PERT_TYPE} row {row} is {df[PERT_TYPE].iloc[row]!r}; expected one of {PERT_TYPES}"
        )
    types_per_gene = df.groupby(GENE)[PERT_TYPE].nunique()
    if (types_per_gene > 1).any():
        gene = types_per_gene[types_per_gene > 1].index[0]
        raise ScreenError(f"{source}: gene {gene!r} is listed under both PertTypes (control and perturbation)")


def read_metadata(path: Path | str) -> pd.DataFrame:
    """Read and validate a metadata table (parquet or CSV)."""
    return validate_metadata(read_table(path), source=str(path))


def read_plate_metadata(path: Path | str, plate: str) -> pd.DataFrame:
    """One plate's validated rows of a metadata table, ordered by image index.

    Parquet tables are read with a row filter, so each per-plate job reads its own rows, not
    the whole screen's (cross-plate rules - a plate in one batch, a gene under one PertType -
    are checked when the DAG is built and when profiles are gathered).
    """
    path = Path(path)
    if path.suffix.lower() in {".parquet", ".pq"}:
        if not path.exists():
            raise FileNotFoundError(f"{path}: file not found")
        table = pd.read_parquet(path, filters=[(PLATE, "==", plate)])
        if table.empty:  # plate names stored as non-strings: filter after reading
            table = read_table(path)
            table = table[table[PLATE].astype(str) == plate]
    else:
        table = read_table(path)
        table = table[table[PLATE].astype(str) == plate]
    if table.empty:
        raise ScreenError(f"{path}: no rows for plate {plate!r}")
    rows = validate_metadata(table.reset_index(drop=True), source=f"{path} (plate {plate})")
    return rows.sort_values(IMAGE_INDEX).reset_index(drop=True)


def plates_of(metadata: pd.DataFrame) -> list[str]:
    """Plate names in order of first appearance."""
    return list(dict.fromkeys(metadata[PLATE].astype(str)))


def open_plate(path: Path | str) -> zarr.Array:
    """Open a plate store's ``tiles`` array read-only, checking shape and dtype."""
    path = Path(path)
    if not path.exists():
        raise ScreenError(f"{path}: plate store not found")
    try:
        group = zarr.open_group(str(path), mode="r")
        tiles = group[TILES]
    except (KeyError, FileNotFoundError, ValueError) as exc:
        raise ScreenError(f"{path}: not a plate store with a '{TILES}' array ({exc})") from None
    if tiles.ndim != 4:
        raise ScreenError(f"{path}: '{TILES}' must be 4-D (n_images, C, H, W), got shape {tiles.shape}")
    if np.dtype(tiles.dtype) not in SUPPORTED_DTYPES:
        raise ScreenError(f"{path}: unsupported dtype {tiles.dtype}; expected uint8 or uint16")
    return tiles


def plate_channels(path: Path | str) -> list[str]:
    """Channel names stored in a plate store's attributes (``channels``)."""
    group = zarr.open_group(str(path), mode="r")
    channels = group.attrs.get("channels") or group[TILES].attrs.get("channels")
    if channels is None:
        n = group[TILES].shape[1]
        return [f"ch{i}" for i in range(n)]
    return list(channels)


def write_plate(
    path: Path | str,
    tiles: np.ndarray | Iterable[np.ndarray],
    channels: Sequence[str],
    shape: tuple[int, int, int, int] | None = None,
    dtype: np.dtype | str | None = None,
    chunk_images: int = 64,
) -> Path:
    """Write a plate store atomically.

    ``tiles`` is either a whole array (n, C, H, W) or an iterable of blocks along images (then
    ``shape`` and ``dtype`` are required), so plates larger than memory stream through.
    """
    path = Path(path)
    if isinstance(tiles, np.ndarray):
        shape, dtype, blocks = tiles.shape, tiles.dtype, [tiles]
    else:
        if shape is None or dtype is None:
            raise ValueError("write_plate: shape and dtype are required when tiles is an iterable")
        blocks = tiles
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise ScreenError(f"{path}: unsupported dtype {dtype}; expected uint8 or uint16")
    if len(shape) != 4 or shape[1] != len(channels):
        raise ScreenError(f"{path}: tiles shape {shape} does not match {len(channels)} channels {list(channels)}")
    with atomic_path(path) as tmp:
        group = zarr.open_group(str(tmp), mode="w", zarr_format=3)
        group.attrs["channels"] = list(channels)
        arr = group.create_array(
            TILES, shape=shape, dtype=dtype, chunks=(max(1, min(chunk_images, shape[0])), *shape[1:])
        )
        arr.attrs["channels"] = list(channels)
        start = 0
        for block in blocks:
            block = np.asarray(block)
            arr[start : start + block.shape[0]] = block
            start += block.shape[0]
        if start != shape[0]:
            raise ScreenError(f"{path}: wrote {start} images, expected {shape[0]}")
    return path


def check_plate_against_metadata(tiles: zarr.Array, plate_rows: pd.DataFrame, store: str) -> None:
    """Every image index of the plate's metadata rows must exist in its store."""
    n = tiles.shape[0]
    bad = plate_rows[(plate_rows[IMAGE_INDEX] >= n) | (plate_rows[IMAGE_INDEX] < 0)]
    if len(bad):
        row = bad.iloc[0]
        raise ScreenError(
            f"{store}: metadata row (plate {row[PLATE]}, well {row[WELL]}, site {row[SITE]}) has "
            f"{IMAGE_INDEX} {row[IMAGE_INDEX]}, out of range for {n} images in the store"
        )
