"""CellProfiler LoadData CSVs as an image source: each site's channel files, listed per row.

The Broad / JUMP layout (pycytominer's and JUMP's published ``load_data.csv``): one row per site
with ``Metadata_Plate``, ``Metadata_Well``, ``Metadata_Site`` and, per channel ``<Ch>``,
``FileName_<Ch>`` and ``PathName_<Ch>`` (e.g. ``FileName_OrigDNA``); optional illumination
functions in ``FileName_Illum<X>`` / ``PathName_Illum<X>`` (``.npy``, CellProfiler's
``CorrectIlluminationCalculate`` output), applied when asked: pixel / function, clipped to the
image dtype. A relative ``PathName`` is relative to the CSV's folder. One CSV per plate or one for
the screen (a list or a glob).

``channels`` maps the screen's channel names (the plate store's ``channels``, in order) to the
LoadData channel names, e.g. ``{DNA: OrigDNA, ER: OrigER}``; None = every ``FileName_*`` channel
that is not an illumination function, in column order, named as in the CSV.

Same contract checks as the other sources, before any pixel is read: a channel without its
``FileName_`` / ``PathName_`` columns names the channel; a file that is missing names the CSV and
its row; a site listed twice names both rows. The plate map gives each well its perturbation.
"""

from __future__ import annotations

import functools
import glob
import logging
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from phenoica.contract.screen import PLATE, SITE, WELL, ScreenError, check_columns, normalize_names
from phenoica.sources.images import read_image
from phenoica.sources.plate_map import natural_key, normalize_well, plate_metadata, plate_rows, write_plate_outputs
from phenoica.utils.io import read_table

log = logging.getLogger("phenoica.sources.loaddata")

KEYS = (PLATE, WELL, SITE)
FILE, PATH, ILLUM = "FileName_", "PathName_", "Illum"
#: The columns phenoica adds: the CSV and its 0-based data row, for error messages.
SOURCE_CSV, SOURCE_ROW = "_loaddata_csv", "_loaddata_row"


def loaddata_channels(columns: Sequence[str]) -> list[str]:
    """The image channels of a LoadData table: ``FileName_<Ch>`` columns that are not
    illumination functions (``FileName_Illum*``), in column order."""
    return [c[len(FILE) :] for c in columns if c.startswith(FILE) and not c[len(FILE) :].startswith(ILLUM)]


def csv_paths(paths: str | Path | Sequence[str | Path]) -> list[str]:
    """The LoadData CSVs named by a path, a glob or a list (a path that matches nothing stays,
    so that reading it names it)."""
    if isinstance(paths, (str, Path)):
        return sorted(glob.glob(str(paths))) or [str(paths)]
    return [str(p) for p in paths]


@functools.lru_cache(maxsize=4)
def _cached_table(paths: tuple[str, ...]) -> pd.DataFrame:
    return read_loaddata(list(paths))


def plate_geometry(
    paths: str | Path | Sequence[str | Path], channels: Mapping[str, str] | Sequence[str] | None, plate: str
) -> tuple[list[str], tuple[int, int]]:
    """(the screen's channel names, (height, width)) of one plate, from its first site's first
    file, after every file of the plate was checked to exist (the DAG-time check)."""
    table = _cached_table(tuple(csv_paths(paths)))
    mapping = channel_map(table, channels)
    _, files, _ = site_files(table, str(plate), mapping)
    shape = read_image(files[0, 0]).shape
    return list(mapping), (int(shape[0]), int(shape[1]))


def read_loaddata(paths: str | Path | Sequence[str | Path]) -> pd.DataFrame:
    """The rows of one or more LoadData CSVs (a path, a glob or a list), with the CSV and row
    each came from; wells normalized (``A1`` = ``A01``). Raises ScreenError naming the CSV for
    missing key columns and naming both rows for a site listed twice."""
    tables = []
    for path in csv_paths(paths):
        if not Path(path).is_file():
            raise ScreenError(f"{path}: LoadData CSV not found")
        df = read_table(path)
        check_columns(df.columns, KEYS, str(path), what="a LoadData CSV has")
        df = normalize_names(df, (PLATE, WELL))
        df[WELL] = [normalize_well(w) for w in df[WELL]]
        df[SITE] = pd.to_numeric(df[SITE], errors="raise").astype(int)
        tables.append(df.assign(**{SOURCE_CSV: str(path), SOURCE_ROW: np.arange(len(df))}))
    table = pd.concat(tables, ignore_index=True)
    dup = table[table.duplicated(list(KEYS), keep=False)]
    if len(dup):
        a, b = dup.iloc[0], dup[(dup[list(KEYS)] == dup.iloc[0][list(KEYS)]).all(axis=1)].iloc[1]
        raise ScreenError(
            f"{a[SOURCE_CSV]} row {a[SOURCE_ROW]} and {b[SOURCE_CSV]} row {b[SOURCE_ROW]}: site "
            f"{a[PLATE]} {a[WELL]} s{a[SITE]} is listed twice"
        )
    return table


