"""Gather: embedding files -> profile row batches at image or well level (:func:`iter_profiles`),
written to one profile parquet (:func:`write_profiles`) or read into memory (:func:`gather_profiles`)."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from phenoica.contract import GENE, KEY_COLUMNS, PLATE, WELL, ScreenError, normalize_names, validate_profile_metadata
from phenoica.profiles._columns import FeatureSelection
from phenoica.profiles._constant_rows import ConstantRows
from phenoica.profiles._embeddings import EmbeddingPlan, GeneTypes, log_left_out, plan_files, read_blocks
from phenoica.profiles._tables import DEFAULT_BATCH_ROWS, write_batches
from phenoica.profiles._wells import N_IMAGES, WellMeans, constant_within_wells
from phenoica.screen import ExportSpec

LEVELS = ("image", "well")
log = logging.getLogger(__name__)


def _metadata_arrays(batch: pa.RecordBatch, schema: pa.Schema) -> list[pa.Array]:
    """The batch's metadata columns in ``schema``'s order and types; absent ones null."""
    arrays = []
    for field in schema:
        if field.name in batch.schema.names:
            values = batch.column(field.name).cast(field.type)
            if field.name in KEY_COLUMNS and pa.types.is_string(field.type):
                values = pc.utf8_trim_whitespace(values)  # names lose surrounding whitespace, as everywhere
            arrays.append(values)
        else:
            arrays.append(pa.nulls(batch.num_rows, field.type))
    return arrays


def _feature_arrays(X: np.ndarray) -> list[pa.Array]:
    """float32 arrow columns of a (rows x features) array."""
    columns = np.ascontiguousarray(np.asarray(X, dtype=np.float32).T)
    return [pa.array(col) for col in columns]


def _output_schema(metadata: pa.Schema, names: Sequence[str]) -> pa.Schema:
    return pa.schema(list(metadata) + [pa.field(n, pa.float32()) for n in names])


def well_plan(plan: EmbeddingPlan, genes: GeneTypes) -> list[str]:
    """The metadata-only first pass of well-level gathering, one file at a time: validates
    every file's profile metadata, checks that no well spans two files, and returns the
    metadata columns constant within every well of every file (the ones kept)."""
    candidates = [c for c in plan.metadata.names if c not in (PLATE, WELL)]
    kept = set(candidates)
    wells: dict[tuple, str] = {}
    for file in plan.files:
        if WELL not in file.metadata:
            raise ScreenError(f"{file.path}: well-level analysis needs the {WELL} column")
        meta = normalize_names(pq.read_table(file.source(), columns=file.metadata).to_pandas())
        validate_profile_metadata(meta, source=file.path)
        missing = meta[WELL].isna().to_numpy()
        if missing.any():
            raise ScreenError(
                f"{file.path}: column {WELL} has missing values at row(s) {list(np.flatnonzero(missing)[:5])}"
            )
        genes.update(meta, file.path)
        present = [c for c in candidates if c in meta.columns]
        kept -= set(present) - set(constant_within_wells(meta, present))
        for key in meta[[PLATE, WELL]].drop_duplicates().itertuples(index=False, name=None):
            other = wells.setdefault(key, file.path)
            if other != file.path:
                raise ScreenError(
                    f"{file.path}: well (plate {key[0]!r}, well {key[1]!r}) also appears in {other}; well-level "
                    "analysis averages each file on its own, so a well's images must be in one file"
                )
    return [c for c in candidates if c in kept]


# --------------------------------------------------------------------------- gather


def iter_profiles(
    paths: Sequence[Path | str],
    level: str = "image",
    embedding_column: str | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    selection: FeatureSelection | None = None,
    spec: ExportSpec = ExportSpec(),
) -> Iterator[pa.RecordBatch]:
    """Embedding files -> profile row batches at the requested level (image or well), validated.

    All batches share one schema: metadata columns (the union over the files; a profile
    column as string, identifier names without surrounding whitespace), then float32
    features: those ``selection`` chooses (default: the ``emb_`` columns; see
    :class:`FeatureSelection`), or a list-valued ``embedding_column`` expanded. The numeric
    columns left out are listed once in the log, and so are rows whose features are all 0 or all
    one value (:class:`phenoica.profiles.ConstantRows`). Image level: at most ``batch_rows`` rows per
    batch. Well level: one batch per file (its wells, sorted by plate and well). Files are read
    through ``spec`` (an export's own column names, controls and rows:
    :mod:`phenoica.screen._exports`); files with different feature sets are reconciled as
    ``selection`` says (:func:`phenoica.profiles._embeddings.shared_features`).
    """
    if level not in LEVELS:
        raise ValueError(f"profiles.level must be 'image' or 'well', got {level!r}")
    if int(batch_rows) < 1:
        raise ValueError(f"batch_rows: expected a positive row count, got {batch_rows}")
    if not paths:
        raise ScreenError("no embedding files given")
    plan = plan_files(paths, embedding_column, selection, spec)
    log_left_out(plan, selection)
    for note in plan.notes:
        log.warning("%s", note)
    genes = GeneTypes()
    constant = ConstantRows()
    reference: list[str] | None = None
    schema: pa.Schema | None = None
    if level == "image":
        for file in plan.files:
            for block in read_blocks(file, plan, batch_rows, reference, genes):
                constant.update(block.features, block.batch.column(GENE).to_pylist(), file.path, block.start)
                reference = block.names
                schema = schema or _output_schema(plan.metadata, block.names)
                arrays = _metadata_arrays(block.batch, plan.metadata) + _feature_arrays(block.features)
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)
        genes.finish([f.path for f in plan.files])
        for note in constant.notes():
            log.warning("%s", note)
        return
    kept = well_plan(plan, genes)
    genes.finish([f.path for f in plan.files])
    meta_schema = pa.schema(
        [plan.metadata.field(PLATE), plan.metadata.field(WELL)]
        + [plan.metadata.field(c) for c in kept]
        + [pa.field(N_IMAGES, pa.int64())]
    )
    for file in plan.files:
        wells: WellMeans | None = None
        for block in read_blocks(file, plan, batch_rows, reference, None):
            constant.update(block.features, block.batch.column(GENE).to_pylist(), file.path, block.start)
            reference = block.names
            wells = wells or WellMeans(kept, len(block.names))
            wells.update(_with_columns(block.batch, [PLATE, WELL, *kept], plan.metadata), block.features)
        if wells is None:
            continue
        meta, means = wells.result()
        schema = schema or _output_schema(meta_schema, reference)  # type: ignore[arg-type]
        arrays = _metadata_arrays(meta.combine_chunks().to_batches()[0], meta_schema) + _feature_arrays(means)
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)
    for note in constant.notes():
        log.warning("%s", note)


def _with_columns(batch: pa.RecordBatch, columns: Sequence[str], schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` restricted to ``columns`` in the output types, absent ones as nulls."""
    sub = pa.schema([schema.field(c) for c in columns])
    return pa.RecordBatch.from_arrays(_metadata_arrays(batch, sub), schema=sub)


