"""Per-channel image files of a plate (PNG or TIFF) into the data contract.

``pattern`` is a path below ``images_dir`` with fields ``{plate}``, ``{well}``,
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

Well names are normalized and the plate map is read as :mod:`phenoica.screen._plate_map` says;
every failure raises ``ScreenError`` naming the file at fault and leaves neither a store nor a
metadata file behind.
"""

from __future__ import annotations

import logging
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pandas as pd
import tifffile
from PIL import Image

from phenoica.contract import SITE, SUPPORTED_DTYPES, WELL, ScreenError
from phenoica.screen._options import ImageIngestOptions
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

PATTERN_FIELDS: tuple[str, ...] = ("plate", "well", "site", "channel")
PNG_SUFFIXES = (".png",)
TIFF_SUFFIXES = (".tif", ".tiff")
DEFAULT_SITE = 1


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
    screen check (:mod:`phenoica.workflow._validate`) holds against the models before any plate is ingested."""
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


def _expected_path(images_dir: Path, pattern: str, plate: str, sibling: pd.Series, channel: str) -> Path:
    """The file name a missing channel would have, from a sibling file's raw field values."""
    values = {"plate": plate, "well": sibling["raw_well"], "site": sibling["raw_site"] or "", "channel": channel}
    return images_dir / pattern.format(**values)


def ingest_image_plate(
    plate_map: pd.DataFrame,
    plate: str,
    store: Path | str,
    metadata_out: Path | str,
    options: ImageIngestOptions,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """Per-channel image files of one plate -> its plate store and metadata table.

    Finds the files below ``options.images_dir`` by ``options.pattern`` and stacks one image per
    channel (in ``options.channels`` order, see
    :class:`~phenoica.screen.ImageIngestOptions`) for every (well, site) found in a
    plate-map well. Returns the
    validated metadata written to ``metadata_out``. Raises ScreenError naming the file for a
    (well, site) missing a channel, images of different size or dtype, non-grayscale or
    non-uint8/uint16 images and unreadable files.
    """
    log = log or get_logger("phenoica.ingest")
    pattern, channels, chunk_images = options.pattern, options.channels, options.chunk_images
    if options.images_dir is None:
        raise ScreenError("screen.images_dir: not set; it names the folder of the image files")
    images_dir = Path(options.images_dir)
    plate = str(plate)
    rows = plate_map_rows(plate_map, plate)
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
    warn_missing_wells(rows, set(grid.index.get_level_values(0)), plate, log)

    sites = pd.DataFrame(list(grid.index), columns=[WELL, SITE])
    metadata = plate_metadata(rows, sites, str(metadata_out))
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

    write_plate_outputs(store, metadata_out, metadata, blocks(), chans, shape, first.dtype, chunk_images)
    log.info("plate %s: wrote %s and %s", plate, store, metadata_out)
    return metadata
