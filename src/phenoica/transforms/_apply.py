"""Apply a fitted variant to a profile table, row batch by row batch; nothing is refitted.

A batch unseen at fit (a new plate) is center-scaled on its own controls over the whole table
(one extra pass over its rows); the saved transform is not changed.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from phenoica.contract import BATCH, ScreenError, check_matrix, metadata_columns
from phenoica.profiles import DEFAULT_BATCH_ROWS, ProfileSource, split_columns, write_batches
from phenoica.transforms._accumulators import BatchMoments, Moments
from phenoica.transforms._rows import profile_source, row_block, row_columns, source_features
from phenoica.transforms._scaling import check_batches
from phenoica.transforms._variant import VariantTransform, load_transform
from phenoica.transforms._whitening import whitened_moments
from phenoica.utils import check_same_variants

LOG = logging.getLogger(__name__)


def table_batches(src: ProfileSource) -> list[str]:
    """The batch labels of a profile table, sorted (one pass over its batch column)."""
    seen: set[str] = set()
    for batch in src.batches([BATCH]):
        seen.update(str(v) for v in pc.unique(batch.column(BATCH)).to_pylist() if v is not None)
    return sorted(seen)


def _aligned_moments(transform: VariantTransform, raw: dict[str, Moments]) -> dict[str, Moments]:
    """Raw-space control moments of unseen batches carried into the space the alignment works
    in: through the batch's center-scale (an affine map per feature), then the whitening."""
    cs = transform.center_scale
    moved: dict[str, Moments] = {}
    for batch, m in raw.items():
        if cs is not None:
            i = cs.batches_.tolist().index(batch)
            scale = cs.scale_[i]
            c = Moments(m.mean.size)
            c.n, c.mean, c.scatter = m.n, (m.mean - cs.mean_[i]) / scale, m.scatter / np.outer(scale, scale)
            m = c
        moved[batch] = m
    return whitened_moments(moved, transform.whitener)  # type: ignore[arg-type]


def prepare_apply(transform: VariantTransform, src: ProfileSource, label: str) -> tuple[VariantTransform, list[str]]:
    """Checks before applying: (the transform, its center-scale and per-batch alignment knowing
    every batch of the table; the row columns to read). The table's feature columns must be
    exactly the fitted ones (any order). A batch unseen at fit gets its own controls' statistics
    over the whole table (one pass); the saved transform is not changed."""
    features = source_features(src, label)
    expected = transform.feature_names_in
    missing = [c for c in expected if c not in src.columns]
    extra = sorted(set(features) - set(expected))
    if missing or extra:
        raise ScreenError(
            f"{label}: feature columns differ from the fitted ones: missing {missing[:10]}, unexpected {extra[:10]}"
        )
    cs, al = transform.center_scale, transform.alignment
    read_rows = row_columns(src, label, cs is not None or al is not None)
    if cs is None and al is None:
        return transform, read_rows
    present = np.asarray(table_batches(src), dtype=str)
    unseen_cs = cs.unseen(present) if cs is not None else []
    unseen_al = al.unseen(present) if al is not None else []
    if not unseen_cs and not unseen_al:
        return transform, read_rows
    own = BatchMoments(len(expected))
    full: dict[str, Moments] = {}
    for batch in src.batches(expected + read_rows):
        X, b, c = row_block(batch, expected, True)
        X = check_matrix(X, label, len(expected), expected)
        b = check_batches(b, X.shape[0])
        if unseen_cs:
            own.update(X, b, c, only=set(unseen_cs))  # type: ignore[arg-type]
        for name in unseen_al:
            rows = (b == name) & c  # type: ignore[operator]
            if rows.any():
                full.setdefault(name, Moments(len(expected))).update(X[rows])
    if unseen_cs:
        transform = transform.with_center_scale(cs.with_batches(own, unseen_cs, expected))  # type: ignore[union-attr]
    if unseen_al:
        for name in unseen_al:
            full.setdefault(name, Moments(len(expected)))
        transform = transform.with_alignment(al.with_batches(_aligned_moments(transform, full)))  # type: ignore[union-attr]
    return transform, read_rows


