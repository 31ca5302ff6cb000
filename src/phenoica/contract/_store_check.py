"""A plate store checked whole, and read so that a damaged one names itself.

Zarr reads a chunk that is not in the store as the array's fill value: a plate store missing a
chunk file (a failed copy, a quota hit while writing) gave blank images (all 0) that were
embedded as data, without a word. :func:`missing_chunk_problems` lists the stored objects
(chunks, or shards) of a plate's ``tiles`` array once, cheaply (one walk of the array's folder,
no pixel read), and names the absent ones with the images they hold; the check at the door
refuses such a store. (Zarr 3 leaves out a chunk equal to the fill value unless the array was
written with ``write_empty_chunks``; a whole chunk of all-0 microscopy images does not occur in
practice, so an absent chunk is taken as a loss.) A chunk that is present but cannot be decoded
(truncated, or other bytes) is named by :func:`read_images` at the first job that reads it:
store, plate, chunk and images.
"""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from phenoica.contract._screen_data import ScreenError

#: Absent chunks named in a message (then a count).
SHOWN = 5


def _stored_step(tiles: Any) -> tuple[int, ...]:
    """The shape of one stored object of an array: its shard, else its chunk."""
    return tuple(int(v) for v in (getattr(tiles, "shards", None) or tiles.chunks))


def _image_range(coords: Sequence[int], step: Sequence[int], n_images: int) -> tuple[int, int]:
    """The images [first, last] of a stored object at ``coords`` (images are the first axis)."""
    first = int(coords[0]) * int(step[0])
    return first, min(first + int(step[0]), n_images) - 1


def absent_chunks(array_dir: Path | str, tiles: Any) -> list[tuple[str, int, int]]:
    """(key, first image, last image) of every stored object of ``tiles`` (a zarr array whose
    folder is ``array_dir``) that the folder does not hold, in grid order."""
    root = Path(array_dir)
    present: set[str] = set()
    for folder, _, files in os.walk(root):
        rel = Path(folder).relative_to(root)
        present.update(str(rel / f) if str(rel) != "." else f for f in files)
    step = _stored_step(tiles)
    grid = [math.ceil(int(n) / s) for n, s in zip(tiles.shape, step)]
    out = []
    for coords in itertools.product(*(range(g) for g in grid)):
        key = str(tiles.metadata.encode_chunk_key(coords))
        if key not in present:
            out.append((key, *_image_range(coords, step, int(tiles.shape[0]))))
    return out


def missing_chunk_problems(store: Path | str, plate: str, tiles: Any, array: str = "tiles") -> list[str]:
    """One problem naming the absent chunks of a plate store's ``tiles`` (store, plate, chunk
    keys and the images they would blank), or none."""
    missing = absent_chunks(Path(store) / array, tiles)
    if not missing:
        return []
    images = sum(last - first + 1 for _, first, last in missing)
    shown = ", ".join(f"{key} (images {first}-{last})" for key, first, last in missing[:SHOWN])
    more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
    return [
        f"{store} (plate {plate}): {len(missing)} chunk(s) of '{array}' are absent: {shown}{more}; zarr would read "
        f"their {images} image(s) as blank (the fill value) and they would be embedded as data. Copy the store "
        "again whole (or drop those images' rows from the metadata)"
    ]


def read_images(tiles: Any, start: int, stop: int, source: str, selection: Any = None) -> np.ndarray:
    """Images ``start``..``stop - 1`` of a plate's ``tiles`` (``selection``: an orthogonal
    selection instead of the slice), decoded; a chunk that cannot be decoded raises a
    ScreenError naming ``source`` (the store and plate), the chunk keys and the images."""
    try:
        if selection is not None:
            return np.asarray(tiles.get_orthogonal_selection(selection))
        return np.asarray(tiles[start:stop])
    except ScreenError:
        raise
    except Exception as exc:  # a codec's error (Zstd, Blosc, ...) names no store or chunk
        step = _stored_step(tiles)
        first, last = int(start) // step[0], max(int(start), int(stop) - 1) // step[0]
        keys = [str(tiles.metadata.encode_chunk_key((i, *([0] * (len(step) - 1))))) for i in range(first, last + 1)]
        raise ScreenError(
            f"{source}: images {start}-{stop - 1} could not be read: a chunk among {keys[:SHOWN]} "
            f"(images {first * step[0]}-{min((last + 1) * step[0], int(tiles.shape[0])) - 1}) is damaged "
            f"({type(exc).__name__}: {exc}); copy the store again, or write it again from its source"
        ) from exc
