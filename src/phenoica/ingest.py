"""Real screens into the data contract: per-channel image files or OME-Zarr HCS plates.

Both converters work one plate at a time (the workflow runs one job per plate) and write the
plate's tile store (``phenoica.screen.write_plate``, streamed in blocks of images so a big
plate is never held in memory whole) and the plate's metadata table (one row per image).

The plate map is the authority on what a well holds: one row per (plate, well) with
``Metadata_Batch, Metadata_Plate, Metadata_Well, Metadata_Gene, Metadata_Guide,
Metadata_PertType`` and any extra ``Metadata_*`` columns, which are carried through
untouched. Each image's metadata row is its well's plate-map row plus ``Metadata_Site`` and
``Metadata_ImageIndex`` (0..n-1 in (well, site) order, wells in natural order).

Well names. Names of the form letters + column number (``A1``, ``a01``, ``AB012``) are
normalized to upper-case letters + a column of at least two digits (``A01``, ``AB12``), in
the plate map, in file names and in HCS plates alike, so ``A1`` and ``A01`` match each other
and the metadata always says ``A01``. Other names (``r01c01``, ``well_7``) are kept verbatim.

Image files. ``pattern`` is a path below ``images_dir`` with fields ``{plate}``, ``{well}``,
``{site}`` and ``{channel}`` around literal text (RxRx style:
``{plate}/{well}_s{site}_w{channel}.png``). ``{well}`` and ``{channel}`` are required;
without ``{plate}`` every matching file belongs to the plate being ingested; without
``{site}`` each well has one site, numbered 1. A field matches one or more characters other
than ``/`` (the shortest match that lets the whole path match); ``{site}`` matches digits.
Files that do not match are ignored. The file extension picks the reader: ``.png`` (Pillow)
or ``.tif``/``.tiff`` (tifffile). Images must be single-channel grayscale uint8 or uint16, all
of one size and dtype per plate. Images of wells that are absent from the plate map are
skipped with a warning in the log (the plate map selects the wells, e.g. after QC); wells of
the plate map without any image are reported as a warning too.

OME-Zarr HCS (NGFF plate layout, zarr v2 / NGFF 0.4 with attributes at the top level, or
zarr v3 / NGFF 0.5 with attributes under ``"ome"``). Each field's full-resolution array (the
first dataset of its first multiscale) is read at t = 0; a z stack is reduced by its maximum
projection; channel names come from ``omero.channels[].label`` (else ``c0, c1, ...``). The
site of an image is the index of its field in the well's ``images`` list (0-based). The
plate's name in the plate map is the store's folder name without ``.zarr`` (``P1.zarr`` ->
``P1``; see ``hcs_plate_name``). A well of the HCS plate that the plate map lacks is an
error; plate-map wells absent from the HCS plate are a warning in the log.

Every failure raises ``ScreenError`` naming the file, array, well or column at fault, and
leaves neither a store nor a metadata file behind.
"""

from __future__ import annotations

import logging
import re
import shutil
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import tifffile
import zarr
from PIL import Image

from phenoica.io import get_logger, read_table, write_parquet
from phenoica.screen import (
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
    SUPPORTED_DTYPES,
    WELL,
    ScreenError,
    check_columns,
    normalize_names,
    raise_problems,
    relation_problems,
    validate_metadata,
    write_plate,
)

PLATE_MAP_COLUMNS: tuple[str, ...] = (BATCH, PLATE, WELL, GENE, GUIDE, PERT_TYPE)
PATTERN_FIELDS: tuple[str, ...] = ("plate", "well", "site", "channel")
DEFAULT_PATTERN = "{plate}/{well}_s{site}_w{channel}.png"
PNG_SUFFIXES = (".png",)
TIFF_SUFFIXES = (".tif", ".tiff")
DEFAULT_SITE = 1
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


def hcs_plate_name(path: Path | str) -> str:
    """The plate name of an HCS store: its folder name without ``.zarr`` (``P1.zarr`` -> ``P1``)."""
    name = Path(path).name
    return name[: -len(".zarr")] if name.lower().endswith(".zarr") else name


# --------------------------------------------------------------------------- plate map


