"""Content digests of the user's inputs, per plate, computed when the DAG is built: a plate's rows of
the metadata table or plate map (:func:`plate_digest`) and its pixels (:func:`plate_store_digest`:
a store, an HCS plate or image files, sampled so a screen of thousands of plates is hashed in
seconds). Rules pass them as params, so a plate whose rows or pixels change reruns, and only it.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from phenoica.contract import screen
from phenoica.workflow.dag import user_table


@functools.lru_cache(maxsize=4)
def plate_digests(path: str) -> dict[str, str]:
    """SHA-1 of each plate's rows of the table at ``path`` (one pass over the table), by
    normalized plate name."""
    table = user_table(path)
    plates = screen.normalize_names(table[[screen.PLATE]])[screen.PLATE].astype(str)
    hashes = pd.util.hash_pandas_object(table, index=False).to_numpy()
    out = {}
    for plate, rows in pd.Series(np.arange(len(table))).groupby(plates.to_numpy(), sort=False):
        out[str(plate)] = hashlib.sha1(hashes[rows.to_numpy()].tobytes()).hexdigest()
    return out


def plate_digest(config: Mapping[str, Any], plate: str) -> str:
    """SHA-1 of one plate's rows in the user's table ('' for sources without one).

    Rules take the table as an ``ancient`` input and this digest as a param: adding a plate
    to the table changes no other plate's digest, so only the new plate's jobs run. All
    plates' digests come from one pass over the table (cached), so a screen of hundreds of
    plates and millions of rows builds its DAG quickly.
    """
    source = config["screen"]["source"]
    if source not in ("zarr", "images", "ome_zarr", "loaddata"):
        return ""
    path = config["screen"]["metadata"] if source == "zarr" else config["screen"]["plate_map"]
    return plate_digests(str(path)).get(plate, "")


#: Bytes read from each sampled file of a store by :func:`store_digest` (its first and last).
DIGEST_SAMPLE_BYTES = 4096


#: A store's metadata documents: small, read whole by :func:`store_digest`.
STORE_DOCUMENTS: tuple[str, ...] = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")


#: Files of a store whose sampled bytes enter :func:`store_digest` (spread over the sorted list).
DIGEST_SAMPLE_FILES = 4


def _sample(path: str, size: int) -> bytes:
    """The first and last :data:`DIGEST_SAMPLE_BYTES` of a file (a metadata document: whole)."""
    if Path(path).name in STORE_DOCUMENTS:
        return Path(path).read_bytes()
    with open(path, "rb") as fh:
        head = fh.read(DIGEST_SAMPLE_BYTES)
        if size > 2 * DIGEST_SAMPLE_BYTES:
            fh.seek(size - DIGEST_SAMPLE_BYTES)
        return head + fh.read(DIGEST_SAMPLE_BYTES)


def store_digest(path: Path | str, pattern: str = "**/*") -> str:
    """A content digest of a plate's files (a Zarr or OME-Zarr store, or the image files of a
    plate): SHA-1 over every file's relative path, size and modification time (ns), plus the
    first and last bytes of a few files spread over the store and the whole of its small
    metadata documents (``zarr.json``, ``.zarray``, ``.zattrs``, ``.zgroup``).

    A rule takes it as a param, so that a store rewritten in place (same names, new pixels:
    new times, and where those were kept, new sampled bytes) reruns that plate's jobs, while a
    store left alone plans nothing. One ``os.scandir`` walk and a few small reads per plate;
    ``benchmarks/store_digest.py`` measures it on a genome-scale plate list. ``''`` when the
    path does not exist (the screen check reports that).
    """
    root = Path(path)
    if not root.exists():
        return ""
    files = [(root.name, str(root), root.stat())] if root.is_file() else sorted(_walk(str(root), ""))
    h = hashlib.sha1()
    for rel, _, st in files:
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    documents = [f for f in files if f[0].rsplit("/", 1)[-1] in STORE_DOCUMENTS]
    chunks = [f for f in files if f[0].rsplit("/", 1)[-1] not in STORE_DOCUMENTS]
    step = max(1, len(chunks) // DIGEST_SAMPLE_FILES)
    for _, full, st in documents + chunks[::step][:DIGEST_SAMPLE_FILES]:
        h.update(_sample(full, st.st_size))
    return h.hexdigest()


def _walk(root: str, prefix: str) -> Iterable[tuple[str, str, Any]]:
    """(relative path, path, stat) of every file below ``root`` (symlinks followed)."""
    with os.scandir(root) as entries:
        for entry in entries:
            rel = f"{prefix}{entry.name}"
            if entry.is_dir():
                yield from _walk(entry.path, rel + "/")
            elif entry.is_file():
                yield rel, entry.path, entry.stat()


def plate_store_digest(config: Mapping[str, Any], plate: str) -> str:
    """The content digest of what ingesting one plate reads (its rule's ``store`` param):
    :func:`store_digest` of the Zarr store (source zarr), of the OME-Zarr HCS plate (ome_zarr),
    or of the plate's image files (images: the plate's folder below ``images_dir`` when the
    pattern starts with ``{plate}/``; else the files the pattern matches for the plate; the whole
    ``images_dir`` for a pattern without ``{plate}``, whose files are every plate's). Source
    loaddata: the channel mapping, each site's files as the plate's rows of the LoadData CSVs name
    them (:func:`phenoica.screen.loaddata.plate_inputs`), and each file's path, size and time
    with the first and last bytes of a few of them, as :func:`store_digest` hashes a store's
    files. So editing a plate's rows of a CSV, or rewriting an image they name, reruns that
    plate alone. ``''`` for sources without user pixels (demo, embeddings)."""
    cfg = config["screen"]
    source = cfg["source"]
    if source == "zarr":
        return store_digest(Path(cfg["plates_dir"]) / f"{plate}.zarr")
    if source == "ome_zarr":
        return store_digest(Path(cfg["ome_zarr_dir"]) / f"{plate}.zarr")
    if source == "images":
        pattern = str(cfg["image_pattern"])
        if pattern.startswith("{plate}/"):
            return store_digest(Path(cfg["images_dir"]) / plate)
        if "{plate}" not in pattern:
            return store_digest(cfg["images_dir"])
        from phenoica.screen.images import discover_images

        files = discover_images(cfg["images_dir"], pattern, plate)["path"].tolist()
        header = pattern
    elif source == "loaddata":
        from phenoica.screen.loaddata import plate_inputs

        header, files = plate_inputs(cfg["loaddata"], cfg["loaddata_channels"], cfg["loaddata_illum"], plate)
    else:
        return ""
    lines, present = [header, "\n"], []
    for name in files:
        try:
            st = os.stat(name)
        except OSError:
            lines.append(f"{name}\0absent\n")
            continue
        lines.append(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n")
        present.append((name, st.st_size))
    h = hashlib.sha1("".join(lines).encode())
    for name, size in present[:: max(1, len(present) // DIGEST_SAMPLE_FILES)][:DIGEST_SAMPLE_FILES]:
        h.update(_sample(name, size))
    return h.hexdigest()