def channel_map(table: pd.DataFrame, channels: Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
    """Screen channel -> LoadData channel; every LoadData channel named must have both its
    ``FileName_`` and ``PathName_`` columns, else an error naming the channel."""
    found = loaddata_channels(list(table.columns))
    if channels is None:
        mapping = {c: c for c in found}
    elif isinstance(channels, Mapping):
        mapping = {str(k): str(v) for k, v in channels.items()}
    else:
        mapping = {str(c): str(c) for c in channels}
    csvs = sorted(set(table[SOURCE_CSV]))
    for screen_ch, ld in mapping.items():
        lacking = [f"{p}{ld}" for p in (FILE, PATH) if f"{p}{ld}" not in table.columns]
        if lacking:
            raise ScreenError(
                f"{', '.join(csvs)}: channel {ld!r} (screen channel {screen_ch!r}) has no column(s) {lacking}; "
                f"the CSV's channels are {found}"
            )
    if not mapping:
        raise ScreenError(f"{', '.join(csvs)}: no FileName_<channel> column found")
    return mapping


def _file(row: pd.Series, channel: str) -> Path:
    path = Path(str(row[f"{PATH}{channel}"])) / str(row[f"{FILE}{channel}"])
    return path if path.is_absolute() else Path(row[SOURCE_CSV]).parent / path


def site_files(
    table: pd.DataFrame, plate: str, mapping: Mapping[str, str], illum: bool = False
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray | None]:
    """One plate's sites (well, site; natural order), their files (sites x channels) and, with
    ``illum``, their illumination functions (``FileName_Illum<Ch without Orig>``). Every file is
    checked to exist first: a missing one names the CSV, its row and the channel."""
    rows = table[table[PLATE] == plate]
    if rows.empty:
        raise ScreenError(f"plate {plate}: no row of the LoadData CSV(s) {sorted(set(table[SOURCE_CSV]))}")
    order = sorted(range(len(rows)), key=lambda i: (natural_key(rows[WELL].iloc[i]), int(rows[SITE].iloc[i])))
    rows = rows.iloc[order]
    files = np.empty((len(rows), len(mapping)), dtype=object)
    illums = np.empty_like(files) if illum else None
    for i, (_, row) in enumerate(rows.iterrows()):
        for c, ld in enumerate(mapping.values()):
            files[i, c] = _file(row, ld)
            names = [f"{ILLUM}{ld.removeprefix('Orig')}"] if illum else []
            for name in names:
                if f"{FILE}{name}" not in row.index:
                    raise ScreenError(f"{row[SOURCE_CSV]}: illumination correction asked, but no {FILE}{name} column")
                illums[i, c] = _file(row, name)  # type: ignore[index]
            for kind, path in [("file", files[i, c])] + ([("illumination function", illums[i, c])] if illum else []):
                if not Path(path).is_file():
                    raise ScreenError(
                        f"{row[SOURCE_CSV]} row {row[SOURCE_ROW]} (plate {plate}, well {row[WELL]}, site {row[SITE]}): "
                        f"{kind} {path} of channel {ld!r} not found"
                    )
    return rows[[WELL, SITE]].reset_index(drop=True), files, illums


def corrected(image: np.ndarray, function: np.ndarray, where: Path) -> np.ndarray:
    """``image / function`` (CellProfiler's division), clipped and cast back to the image dtype."""
    if function.shape != image.shape:
        raise ScreenError(f"{where}: illumination function of shape {function.shape} for an image of {image.shape}")
    out = image.astype(np.float64) / np.maximum(function.astype(np.float64), 1e-12)
    return np.clip(np.rint(out), 0, np.iinfo(image.dtype).max).astype(image.dtype)


def ingest_loaddata_plate(
    table: pd.DataFrame,
    plate_map: pd.DataFrame,
    plate: str,
    store: Path | str,
    metadata_out: Path | str,
    channels: Mapping[str, str] | Sequence[str] | None = None,
    illum: bool = False,
    chunk_images: int = 64,
) -> pd.DataFrame:
    """One plate of a LoadData table -> its plate store (channels named as the screen's) and
    metadata; sites of wells absent from the plate map are skipped (logged)."""
    mapping = channel_map(table, channels)
    rows = plate_rows(plate_map, plate)
    sites, files, illums = site_files(table, plate, mapping, illum)
    keep = sites[WELL].isin(set(rows[WELL])).to_numpy()
    if not keep.all():
        log.warning("plate %s: skipping %d site(s) of wells absent from the plate map", plate, int((~keep).sum()))
    sites, files = sites[keep].reset_index(drop=True), files[keep]
    illums = illums[keep] if illums is not None else None
    if sites.empty:
        raise ScreenError(f"plate {plate}: no LoadData site belongs to a well of the plate map")
    metadata = plate_metadata(rows, sites, str(metadata_out))
    first = read_image(files[0, 0])
    shape = (len(files), len(mapping), *first.shape)

    def blocks() -> Iterator[np.ndarray]:
        for start in range(0, len(files), chunk_images):
            block = np.empty((min(chunk_images, len(files) - start), *shape[1:]), dtype=first.dtype)
            for i in range(len(block)):
                for c in range(shape[1]):
                    img = read_image(files[start + i, c])
                    if img.shape != first.shape or img.dtype != first.dtype:
                        raise ScreenError(
                            f"{files[start + i, c]}: {img.shape} {img.dtype} differs from {first.shape} {first.dtype} "
                            f"of {files[0, 0]}; all images of a plate must have one size and dtype"
                        )
                    if illums is not None:
                        img = corrected(img, np.load(illums[start + i, c]), illums[start + i, c])
                    block[i, c] = img
            yield block

    write_plate_outputs(store, metadata_out, metadata, blocks(), list(mapping), shape, first.dtype, chunk_images)
    log.info("plate %s: %d sites x %d channels %s -> %s", plate, shape[0], shape[1], list(mapping), store)
    return metadata
