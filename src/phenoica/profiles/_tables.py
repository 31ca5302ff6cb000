"""Profile parquets: their columns, row batches read (:class:`ProfileSource`) and written
(:class:`RowGroupWriter`, :func:`write_batches`) with memory bounded by ``batch_rows`` rows."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from phenoica.contract import ScreenError, feature_columns, metadata_columns
from phenoica.screen import ExportSpec, parquet_source
from phenoica.utils import atomic_path

#: Rows per streamed batch (and per written row group) when the config does not say.
DEFAULT_BATCH_ROWS = 65_536


def data_columns(schema: pa.Schema) -> list[str]:
    """Column names of an arrow/parquet schema, less the index columns pandas stored."""
    pandas_meta = schema.pandas_metadata or {}
    index = {c for c in pandas_meta.get("index_columns", []) if isinstance(c, str)}
    return [name for name in schema.names if name not in index]


def split_columns(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(metadata columns, feature columns) of a list of column names, by the contract's prefix."""
    frame = pd.DataFrame(columns=list(names))
    return metadata_columns(frame), feature_columns(frame)


def open_parquet(path: Path | str, spec: ExportSpec = ExportSpec()) -> pq.ParquetFile:
    """A parquet file opened for streaming: ``pre_buffer`` off, since with it pyarrow keeps
    the read-ahead of every row group ``iter_batches`` has passed until the end (memory then
    grows with the file: measured 430 MB -> 1.9 GB over a 1.5 GB table). An export that is not a
    Parquet file in the contract is opened as its translated table (``spec``,
    :func:`phenoica.screen.parquet_source`)."""
    return pq.ParquetFile(parquet_source(str(path), spec), pre_buffer=False)


def is_numeric_type(dtype: pa.DataType) -> bool:
    """Whether an arrow type is an integer or a float."""
    return pa.types.is_integer(dtype) or pa.types.is_floating(dtype)


def check_numeric_features(schema: pa.Schema, features: Sequence[str], source: str) -> None:
    """A ScreenError naming the feature columns of ``schema`` that are not integer or float."""
    if not features:
        raise ScreenError(f"{source}: no feature columns (every column is Metadata_*)")
    bad = [c for c in features if not is_numeric_type(schema.field(c).type)]
    if bad:
        raise ScreenError(
            f"{source}: non-numeric feature column(s) {bad[:10]} "
            f"({schema.field(bad[0]).type}); prefix metadata with Metadata_"
        )


_FLOAT32_MAX = float(np.finfo(np.float32).max)

#: How a block of rows names its rows in a message: the file's number of its first row (rows in
#: order), or each row's (an export's rows, where ``screen.rows`` and the empty wells leave gaps:
#: :func:`phenoica.screen.file_rows`).
Rows = int | np.ndarray


def row_at(rows: Rows, i: int) -> int:
    """The file's number of row ``i`` of a block whose rows are ``rows``."""
    if isinstance(rows, np.ndarray) and rows.ndim:
        return int(rows[int(i)])
    return int(rows) + int(i)


def as_float32(values: np.ndarray, names: Sequence[str], source: str, start: Rows = 0) -> np.ndarray:
    """Features as float32 (how profiles are stored); a finite value beyond float32's range
    (about 3.4e38), which would become inf, is a ScreenError naming the column and row."""
    if values.dtype == np.float32:
        return values
    with np.errstate(invalid="ignore"):
        big = np.isfinite(values) & (np.abs(values) > _FLOAT32_MAX)
    if big.any():
        row, col = (int(v[0]) for v in np.nonzero(big))
        raise ScreenError(
            f"{source}: feature column {names[col]!r} row {row_at(start, row)} holds {float(values[row, col])!r}: finite, but "
            f"beyond float32's range (+-{_FLOAT32_MAX:.3g}), in which profiles are stored; rescale the features"
        )
    return values.astype(np.float32)


def batch_features(batch: pa.RecordBatch | pa.Table, features: Sequence[str]) -> np.ndarray:
    """The feature columns of a row batch as one (rows x features) array.

    float32 when every column is float32, else float64 (nulls become NaN). Column-major, so
    each column is one contiguous copy.
    """
    columns = [batch.column(c) for c in features]
    dtype = np.float32 if all(c.type == pa.float32() for c in columns) else np.float64
    out = np.empty((len(features), batch.num_rows), dtype=dtype)
    for j, col in enumerate(columns):
        out[j] = col.to_numpy(zero_copy_only=False)
    return out.T