def transformed_batches(
    transform: VariantTransform, src: ProfileSource, label: str, columns: Sequence[str] | None = None
) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """(record batch, its rows through the fitted variant) for every row batch of ``src``;
    the record batches hold ``columns`` (default: the features and row columns read)."""
    transform, read_rows = prepare_apply(transform, src, label)
    expected = transform.feature_names_in
    read = list(dict.fromkeys([*(columns or []), *expected, *read_rows]))
    for batch in src.batches(read):
        if not batch.num_rows:
            yield batch, np.empty((0, len(transform.feature_names_out)))
            continue
        X, b, _ = row_block(batch, expected, bool(read_rows))
        yield batch, transform.transform(check_matrix(X, label, len(expected), expected), b)


def apply_transform(
    table: pd.DataFrame, transform_path: Path | str, batch_rows: int = DEFAULT_BATCH_ROWS
) -> pd.DataFrame:
    """A profile table through one fitted variant: Metadata_* untouched + float32 features.

    The table's feature columns must be exactly the fitted ones (any order). Batches unseen
    at fit are center-scaled on their own controls; nothing is refitted. Row batch by row
    batch, as :func:`apply_transform_file` streams a parquet.
    """
    transform = load_transform(transform_path)
    label = f"profiles (transform {transform_path})"
    src = profile_source(table, batch_rows, label)
    parts = [out.astype(np.float32, copy=False) for _, out in transformed_batches(transform, src, label)]
    values = np.concatenate(parts) if parts else np.empty((0, len(transform.feature_names_out)), np.float32)
    meta = table[metadata_columns(table)]
    return pd.concat([meta, pd.DataFrame(values, columns=transform.feature_names_out, index=table.index)], axis=1)


def apply_transform_file(
    profiles_path: Path | str,
    transform_path: Path | str,
    out_path: Path | str,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> int:
    """Stream a profile parquet through one fitted variant into ``out_path`` (atomic; row
    groups of ``batch_rows`` rows): the metadata columns as they are, then float32 features.
    Memory holds one row batch. Returns the rows written."""
    transform = load_transform(transform_path)
    src = ProfileSource(profiles_path, batch_rows)
    label = f"{profiles_path} (transform {transform_path})"
    meta = split_columns(src.columns)[0]
    schema = pa.schema(
        [src.schema.field(c) for c in meta] + [pa.field(n, pa.float32()) for n in transform.feature_names_out]
    )

    def batches() -> Iterator[pa.RecordBatch]:
        for batch, values in transformed_batches(transform, src, label, meta):
            arrays = [batch.column(c) for c in meta] + [
                pa.array(col) for col in np.ascontiguousarray(values.T, dtype=np.float32)
            ]
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    return write_batches(batches(), out_path, schema, batch_rows)


def apply_transform_files(
    profiles_path: Path | str,
    transforms: Mapping[str, Path | str],
    outputs: Mapping[str, Path | str],
    batch_rows: int = DEFAULT_BATCH_ROWS,
    log: logging.Logger | None = None,
) -> dict[str, int]:
    """One model's profile parquet through each of its fitted variants, one after the other:
    ``transforms`` and ``outputs`` map each variant to its transform file and to the table it
    writes (:func:`apply_transform_file`: atomic, so a job that fails leaves the tables of the
    variants before it whole and no part of the others). Returns variant -> rows written."""
    log = log or LOG
    check_same_variants(transforms, outputs, "transforms")
    rows: dict[str, int] = {}
    for i, (variant, out_path) in enumerate(outputs.items(), 1):
        rows[variant] = apply_transform_file(profiles_path, transforms[variant], out_path, batch_rows)
        log.info("variant %s (%d of %d): %d rows", variant, i, len(outputs), rows[variant])
    return rows
