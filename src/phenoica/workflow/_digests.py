"""Content keys of the user's inputs, computed when the DAG is built, so that a changed input reruns
what reads it whatever its modification time or link (``cp -p``, ``rsync -a``, an unpacked archive,
a symlink pointed elsewhere), and an unchanged one plans nothing:

- a plate's rows of the metadata table or plate map (:func:`plate_digest`);
- a plate's pixels (:func:`plate_store_digest`: a store, an HCS plate or image files; every file's
  size, times and inode, and a few files' first and last bytes, so a screen of thousands of plates
  is keyed in seconds);
- a single file the user names (:func:`file_key`: embeddings, ``.h5ad``, profile exports, frozen
  transforms, checkpoints, annotations): the SHA-256 of its bytes, kept between invocations in the
  results folder (:class:`KeyCache`) under the file's stat signature, so a file is read again only
  when something touched it, and a copy of the same bytes keys the same.

Rules pass them as params (:class:`phenoica.workflow.RuleInputs`); Snakemake records a
job's params with its outputs and reruns the job when they change.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from phenoica.contract import PLATE, normalize_names
from phenoica.utils import atomic_path
from phenoica.workflow._dag import user_table


@functools.lru_cache(maxsize=4)
def plate_digests(path: str) -> dict[str, str]:
    """SHA-1 of each plate's rows of the table at ``path`` (one pass over the table), by
    normalized plate name."""
    table = user_table(path)
    plates = normalize_names(table[[PLATE]])[PLATE].astype(str)
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


def stat_signature(st: os.stat_result) -> str:
    """What the file system says of a file without reading it: size, modification time, change
    time and inode (``size:mtime_ns:ctime_ns:inode``). No copy tool can set the change time back,
    and a file replaced has a new inode, so a file replaced or rewritten in place has a new
    signature whatever modification time it was given; reading a file leaves it alone."""
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"


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
    plate): SHA-1 over every file's relative path and :func:`stat_signature`, plus the
    first and last bytes of a few files spread over the store and the whole of its small
    metadata documents (``zarr.json``, ``.zarray``, ``.zattrs``, ``.zgroup``).

    A rule takes it as a param, so that a store rewritten in place (same names, new pixels:
    new times, and where those were kept, new sampled bytes) reruns that plate's jobs, while a
    store left alone plans nothing. Each file enters with its :func:`stat_signature` (size,
    modification and change times, inode), so a chunk replaced by one with its old time kept
    (``cp -p``, ``rsync -a``: the change time and inode are new) reruns too; a store copied anew
    with the same bytes (new inodes) reruns its plate once. One ``os.scandir`` walk and a few small reads per plate;
    ``benchmarks/store_digest.py`` measures it on a genome-scale plate list. ``''`` when the
    path does not exist (the screen check reports that).
    """
    root = Path(path)
    if not root.exists():
        return ""
    files = [(root.name, str(root), root.stat())] if root.is_file() else sorted(_walk(str(root), ""))
    h = hashlib.sha1()
    for rel, _, st in files:
        h.update(f"{rel}\0{stat_signature(st)}\n".encode())
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
    them (:func:`phenoica.screen.plate_inputs`), and each file's path and
    :func:`stat_signature` with the first and last bytes of a few of them, as :func:`store_digest` hashes a store's
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
        from phenoica.screen import discover_images

        files = discover_images(cfg["images_dir"], pattern, plate)["path"].tolist()
        header = pattern
    elif source == "loaddata":
        from phenoica.screen import plate_inputs

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
        lines.append(f"{name}\0{stat_signature(st)}\n")
        present.append((name, st.st_size))
    h = hashlib.sha1("".join(lines).encode())
    for name, size in present[:: max(1, len(present) // DIGEST_SAMPLE_FILES)][:DIGEST_SAMPLE_FILES]:
        h.update(_sample(name, size))
    return h.hexdigest()


#: The cache of :class:`KeyCache` inside a results folder (phenoica's own folder there).
KEY_CACHE = ".phenoica/content_keys.json"
#: A file changed less than this long before it is read is keyed but not cached: a second write
#: within the file system's time granularity (or a clock's skew) could leave its signature as it
#: was (git's "racily clean" entries).
RACY_SECONDS = 3.0


class KeyCache:
    """Content keys of single files (:func:`file_key`), kept between invocations: path ->
    (:func:`stat_signature`, SHA-256 of the bytes). A file whose signature is the one recorded is
    not read again; any other (new, replaced, rewritten, a symlink pointed elsewhere, a copy of
    the same data) is read whole once, and keys the same when its bytes are the same.

    ``path`` is the cache file (None: kept in memory only). :meth:`save` writes it atomically
    when a key was added or changed (the workflow's main process, once the door and the rules'
    keys are computed); a cluster job reads it and writes nothing. A file changed less than
    ``racy_seconds`` ago is read every time (:data:`RACY_SECONDS`)."""

    def __init__(self, path: Path | str | None = None, racy_seconds: float = RACY_SECONDS) -> None:
        self.path = Path(path) if path is not None else None
        self.racy_ns = int(racy_seconds * 1e9)
        self.entries: dict[str, list[str]] = {}
        self.changed = False
        if self.path is not None:
            try:
                loaded = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                loaded = {}
            if isinstance(loaded, dict):
                self.entries = {
                    k: v
                    for k, v in loaded.items()
                    if isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v)
                }

    def key(self, path: Path | str) -> str:
        """The SHA-256 of the file's bytes (following symlinks); a folder's :func:`store_digest`;
        ``''`` when it does not exist (the door reports that)."""
        name = str(path)
        try:
            st = os.stat(name)
        except OSError:
            return ""
        if stat.S_ISDIR(st.st_mode):  # a folder (a partitioned Parquet dataset): keyed as a store
            return store_digest(name)
        signature = stat_signature(st)
        known = self.entries.get(name)
        if known is not None and known[0] == signature:
            return known[1]
        with open(name, "rb") as fh:
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
        if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) >= self.racy_ns:
            self.entries[name] = [signature, digest]
            self.changed = True
        return digest

    def save(self) -> None:
        """Write the cache (atomically) if a key was added or changed since it was read."""
        if self.path is None or not self.changed:
            return
        with atomic_path(self.path) as tmp:
            tmp.write_text(json.dumps(self.entries, sort_keys=True) + "\n", encoding="utf-8")
        self.changed = False