def write_profiles(
    paths: Sequence[Path | str],
    out: Path | str,
    level: str = "image",
    embedding_column: str | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    selection: FeatureSelection | None = None,
    spec: ExportSpec = ExportSpec(),
) -> int:
    """Stream embedding files into one profile parquet at ``out`` (atomic; row groups of
    ``batch_rows`` rows; features chosen by ``selection`` and exports read through ``spec``, see
    :func:`iter_profiles`); returns the number of profile rows written. The profile hygiene is
    applied to the written table by :func:`phenoica.profiles.clean_profiles`."""
    batches = iter_profiles(paths, level, embedding_column, batch_rows, selection, spec)
    first = next(batches, None)
    if first is None:
        raise ScreenError(f"no rows in any of the {len(paths)} embedding file(s) (first: {paths[0]})")
    return write_batches(itertools.chain([first], batches), out, first.schema, batch_rows)


def gather_profiles(
    paths: Sequence[Path | str],
    level: str = "image",
    embedding_column: str | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    selection: FeatureSelection | None = None,
    spec: ExportSpec = ExportSpec(),
) -> pd.DataFrame:
    """Embedding files -> one profile table in memory, for use in Python (see
    :func:`iter_profiles`; ``level="image"`` reads the embeddings as they are, validated, with a
    list-valued ``embedding_column`` expanded). For large screens write the table with
    :func:`write_profiles` instead (what the ``gather_profiles`` rule does)."""
    batches = list(iter_profiles(paths, level, embedding_column, batch_rows, selection, spec))
    if not batches:
        raise ScreenError(f"no rows in any of the {len(paths)} embedding file(s) (first: {paths[0]})")
    return pa.Table.from_batches(batches).to_pandas()
