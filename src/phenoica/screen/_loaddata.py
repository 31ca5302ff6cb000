"""CellProfiler LoadData CSVs as an image source: each site's channel files, listed per row.

The Broad / JUMP layout (pycytominer's and JUMP's published ``load_data.csv``): one row per site
with ``Metadata_Plate``, ``Metadata_Well``, ``Metadata_Site`` and, per channel ``<Ch>``,
``FileName_<Ch>`` and ``PathName_<Ch>`` (e.g. ``FileName_OrigDNA``); optional illumination
functions in ``FileName_Illum<X>`` / ``PathName_Illum<X>`` (``.npy``, CellProfiler's
``CorrectIlluminationCalculate`` output; ``<X>`` is the channel without ``Orig``), applied when
asked: pixel / function, clipped to the image dtype. A relative ``PathName`` is relative to the
CSV's folder. One CSV per plate or one for the screen (a list or a glob).

Channels are matched by name, never by column position: ``channels`` maps the screen's channel
names (the plate store's ``channels``, in order) to the LoadData channel names, e.g.
``{DNA: OrigDNA, ER: OrigER}``; None = every ``FileName_*`` channel that is not an illumination
function, in natural order of their names (so the order does not depend on any CSV's column order
or on which CSVs there are). Every CSV must hold the columns of every channel used.

Same contract checks as the other sources, before any pixel is read: a channel without its
``FileName_`` / ``PathName_`` columns in a CSV names the CSV and the columns; a missing or
non-integer key value names the CSV, column and row; a file that is missing names the CSV and
its row; a site listed twice names both rows. The plate map gives each well its perturbation;
:func:`screen_wells` says which of its wells have sites and notes what is left out.
"""

from __future__ import annotations

import functools
import glob
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from phenoica.contract import PLATE, SITE, WELL, ScreenError, check_columns, normalize_names
from phenoica.screen._images import read_image
from phenoica.screen._options import LoadDataIngestOptions
from phenoica.screen._plate_map import (
    natural_key,
    natural_sorted,
    normalize_well,
    plate_map_rows,
    plate_metadata,
    write_plate_outputs,
)
from phenoica.utils import read_table

log = logging.getLogger("phenoica.screen._loaddata")

KEYS = (PLATE, WELL, SITE)
FILE, PATH, ILLUM = "FileName_", "PathName_", "Illum"
#: The columns phenoica adds: the CSV and its 0-based data row, for error messages.
SOURCE_CSV, SOURCE_ROW = "_loaddata_csv", "_loaddata_row"
#: Names listed in a note or an error before "and N more".
EXAMPLES = 5


def loaddata_channels(columns: Sequence[str]) -> list[str]:
    """The image channels of a LoadData table: ``FileName_<Ch>`` columns that are not
    illumination functions (``FileName_Illum*``), in column order."""
    return [c[len(FILE) :] for c in columns if c.startswith(FILE) and not c[len(FILE) :].startswith(ILLUM)]


def illum_name(channel: str) -> str:
    """The illumination function of a LoadData channel: ``OrigDNA`` -> ``IllumDNA``."""
    return f"{ILLUM}{channel.removeprefix('Orig')}"


def csv_paths(paths: str | Path | Sequence[str | Path]) -> list[str]:
    """The LoadData CSVs named by a path, a glob or a list (a path that matches nothing stays,
    so that reading it names it)."""
    if isinstance(paths, (str, Path)):
        return sorted(glob.glob(str(paths))) or [str(paths)]
    return [str(p) for p in paths]


def _listed(values: Sequence[object]) -> str:
    more = f" and {len(values) - EXAMPLES} more" if len(values) > EXAMPLES else ""
    return f"{list(values[:EXAMPLES])}{more}"