_KEYS = KeyCache()


def use_key_cache(results: Path | str) -> KeyCache:
    """Key single files through the cache of the results folder (:data:`KEY_CACHE`) from now on
    in this process; returns it (the caller saves it)."""
    global _KEYS
    _KEYS = KeyCache(Path(results) / KEY_CACHE)
    return _KEYS


def file_key(path: Path | str) -> str:
    """The content key of one file the user names: the SHA-256 of its bytes (:class:`KeyCache`:
    read again only when its stat signature changed); ``''`` when it does not exist."""
    return _KEYS.key(path)


class NotKeyed:
    """The content-key param of a job that reads none of the user's files of its kind (the
    workflow's own outputs instead, which Snakemake tracks): Snakemake leaves a param value it
    cannot represent out of its record, so such a job's params are what they were before the rule
    took the param, and a results folder built before reruns nothing for it."""

    def __repr__(self) -> str:
        return "NOT_KEYED"


#: The one :class:`NotKeyed` value.
NOT_KEYED = NotKeyed()


def hashed(parts: Sequence[str]) -> str | NotKeyed:
    """One key of several (a rule's param): SHA-1 over the parts in order; :data:`NOT_KEYED`
    for none."""
    return hashlib.sha1("".join(f"{p}\n" for p in parts).encode()).hexdigest() if parts else NOT_KEYED


def files_key(paths: Sequence[Path | str]) -> str | NotKeyed:
    """One key of several files (a rule's param): :func:`hashed` of each path with its
    :func:`file_key`, in the order given; :data:`NOT_KEYED` for no files."""
    return hashed([f"{p}\0{file_key(p)}" for p in paths])
