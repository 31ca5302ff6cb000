"""The resumable parts of one plate's embedding, and the final parquet assembled from them.

Every finished chunk (:class:`Chunk`: store images ``[start, stop)`` and the referenced ones
in it) is written atomically to ``{out}.parts/chunk_{i:05d}.parquet`` (``Metadata_ImageIndex``
+ features) beside a ``manifest.json`` recording the identity of the work; a rerun after a kill
skips chunks already finished, and parts written under another identity are discarded
(:func:`prepare_parts`). :func:`assemble` streams the parts into the final parquet in row
groups (memory bounded by one row group, not the plate); its schema metadata (key
:data:`METADATA_KEY`) records how the embedding was made, which :func:`embedding_metadata`
reads back.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from phenoica.contract import IMAGE_INDEX, PLATE, SITE, WELL, check_finite, feature_name
from phenoica.utils import atomic_path

MANIFEST = "manifest.json"
PARTS_FORMAT = 2

METADATA_KEY = "phenoica.embedding"
"""Schema-metadata key of the embeddings parquet: JSON of how the embedding was made."""
ROW_GROUP_ROWS = 16384  # rows per row group of the final parquet


@dataclass(frozen=True, eq=False)
class Chunk:
    """One unit of streamed work: store images ``[start, stop)`` and the referenced ones in it."""

    number: int  # position along the store's images (0-based), names the part file
    start: int
    stop: int
    image_indices: np.ndarray  # sorted Metadata_ImageIndex values inside [start, stop)
    rows: slice  # the matching rows of the plate's metadata, sorted by image index


def iter_chunks(chunk_lengths: tuple[int, ...], image_indices: np.ndarray) -> Iterator[Chunk]:
    """The chunks (store chunk lengths along images) holding at least one referenced image.

    ``image_indices`` are the plate's sorted image indices; chunks without any are skipped.
    """
    bounds = np.concatenate([[0], np.cumsum(chunk_lengths)]).astype(np.int64)
    cuts = np.searchsorted(image_indices, bounds)
    for number in range(len(chunk_lengths)):
        lo, hi = int(cuts[number]), int(cuts[number + 1])
        if hi > lo:
            yield Chunk(number, int(bounds[number]), int(bounds[number + 1]), image_indices[lo:hi], slice(lo, hi))


def parts_dir(out: Path) -> Path:
    """The folder of finished chunks beside ``out``: ``{out}.parts``."""
    return out.with_name(out.name + ".parts")


def prepare_parts(parts: Path, manifest: Mapping[str, Any], log: logging.Logger) -> None:
    """Keep ``parts`` if its manifest equals ``manifest``; otherwise discard it and start afresh."""
    path = parts / MANIFEST
    if parts.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError):
            old = None
        if old == manifest:
            return
        stale = len(list(parts.glob("chunk_*.parquet")))
        log.info("discarding %d part(s) in %s: written for other work (manifest differs)", stale, parts)
        shutil.rmtree(parts)
    parts.mkdir(parents=True)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))


def part_path(parts: Path, chunk: Chunk) -> Path:
    """File of a finished chunk."""
    return parts / f"chunk_{chunk.number:05d}.parquet"


def part_is_done(parts: Path, chunk: Chunk, dim: int) -> bool:
    """Whether a part file exists holding exactly this chunk's image indices and D features
    (their names are in the manifest, which the parts folder was kept for)."""
    path = part_path(parts, chunk)
    if not path.exists():
        return False
    try:
        part = pq.ParquetFile(path)
        idx = part.read(columns=[IMAGE_INDEX], use_threads=False).column(0).to_numpy()
    except (OSError, pa.ArrowException, KeyError):
        return False
    return len(part.schema_arrow.names) == dim + 1 and np.array_equal(idx, chunk.image_indices)


def write_part(parts: Path, chunk: Chunk, emb: np.ndarray, names: Sequence[str] | None = None) -> Path:
    """Write a finished chunk atomically: ``Metadata_ImageIndex`` + float32 features ``names``
    (default ``emb_0000 ...``)."""
    cols = [pa.array(chunk.image_indices.astype(np.int64))] + [pa.array(emb[:, j]) for j in range(emb.shape[1])]
    names = [IMAGE_INDEX] + (list(names) if names is not None else [feature_name(j) for j in range(emb.shape[1])])
    path = part_path(parts, chunk)
    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_arrays(cols, names=names), tmp)
    return path


def embedding_metadata(path: Path | str) -> dict[str, Any]:
    """How an embeddings parquet was made (its ``phenoica.embedding`` schema metadata); {} if absent."""
    raw = (pq.read_schema(path).metadata or {}).get(METADATA_KEY.encode())
    return json.loads(raw) if raw else {}


def check_embeddings_finite(emb: np.ndarray, chunk: Chunk, rows: pd.DataFrame, store: Path) -> None:
    """Raise ScreenError naming the plate and image of the first non-finite embedding of a chunk
    (:func:`phenoica.contract.check_finite`, its rows labelled by their image)."""

    def image(i: int) -> str:
        row = rows.iloc[chunk.rows.start + i]
        return (
            f"non-finite embedding for plate {row[PLATE]}, well {row[WELL]}, site {row[SITE]}, "
            f"{IMAGE_INDEX} {int(chunk.image_indices[i])}"
        )

    check_finite(emb, str(store), row_label=image)


def assemble(
    out: Path,
    parts: Path,
    chunks: list[Chunk],
    rows: pd.DataFrame,
    dim: int,
    row_group_rows: int = ROW_GROUP_ROWS,
    names: Sequence[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``out`` atomically: metadata rows + float32 features ``names`` (default
    ``emb_0000 ...``), streamed from the parts; whole parts are gathered into row groups of at
    least ``row_group_rows`` rows (the last may be smaller), so memory is bounded by one row
    group, not by the plate. ``metadata`` goes into the schema metadata as JSON (``METADATA_KEY``)."""
    meta = pa.Table.from_pandas(rows, preserve_index=False).replace_schema_metadata(None)
    names = list(names) if names is not None else [feature_name(j) for j in range(dim)]
    if len(names) != dim:
        raise ValueError(f"{len(names)} feature names for {dim} features")
    schema = pa.schema(list(meta.schema) + [pa.field(n, pa.float32()) for n in names])
    if metadata is not None:
        schema = schema.with_metadata({METADATA_KEY: json.dumps(dict(metadata), sort_keys=True)})
    with atomic_path(out) as tmp, pq.ParquetWriter(tmp, schema) as writer:
        buffered: list[pa.Table] = []
        for chunk in chunks:
            path = part_path(parts, chunk)
            part = pq.ParquetFile(path).read(use_threads=False)
            if not np.array_equal(part.column(IMAGE_INDEX).to_numpy(), chunk.image_indices):
                raise ValueError(f"{path}: image indices do not match the metadata")
            piece = meta.slice(chunk.rows.start, chunk.rows.stop - chunk.rows.start)
            buffered.append(pa.Table.from_arrays(piece.columns + [part.column(n) for n in names], schema=schema))
            if sum(t.num_rows for t in buffered) >= row_group_rows or chunk is chunks[-1]:
                writer.write_table(pa.concat_tables(buffered).combine_chunks())  # one row group
                buffered = []
    return out