def _read_csv(path: str) -> pd.DataFrame:
    """One LoadData CSV: key, file and path columns read as text (plate ``001``, folder
    ``007`` stay as written); sites as integers. Missing values in a key column, and sites that
    are not integers, are errors naming the CSV, the column and the rows."""
    if not Path(path).is_file():
        raise ScreenError(f"{path}: LoadData CSV not found")
    try:
        header = [str(c) for c in pd.read_csv(path, nrows=0, encoding="utf-8").columns]
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError):
        header = []  # read_table below names the fault
    text = [PLATE, WELL, *(c for c in header if c.startswith((FILE, PATH)))]
    df = read_table(path, text_columns=text)
    check_columns(df.columns, KEYS, path, what="a LoadData CSV has")
    if df.empty:
        raise ScreenError(f"{path}: the LoadData CSV has no rows; expected one row per site")
    df = normalize_names(df, (PLATE, WELL))
    for col in KEYS:
        blank = np.flatnonzero(df[col].isna().to_numpy())
        if len(blank):
            raise ScreenError(
                f"{path}: column {col} is empty at row(s) {_listed(blank.tolist())}; every row names its site"
            )
    sites = pd.to_numeric(df[SITE], errors="coerce")
    bad = np.flatnonzero((sites.isna() | (sites != np.floor(sites))).to_numpy())
    if len(bad):
        raise ScreenError(
            f"{path}: column {SITE} must hold integers; row {bad[0]} holds {df[SITE].iloc[bad[0]]!r}"
            f"{f' (also row(s) {_listed(bad[1:].tolist())})' if len(bad) > 1 else ''}"
        )
    df[SITE] = sites.astype(np.int64)
    df[WELL] = [normalize_well(w) for w in df[WELL]]
    return df.assign(**{SOURCE_CSV: path, SOURCE_ROW: np.arange(len(df))})


def read_loaddata(paths: str | Path | Sequence[str | Path]) -> pd.DataFrame:
    """The rows of one or more LoadData CSVs (a path, a glob or a list), with the CSV and row
    each came from; wells normalized (``A1`` = ``A01``). Raises ScreenError naming the CSV for
    missing key columns, no rows, empty or non-integer keys (with the rows), and naming both
    rows for a site listed twice."""
    tables = [_read_csv(path) for path in csv_paths(paths)]
    table = pd.concat(tables, ignore_index=True)
    dup = table[table.duplicated(list(KEYS), keep=False)]
    if len(dup):
        a, b = dup.iloc[0], dup[(dup[list(KEYS)] == dup.iloc[0][list(KEYS)]).all(axis=1)].iloc[1]
        raise ScreenError(
            f"{a[SOURCE_CSV]} row {a[SOURCE_ROW]} and {b[SOURCE_CSV]} row {b[SOURCE_ROW]}: site "
            f"{a[PLATE]} {a[WELL]} s{a[SITE]} is listed twice"
        )
    return table


@functools.lru_cache(maxsize=4)
def cached_table(paths: tuple[str, ...]) -> pd.DataFrame:
    """:func:`read_loaddata` of these CSVs, read once per process (the DAG-time check and the
    per-plate digests). Do not modify it."""
    return read_loaddata(list(paths))