def validate_plate_map(df: pd.DataFrame, source: str | None = None) -> pd.DataFrame:
    """Check a per-well plate map and return a copy with string keys and normalized wells.

    Raises ScreenError naming ``source`` (default: ``df.attrs["source"]`` or "plate map") and
    the column or rows at fault for: no rows, missing required columns (all of them, with the
    column probably meant), a column that is not ``Metadata_*``, a ``Metadata_Site``/
    ``Metadata_ImageIndex`` column (ingest sets those), missing values, a PertType other than
    control/perturbation, duplicate (plate, well), and the data contract's relations
    (:func:`phenoica.screen.relation_problems`: a guide under two genes, a gene under both
    PertTypes, a plate in two batches). Names lose surrounding whitespace
    (:func:`phenoica.screen.normalize_names`).
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


def _plate_rows(plate_map: pd.DataFrame, plate: str) -> pd.DataFrame:
    """The validated plate-map rows of one plate; ScreenError if the plate is not there."""
    pm = validate_plate_map(plate_map)
    rows = pm[pm[PLATE] == str(plate)].reset_index(drop=True)
    rows.attrs["source"] = pm.attrs["source"]
    if rows.empty:
        known = natural_sorted(pm[PLATE].unique().tolist())[:10]
        raise ScreenError(f"{pm.attrs['source']}: no rows for plate {plate!r}; plates there include {known}")
    return rows


# --------------------------------------------------------------------------- image files


@dataclass(frozen=True)
class _Pattern:
    """A file-name pattern compiled to a glob (to list candidates) and a regex (to parse them)."""

    glob: str
    regex: re.Pattern[str]
    fields: frozenset[str]


def _compile_pattern(pattern: str, plate: str) -> _Pattern:
    """Turn ``pattern`` into a glob and an anchored regex, with ``{plate}`` fixed to ``plate``."""
    try:
        parsed = list(string.Formatter().parse(pattern))
    except ValueError as exc:
        raise ValueError(f"image pattern {pattern!r}: {exc}") from None
    glob_parts: list[str] = []
    regex_parts: list[str] = []
    seen: set[str] = set()
    for literal, field, spec, conversion in parsed:
        glob_parts.append(_glob_escape(literal))
        regex_parts.append(re.escape(literal))
        if field is None:
            continue
        if field not in PATTERN_FIELDS:
            raise ValueError(f"image pattern {pattern!r}: unknown field {{{field}}}; expected {list(PATTERN_FIELDS)}")
        if spec or conversion:
            raise ValueError(f"image pattern {pattern!r}: field {{{field}}} takes no format spec or conversion")
        if field == "plate":
            glob_parts.append(_glob_escape(plate))
            regex_parts.append(re.escape(plate))
        else:
            glob_parts.append("*")
            if field in seen:
                regex_parts.append(f"(?P={field})")
            else:
                regex_parts.append(rf"(?P<{field}>\d+)" if field == "site" else rf"(?P<{field}>[^/]+?)")
        seen.add(field)
    missing = [f for f in ("well", "channel") if f not in seen]
    if missing:
        raise ValueError(f"image pattern {pattern!r}: needs the field(s) {['{' + f + '}' for f in missing]}")
    if pattern.startswith("/") or ".." in Path(pattern).parts:
        raise ValueError(f"image pattern {pattern!r}: must be a relative path below images_dir")
    return _Pattern("".join(glob_parts), re.compile("".join(regex_parts)), frozenset(seen))


def _glob_escape(text: str) -> str:
    """Escape glob metacharacters in literal text."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def _scan_images(images_dir: Path | str, pattern: str, plate: str) -> pd.DataFrame:
    """Files of ``plate`` that match ``pattern``: raw and parsed fields, one row per file."""
    root = Path(images_dir)
    if not root.is_dir():
        raise ScreenError(f"{root}: images_dir not found (or not a folder)")
    compiled = _compile_pattern(pattern, str(plate))
    rows = []
    for path in root.glob(compiled.glob):
        rel = path.relative_to(root).as_posix()
        m = compiled.regex.fullmatch(rel)
        if m is None or not path.is_file():
            continue
        raw = m.groupdict()
        rows.append(
            {
                "plate": str(plate),
                "well": normalize_well(raw["well"]),
                "site": int(raw["site"]) if "site" in raw else DEFAULT_SITE,
                "channel": raw["channel"],
                "path": str(path),
                "raw_well": raw["well"],
                "raw_site": raw.get("site"),
            }
        )
    cols = ["plate", "well", "site", "channel", "path", "raw_well", "raw_site"]
    found = pd.DataFrame(rows, columns=cols)
    found["site"] = found["site"].astype(np.int64)
    found = found.sort_values("path", kind="stable").reset_index(drop=True)
    dup = found.duplicated(["well", "site", "channel"], keep=False)
    if dup.any():
        first = found[dup].iloc[0]
        same = found[
            dup
            & (found["well"] == first["well"])
            & (found["site"] == first["site"])
            & (found["channel"] == first["channel"])
        ]["path"].tolist()
        raise ScreenError(
            f"{same[0]}: well {first['well']} site {first['site']} channel {first['channel']!r} matches "
            f"more than one file {same} (wells compared after normalizing A1 -> A01)"
        )
    return found