class ProfileSource:
    """A profile table read in row batches, as often as asked: a parquet file (streamed from
    disk with ``ParquetFile.iter_batches``) or an in-memory arrow table / DataFrame.

    ``columns`` are the data columns (pandas index columns left out); ``num_rows`` comes from
    the parquet metadata without reading data.
    """

    def __init__(
        self, data: pa.Table | pd.DataFrame | Path | str, batch_rows: int = DEFAULT_BATCH_ROWS, label: str | None = None
    ) -> None:
        if int(batch_rows) < 1:
            raise ValueError(f"batch_rows: expected a positive row count, got {batch_rows}")
        self.batch_rows = int(batch_rows)
        self._table: pa.Table | None = None
        self._path: Path | None = None
        if isinstance(data, pd.DataFrame):
            data = pa.Table.from_pandas(data, preserve_index=False)
        if isinstance(data, pa.Table):
            self._table = data
            self.schema = data.schema
            self.num_rows = data.num_rows
            self.label = label or "profiles"
        else:
            self._path = Path(data)
            if not self._path.exists():
                raise FileNotFoundError(f"{self._path}: profile table not found")
            with open_parquet(self._path) as pf:
                self.schema = pf.schema_arrow
                self.num_rows = pf.metadata.num_rows
            self.label = label or str(self._path)
        self.columns = data_columns(self.schema)

    def batches(self, columns: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
        """Row batches of at most ``batch_rows`` rows holding ``columns`` (default: all data columns)."""
        columns = list(self.columns if columns is None else columns)
        missing = [c for c in columns if c not in self.columns]
        if missing:
            raise ScreenError(f"{self.label}: missing column(s) {missing}")
        if self._table is not None:
            yield from self._table.select(columns).to_batches(max_chunksize=self.batch_rows)
            return
        with open_parquet(self._path) as pf:  # type: ignore[arg-type]
            yield from pf.iter_batches(batch_size=self.batch_rows, columns=columns)


class RowGroupWriter:
    """Record batches -> a parquet file in row groups of ``batch_rows`` rows (small batches are
    buffered until a row group is full). Use inside :func:`phenoica.utils.atomic_path`."""

    def __init__(self, path: Path | str, schema: pa.Schema, batch_rows: int = DEFAULT_BATCH_ROWS) -> None:
        self.schema = schema.remove_metadata()
        self.batch_rows = int(batch_rows)
        # Metadata repeats: dictionary-encoded and compressed. Features are high-entropy floats:
        # dictionary pages and compression cost CPU for no space (reading a 384-feature table
        # ~3x faster), so they are stored plain.
        meta, features = split_columns(self.schema.names)
        self._writer = pq.ParquetWriter(
            str(path),
            self.schema,
            use_dictionary=meta,
            compression={**{c: "snappy" for c in meta}, **{c: "none" for c in features}},
        )
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self.rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        """Queue one batch (of this writer's schema); full row groups are written at once."""
        if batch.num_rows == 0:
            return
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        if self._pending_rows >= self.batch_rows:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        full = table.num_rows if final else table.num_rows - table.num_rows % self.batch_rows
        if full:
            self._writer.write_table(table.slice(0, full), row_group_size=self.batch_rows)
            self.rows += full
        rest = table.slice(full)
        self._pending = rest.to_batches()
        self._pending_rows = rest.num_rows

    def close(self) -> None:
        """Write what is left and the footer."""
        if self._pending_rows:
            self._flush(final=True)
        self._writer.close()

    def __enter__(self) -> "RowGroupWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:  # type: ignore[no-untyped-def]
        if exc_type is None:
            self.close()
        else:
            self._writer.close()


def write_batches(
    batches: Iterable[pa.RecordBatch], path: Path | str, schema: pa.Schema, batch_rows: int = DEFAULT_BATCH_ROWS
) -> int:
    """Write record batches of ``schema`` to a parquet file atomically, in row groups of
    ``batch_rows`` rows; returns the rows written."""
    with atomic_path(path) as tmp, RowGroupWriter(tmp, schema, batch_rows) as writer:
        for batch in batches:
            writer.write(batch)
    return writer.rows