@functools.lru_cache(maxsize=4)
def _plate_index(paths: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The rows of each plate of :func:`cached_table` (one pass over the table)."""
    table = cached_table(paths)
    return {str(p): rows.to_numpy() for p, rows in pd.Series(np.arange(len(table))).groupby(table[PLATE].to_numpy())}


def _csv_columns(table: pd.DataFrame) -> dict[str, list[str]]:
    """Each CSV's file and path columns: those with a value in one of its rows (a table of
    several CSVs holds the union of their columns; a CSV without rows has none)."""
    cols = [c for c in table.columns if str(c).startswith((FILE, PATH))]
    present = table[cols].notna().groupby(table[SOURCE_CSV].to_numpy(), sort=True).any()
    return {str(csv): [c for c in cols if row[c]] for csv, row in present.iterrows()}


def channel_map(
    table: pd.DataFrame, channels: Mapping[str, str] | Sequence[str] | None, illum: bool = False
) -> dict[str, str]:
    """Screen channel -> LoadData channel, matched by name. Every CSV must hold ``FileName_``
    and ``PathName_`` columns for every LoadData channel used (with ``illum``, those of its
    ``Illum<X>`` function too), else an error naming the CSV, the channel and the columns.
    ``channels`` None = every channel of the CSVs, in natural order; CSVs that list different
    channels are then an error (name the channels in ``screen.loaddata_channels``)."""
    columns = _csv_columns(table)
    per_csv = {csv: loaddata_channels(cols) for csv, cols in columns.items()}
    if channels is None:
        found = natural_sorted({c for chans in per_csv.values() for c in chans})
        for csv, chans in per_csv.items():
            lacking = [c for c in found if c not in chans]
            if lacking:
                other = next(k for k, v in per_csv.items() if lacking[0] in v)
                raise ScreenError(
                    f"{csv}: no column(s) {[FILE + c for c in lacking]} for channel(s) {lacking}, which {other} has; "
                    "every CSV must list the same channels (matched by name), or name the channels to use in "
                    "screen.loaddata_channels"
                )
        mapping = {c: c for c in found}
    elif isinstance(channels, Mapping):
        mapping = {str(k): str(v) for k, v in channels.items()}
    else:
        mapping = {str(c): str(c) for c in channels}
    if not mapping:
        raise ScreenError(f"{', '.join(per_csv)}: no FileName_<channel> column found")
    for csv, cols in columns.items():
        for screen_ch, ld in mapping.items():
            names = [ld, illum_name(ld)] if illum else [ld]
            lacking = [f"{p}{n}" for n in names for p in (FILE, PATH) if f"{p}{n}" not in cols]
            if lacking:
                why = " (screen.loaddata_illum is true)" if illum and ld in per_csv[csv] else ""
                raise ScreenError(
                    f"{csv}: channel {ld!r} (screen channel {screen_ch!r}) has no column(s) {lacking}{why} "
                    "(or only empty cells there); "
                    f"the CSV's channels are {per_csv[csv]}"
                )
    return mapping


@functools.lru_cache(maxsize=8)
def _cached_map(paths: tuple[str, ...], channels: str, illum: bool) -> dict[str, str]:
    """:func:`channel_map` of :func:`cached_table` (``channels`` as JSON), once per process."""
    return channel_map(cached_table(paths), json.loads(channels), illum)


def screen_channels(
    paths: str | Path | Sequence[str | Path], channels: Mapping[str, str] | Sequence[str] | None, illum: bool = False
) -> tuple[tuple[str, ...], dict[str, str]]:
    """(the CSVs, the channel mapping) of a LoadData screen, read once per process."""
    key = tuple(csv_paths(paths))
    return key, dict(_cached_map(key, json.dumps(channels), bool(illum)))


@dataclass(frozen=True)
class PlateFiles:
    """One plate's sites in (well, site) order, with the CSV and row each came from, and their
    files: ``files`` (sites x channels) and, with illumination, ``illums`` (same shape)."""

    sites: pd.DataFrame
    files: np.ndarray
    illums: np.ndarray | None

    def where(self, i: int) -> str:
        """``{csv} row {r} (plate, well, site)`` of site ``i``."""
        s = self.sites.iloc[i]
        return f"{s[SOURCE_CSV]} row {s[SOURCE_ROW]} (plate {s[PLATE]}, well {s[WELL]}, site {s[SITE]})"


def _paths(rows: pd.DataFrame, name: str) -> np.ndarray:
    """The files of ``FileName_<name>`` / ``PathName_<name>`` (a relative folder is relative to
    the CSV's); an empty cell names the CSV, column and row."""
    for col in (f"{FILE}{name}", f"{PATH}{name}"):
        blank = np.flatnonzero(rows[col].isna().to_numpy())
        if len(blank):
            r = rows.iloc[blank[0]]
            raise ScreenError(f"{r[SOURCE_CSV]}: column {col} is empty at row {r[SOURCE_ROW]} (plate {r[PLATE]})")
    pairs = pd.MultiIndex.from_arrays([rows[SOURCE_CSV].to_numpy(), rows[f"{PATH}{name}"].to_numpy()])
    codes, folders = pd.factorize(pairs)  # a plate's files sit in a few folders: each resolved once
    prefixes = np.asarray(
        [os.path.join(f if os.path.isabs(f) else os.path.join(os.path.dirname(c), f), "") for c, f in folders]
        + [""],  # keeps a one-folder array one-dimensional
        dtype=object,
    )
    out = prefixes[codes] + rows[f"{FILE}{name}"].to_numpy(dtype=object)
    return out


def plate_files(
    table: pd.DataFrame, plate: str, mapping: Mapping[str, str], illum: bool = False, rows: np.ndarray | None = None
) -> PlateFiles:
    """One plate's sites (natural well order, then site) and their files, without reading or
    checking them (``rows``: the plate's row numbers in ``table``, if known)."""
    part = table[table[PLATE] == plate] if rows is None else table.iloc[rows]
    if part.empty:
        raise ScreenError(f"plate {plate}: no row of the LoadData CSV(s) {sorted(set(table[SOURCE_CSV]))}")
    wells, sites = part[WELL].tolist(), part[SITE].tolist()
    keys = {w: natural_key(w) for w in set(wells)}
    order = sorted(range(len(part)), key=lambda i: (keys[wells[i]], sites[i]))
    part = part.iloc[order]
    files = np.stack([_paths(part, ld) for ld in mapping.values()], axis=1)
    illums = np.stack([_paths(part, illum_name(ld)) for ld in mapping.values()], axis=1) if illum else None
    return PlateFiles(part[[PLATE, WELL, SITE, SOURCE_CSV, SOURCE_ROW]].reset_index(drop=True), files, illums)


def check_files(found: PlateFiles, mapping: Mapping[str, str]) -> None:
    """Every file (and illumination function) of a plate exists: a missing one names the CSV,
    its row and the channel."""
    for kind, grid in (("file", found.files), ("illumination function", found.illums)):
        if grid is None:
            continue
        for i, c in zip(*np.nonzero(~np.vectorize(os.path.isfile, otypes=[bool])(grid))):
            raise ScreenError(
                f"{found.where(i)}: {kind} {grid[i, c]} of channel {list(mapping.values())[c]!r} not found"
            )


def _load_illum(path: str, where: str, mmap: bool = False) -> np.ndarray:
    """An illumination function (``.npy``); an unreadable one names the file and the CSV row."""
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ScreenError(f"{where}: illumination function {path} is not a readable .npy array ({exc})") from None


def plate_geometry(
    paths: str | Path | Sequence[str | Path],
    channels: Mapping[str, str] | Sequence[str] | None,
    plate: str,
    illum: bool = False,
) -> tuple[list[str], tuple[int, int]]:
    """(the screen's channel names, (height, width)) of one plate, from its first site's first
    file, after every file of the plate was checked to exist and, with ``illum``, every
    illumination function's shape (its header) checked against that image (the DAG-time check)."""
    key, mapping = screen_channels(paths, channels, illum)
    found = plate_files(cached_table(key), str(plate), mapping, illum, _plate_index(key).get(str(plate), np.arange(0)))
    check_files(found, mapping)
    shape = read_image(found.files[0, 0]).shape
    if found.illums is not None:
        for path in dict.fromkeys(found.illums.ravel()):
            i = int(np.flatnonzero((found.illums == path).any(axis=1))[0])
            got = _load_illum(path, found.where(i), mmap=True).shape
            if got != shape:
                raise ScreenError(
                    f"{found.where(i)}: illumination function {path} has shape {got}; the plate's images are {shape}"
                )
    return list(mapping), (int(shape[0]), int(shape[1]))


def plate_inputs(
    paths: str | Path | Sequence[str | Path],
    channels: Mapping[str, str] | Sequence[str] | None,
    illum: bool,
    plate: str,
) -> tuple[str, list[str]]:
    """What ingesting one plate reads, for its content digest: a text of the channel mapping and
    each site's (well, site, files) in store order, and the distinct files (images, then
    illumination functions). A plate without rows gives ``('', [])`` (the screen check names it)."""
    key, mapping = screen_channels(paths, channels, illum)
    rows = _plate_index(key).get(str(plate))
    if rows is None:
        return "", []
    found = plate_files(cached_table(key), str(plate), mapping, illum, rows)
    grid = found.files if found.illums is None else np.concatenate([found.files, found.illums], axis=1)
    lines = [json.dumps(mapping, sort_keys=False), str(bool(illum))]
    lines += ["\0".join([w, str(s), *g]) for w, s, g in zip(found.sites[WELL], found.sites[SITE], grid.tolist())]
    files = list(dict.fromkeys(found.files.ravel().tolist()))
    if found.illums is not None:
        files += list(dict.fromkeys(found.illums.ravel().tolist()))
    return "\n".join(lines), files


def screen_wells(table: pd.DataFrame, plate_map: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """(the plate-map rows of wells that have LoadData sites: the wells the screen will hold,
    the notes on what is left out): LoadData plates the plate map lacks (not ingested),
    plate-map wells without a LoadData site, and LoadData sites of wells the plate map lacks
    (skipped); each note gives the count and the first names."""
    sites = table[[PLATE, WELL, SOURCE_CSV, SOURCE_ROW]]
    mapped_plates = set(plate_map[PLATE])
    notes = []
    extra = natural_sorted(set(sites[PLATE]) - mapped_plates)
    if extra:
        first = sites[sites[PLATE] == extra[0]].iloc[0]
        notes.append(
            f"LoadData: {len(extra)} plate(s) of the CSVs are not in the plate map and are not ingested: "
            f"{_listed(extra)} (e.g. {first[SOURCE_CSV]} row {first[SOURCE_ROW]})"
        )
    wells = set(zip(sites[PLATE], sites[WELL]))
    keys = list(zip(plate_map[PLATE], plate_map[WELL]))
    has = np.fromiter((k in wells for k in keys), dtype=bool, count=len(keys))
    if not has.all():
        empty = [f"{p} {w}" for (p, w), h in zip(keys, has) if not h]
        notes.append(
            f"LoadData: {len(empty)} plate-map well(s) have no LoadData site and are left out of the screen: "
            f"{_listed(empty)}"
        )
    known = set(keys)
    on_map = sites[sites[PLATE].isin(mapped_plates)]
    stray = np.fromiter(((p, w) not in known for p, w in zip(on_map[PLATE], on_map[WELL])), bool, len(on_map))
    if stray.any():
        rows = on_map[stray]
        names = list(dict.fromkeys(f"{p} {w}" for p, w in zip(rows[PLATE], rows[WELL])))
        notes.append(
            f"LoadData: {len(rows)} site(s) in {len(names)} well(s) the plate map lacks are skipped: {_listed(names)} "
            f"(e.g. {rows[SOURCE_CSV].iloc[0]} row {rows[SOURCE_ROW].iloc[0]})"
        )
    return plate_map[has].reset_index(drop=True), notes


def corrected(image: np.ndarray, function: np.ndarray, where: str) -> np.ndarray:
    """``image / function`` (CellProfiler's division), clipped and cast back to the image dtype."""
    if function.shape != image.shape:
        raise ScreenError(f"{where}: illumination function of shape {function.shape} for an image of {image.shape}")
    out = image.astype(np.float64) / np.maximum(function.astype(np.float64), 1e-12)
    return np.clip(np.rint(out), 0, np.iinfo(image.dtype).max).astype(image.dtype)


def _site_image(found: PlateFiles, i: int, c: int, first: np.ndarray, illums: dict[str, np.ndarray]) -> np.ndarray:
    """Site ``i``'s image of channel ``c``, corrected when asked; any fault names the CSV row
    and the file."""
    path = found.files[i, c]
    try:
        img = read_image(path)
    except ScreenError as exc:
        raise ScreenError(f"{found.where(i)}: {exc}") from None
    if img.shape != first.shape or img.dtype != first.dtype:
        raise ScreenError(
            f"{found.where(i)}: {path} is {img.shape} {img.dtype}, but {found.files[0, 0]} ({found.where(0)}) is "
            f"{first.shape} {first.dtype}; all images of a plate must have one size and dtype"
        )
    if found.illums is None:
        return img
    fn = found.illums[i, c]
    if fn not in illums:
        illums[fn] = _load_illum(fn, found.where(i))
    return corrected(img, illums[fn], f"{found.where(i)}: {fn}")


def ingest_loaddata_plate(
    table: pd.DataFrame,
    plate_map: pd.DataFrame,
    plate: str,
    store: Path | str,
    metadata_out: Path | str,
    options: LoadDataIngestOptions,
) -> pd.DataFrame:
    """One plate of a LoadData table (:func:`read_loaddata` of ``options.loaddata``) -> its plate
    store (``options.channels``, named as the screen's; divided by the illumination functions
    with ``options.illum``; chunks of ``options.chunk_images`` images) and metadata; sites of
    wells absent from the plate map are skipped (logged). A file that cannot
    be read, or differs in size or dtype from the plate's first, names its CSV row and file."""
    illum, chunk_images = options.illum, options.chunk_images
    mapping = channel_map(table, options.channels, illum)
    rows = plate_map_rows(plate_map, plate)
    found = plate_files(table, str(plate), mapping, illum)
    check_files(found, mapping)
    keep = found.sites[WELL].isin(set(rows[WELL])).to_numpy()
    if not keep.all():
        log.warning("plate %s: skipping %d site(s) of wells absent from the plate map", plate, int((~keep).sum()))
    found = PlateFiles(
        found.sites[keep].reset_index(drop=True),
        found.files[keep],
        found.illums[keep] if found.illums is not None else None,
    )
    if found.sites.empty:
        raise ScreenError(f"plate {plate}: no LoadData site belongs to a well of the plate map")
    metadata = plate_metadata(rows, found.sites[[WELL, SITE]], str(metadata_out))
    try:
        first = read_image(found.files[0, 0])
    except ScreenError as exc:
        raise ScreenError(f"{found.where(0)}: {exc}") from None
    shape = (len(found.files), len(mapping), *first.shape)
    loaded: dict[str, np.ndarray] = {}

    def blocks() -> Iterator[np.ndarray]:
        for start in range(0, shape[0], chunk_images):
            block = np.empty((min(chunk_images, shape[0] - start), *shape[1:]), dtype=first.dtype)
            for i in range(len(block)):
                for c in range(shape[1]):
                    block[i, c] = _site_image(found, start + i, c, first, loaded)
            yield block

    write_plate_outputs(store, metadata_out, metadata, blocks(), list(mapping), shape, first.dtype, chunk_images)
    log.info("plate %s: %d sites x %d channels %s -> %s", plate, shape[0], shape[1], list(mapping), store)
    return metadata