def discover_images(images_dir: Path | str, pattern: str, plate: str) -> pd.DataFrame:
    """Image files of one plate: columns plate, well (normalized), site (int), channel, path.

    ``pattern`` is relative to ``images_dir`` with fields {plate}, {well}, {site}, {channel};
    files that do not match it are ignored. Rows are sorted by path. Two files for the same
    (well, site, channel) raise ScreenError naming both.
    """
    found = _scan_images(images_dir, pattern, plate)
    return found[["plate", "well", "site", "channel", "path"]].reset_index(drop=True)


def read_image(path: Path | str) -> np.ndarray:
    """One single-channel grayscale image as a 2-D uint8 or uint16 array.

    ``.png`` is read with Pillow, ``.tif``/``.tiff`` with tifffile (singleton leading axes are
    dropped). Raises ScreenError naming the file for an unreadable file, an unsupported
    extension, colour (RGB/RGBA/palette) images and dtypes other than uint8/uint16.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in PNG_SUFFIXES:
        try:
            with Image.open(path) as im:
                mode = im.mode
                if mode not in ("L", "I", "I;16", "I;16B", "I;16L"):
                    raise ScreenError(
                        f"{path}: image mode {mode} is not single-channel grayscale; expected an 8- or "
                        "16-bit grayscale PNG with one channel per file"
                    )
                arr = np.asarray(im)
        except ScreenError:
            raise
        except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError... for bad files
            raise ScreenError(f"{path}: unreadable image ({type(exc).__name__}: {exc})") from exc
        if mode == "I":  # 16-bit grayscale PNG as opened by older Pillow: int32 holding uint16
            if arr.size and (arr.min() < 0 or arr.max() > np.iinfo(np.uint16).max):
                raise ScreenError(f"{path}: 32-bit integer pixels outside the uint16 range")
            arr = arr.astype(np.uint16)
    elif suffix in TIFF_SUFFIXES:
        try:
            arr = tifffile.imread(path)
        except Exception as exc:  # tifffile raises TiffFileError (ValueError), OSError...
            raise ScreenError(f"{path}: unreadable image ({type(exc).__name__}: {exc})") from exc
        while arr.ndim > 2 and arr.shape[0] == 1:
            arr = arr[0]
        if arr.ndim != 2:
            raise ScreenError(
                f"{path}: image of shape {arr.shape} is not single-channel grayscale (expected 2-D; "
                "RGB or multi-page images are not supported, one channel per file)"
            )
    else:
        raise ScreenError(f"{path}: unsupported image extension {suffix!r}; expected .png, .tif or .tiff")
    if arr.dtype.byteorder not in ("=", "|"):
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if np.dtype(arr.dtype) not in SUPPORTED_DTYPES:
        raise ScreenError(f"{path}: unsupported pixel dtype {arr.dtype}; expected uint8 or uint16")
    return arr


def _resolve_channels(found: pd.DataFrame, channels: Sequence[str] | None, source: str) -> list[str]:
    """The channel order: ``channels`` as given, or every value found in natural order."""
    if channels is None:
        values = natural_sorted(found["channel"].unique().tolist())
        if not values:
            raise ScreenError(f"{source}: no image files found")
        return values
    out = [str(c) for c in channels]
    if not out:
        raise ValueError("channels: empty list; give the channel values or null for all")
    if len(set(out)) != len(out):
        raise ValueError(f"channels {out}: each channel may be listed once")
    return out


def image_plate_geometry(
    images_dir: Path | str, pattern: str, plate: str, channels: Sequence[str] | None = None
) -> tuple[list[str], tuple[int, int]]:
    """(channel names, (height, width)) that ingesting this plate's image files would give,
    from the file names and one image's header, without reading the plate: what the
    screen check (:mod:`phenoica.validate`) holds against the models before any plate is ingested."""
    source = f"{Path(images_dir) / pattern} (plate {plate})"
    found = _scan_images(images_dir, pattern, str(plate))
    if found.empty:
        raise ScreenError(f"{source}: no image files match the pattern")
    chans = _resolve_channels(found, channels, source)
    present = found[found["channel"].isin(chans)]
    if present.empty:
        raise ScreenError(f"{source}: no image of channels {chans}")
    first = read_image(present["path"].iloc[0])
    return chans, (int(first.shape[0]), int(first.shape[1]))


def hcs_plate_geometry(plate_path: Path | str) -> tuple[list[str], tuple[int, int]]:
    """(channel names, (height, width)) of an OME-Zarr HCS plate's first field, from its
    metadata alone (no pixels read)."""
    fields = _hcs_fields(Path(plate_path), logging.getLogger("phenoica.ingest"))
    if not fields:
        raise ScreenError(f"{plate_path}: the HCS plate has no fields")
    _, height, width = fields[0].size_cyx
    return list(fields[0].channels), (int(height), int(width))


def _expected_path(images_dir: Path, pattern: str, plate: str, sibling: pd.Series, channel: str) -> Path:
    """The file name a missing channel would have, from a sibling file's raw field values."""
    values = {"plate": plate, "well": sibling["raw_well"], "site": sibling["raw_site"] or "", "channel": channel}
    return images_dir / pattern.format(**values)


def ingest_image_plate(
    images_dir: Path | str,
    pattern: str,
    plate_map: pd.DataFrame,
    plate: str,
    store: Path | str,
    metadata_out: Path | str,
    channels: Sequence[str] | None = None,
    chunk_images: int = 64,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """Per-channel image files of one plate -> its plate store and metadata table.

    Stacks one image per channel (in ``channels`` order; None = every channel value found,
    natural order; files of channels not listed are ignored) for every (well, site) found in
    a plate-map well. Returns the validated metadata written to ``metadata_out``. Raises
    ScreenError naming the file for a (well, site) missing a channel, images of different
    size or dtype, non-grayscale or non-uint8/uint16 images and unreadable files.
    """
    log = log or get_logger("phenoica.ingest")
    images_dir = Path(images_dir)
    plate = str(plate)
    rows = _plate_rows(plate_map, plate)
    source = f"{images_dir / pattern} (plate {plate})"
    found = _scan_images(images_dir, pattern, plate)
    if found.empty:
        raise ScreenError(f"{source}: no image files match the pattern")
    chans = _resolve_channels(found, channels, source)
    unused = sorted(set(found["channel"]) - set(chans), key=natural_key)
    if unused:
        log.info("plate %s: ignoring files of channel(s) %s not in channels %s", plate, unused, chans)
    found = found[found["channel"].isin(chans)]

    mapped = set(rows[WELL])
    unmapped = natural_sorted(set(found["well"]) - mapped)
    if unmapped:
        log.warning(
            "plate %s: skipping images of %d well(s) absent from the plate map: %s",
            plate,
            len(unmapped),
            unmapped[:20],
        )
        found = found[found["well"].isin(mapped)]
    if found.empty:
        raise ScreenError(f"{source}: no image of channels {chans} belongs to a well of the plate map")

    grid = found.pivot(index=["well", "site"], columns="channel", values="path")
    grid = grid.reindex(columns=chans)
    missing = grid.isna()
    if missing.to_numpy().any():
        (well, site), channel = next((key, ch) for key, row in missing.iterrows() for ch in chans if row[ch])
        sibling = found[(found["well"] == well) & (found["site"] == site)].iloc[0]
        expected = _expected_path(images_dir, pattern, plate, sibling, channel)
        raise ScreenError(
            f"{expected}: missing file for channel {channel!r} of well {well} site {site} "
            f"(found {sibling['path']}; channels {chans})"
        )
    order = sorted(grid.index, key=lambda ws: (natural_key(ws[0]), ws[1]))
    grid = grid.loc[order]
    _warn_missing_wells(rows, set(grid.index.get_level_values(0)), plate, log)

    sites = pd.DataFrame(list(grid.index), columns=[WELL, SITE])
    metadata = _metadata(rows, sites, str(metadata_out))
    paths = grid.to_numpy(dtype=object)

    first = read_image(paths[0, 0])
    shape = (len(paths), len(chans), int(first.shape[0]), int(first.shape[1]))
    log.info(
        "plate %s: %d images x %d channels %s of %s %s", plate, shape[0], shape[1], chans, first.shape, first.dtype
    )

    def blocks() -> Iterator[np.ndarray]:
        for start in range(0, len(paths), chunk_images):
            part = paths[start : start + chunk_images]
            block = np.empty((len(part), *shape[1:]), dtype=first.dtype)
            for i, per_channel in enumerate(part):
                for c, path in enumerate(per_channel):
                    img = read_image(path)
                    if img.shape != first.shape:
                        raise ScreenError(
                            f"{path}: image size {img.shape} differs from {first.shape} of {paths[0, 0]}; "
                            "all images of a plate must have one size"
                        )
                    if img.dtype != first.dtype:
                        raise ScreenError(
                            f"{path}: pixel dtype {img.dtype} differs from {first.dtype} of {paths[0, 0]}; "
                            "all images of a plate must have one dtype"
                        )
                    block[i, c] = img
            yield block

    _write(store, metadata_out, metadata, blocks(), chans, shape, first.dtype, chunk_images)
    log.info("plate %s: wrote %s and %s", plate, store, metadata_out)
    return metadata


# --------------------------------------------------------------------------- OME-Zarr HCS


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
    chunk_images: int = 64,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """An OME-Zarr HCS plate -> its plate store and metadata table.

    One image per field (site = field index), full resolution, t = 0, maximum projection over
    z, channels from omero labels (else c0..). Returns the validated metadata written to
    ``metadata_out``. Raises ScreenError naming the well or array for a well that is not in
    the plate map, fields of different channels, size or dtype, and unsupported axes/dtypes.
    """
    log = log or get_logger("phenoica.ingest")
    plate_path = Path(plate_path)
    plate = str(plate)
    rows = _plate_rows(plate_map, plate)
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
    _warn_missing_wells(rows, {f.well for f in fields}, plate, log)
    sizes = dict(zip(first.axes, first.array.shape))
    if sizes.get("t", 1) > 1 or sizes.get("z", 1) > 1:
        log.info("plate %s: taking t=0 of %d and the maximum over z of %d", plate, sizes.get("t", 1), sizes.get("z", 1))

    sites = pd.DataFrame([(f.well, f.site) for f in fields], columns=[WELL, SITE])
    metadata = _metadata(rows, sites, str(metadata_out))
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

    _write(store, metadata_out, metadata, blocks(), channels, shape, dtype, chunk_images)
    log.info("plate %s: wrote %s and %s", plate, store, metadata_out)
    return metadata


# --------------------------------------------------------------------------- shared


def _warn_missing_wells(rows: pd.DataFrame, present: set[str], plate: str, log: logging.Logger) -> None:
    """Log (warning) the plate-map wells of ``plate`` that have no image."""
    absent = natural_sorted([w for w in rows[WELL] if w not in present])
    if absent:
        log.warning("plate %s: %d plate-map well(s) have no image: %s", plate, len(absent), absent[:20])


def _metadata(rows: pd.DataFrame, sites: pd.DataFrame, source: str) -> pd.DataFrame:
    """Plate-map rows x sites -> validated per-image metadata, image index in ``sites`` order."""
    merged = sites.merge(rows, on=WELL, how="left", validate="many_to_one")
    merged[IMAGE_INDEX] = np.arange(len(merged), dtype=np.int64)
    extras = [c for c in rows.columns if c not in REQUIRED_COLUMNS]
    merged = merged[list(REQUIRED_COLUMNS) + extras]
    merged.attrs = {}
    return validate_metadata(merged, source=source)


def _write(
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
