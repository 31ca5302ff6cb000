"""Gather per-plate embeddings into one profile table, from phenoica or from elsewhere; read
profile tables back row batch by row batch.

Entry points: the embed rule's parquet files, or any parquet in the data contract's shape
(``Metadata_*`` columns + numeric feature columns, or one list-valued embedding column).
Analysis level: per image, or per well (mean of the well's images).

Everything streams, so a screen of tens of millions of images needs no large node:

- :func:`write_profiles` reads each embedding file in row batches (``pyarrow`` ``iter_batches``)
  and writes the profile parquet with a ``ParquetWriter`` (row groups of ``batch_rows`` rows),
  atomically. Every batch is validated as it passes (profile metadata, finite numeric
  features, the same feature columns in every file); the "gene under two PertTypes" check holds
  across files through a running gene -> PertType map.
- Well level: wells never span plates, so each input file (a plate) is averaged on its own
  before it is written; a first, metadata-only pass over the files decides which metadata
  columns are constant within every well (those are kept, as in :func:`aggregate_wells`).
  Memory then holds one file's wells at a time: give one file per plate (or a few).
- :class:`ProfileSource` yields row batches of a profile parquet (or of an in-memory table)
  for the transform stages, pass after pass.

Memory is bounded by ``batch_rows`` rows (default :data:`DEFAULT_BATCH_ROWS`), not by the
screen. The output has the metadata columns first (the union over the files, in order of
appearance; a column a file lacks is null there), then the float32 features.
"""

from __future__ import annotations

import glob
import itertools
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from scipy import sparse

from phenoica import screen
from phenoica.arrays import nonfinite_columns, row_chunks
from phenoica.io import atomic_path
from phenoica.screen import (
    BATCH,
    CONTROL,
    GENE,
    GUIDE,
    PERT_TYPE,
    PLATE,
    WELL,
    ScreenError,
    feature_columns,
    feature_name,
    metadata_columns,
)
from phenoica.sources.h5ad import parquet_source

#: Rows per streamed batch (and per written row group) when the config does not say.
DEFAULT_BATCH_ROWS = 65_536
#: The per-well image count a well-level table carries.
N_IMAGES = "Metadata_NImages"
LEVELS = ("image", "well")


# --------------------------------------------------------------------------- arrow helpers


def data_columns(schema: pa.Schema) -> list[str]:
    """Column names of an arrow/parquet schema, less the index columns pandas stored."""
    pandas_meta = schema.pandas_metadata or {}
    index = {c for c in pandas_meta.get("index_columns", []) if isinstance(c, str)}
    return [name for name in schema.names if name not in index]


def split_columns(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(metadata columns, feature columns) of a list of column names, by the contract's prefix."""
    frame = pd.DataFrame(columns=list(names))
    return metadata_columns(frame), feature_columns(frame)


def open_parquet(path: Path | str) -> pq.ParquetFile:
    """A parquet file opened for streaming: ``pre_buffer`` off, since with it pyarrow keeps
    the read-ahead of every row group ``iter_batches`` has passed until the end (memory then
    grows with the file: measured 430 MB -> 1.9 GB over a 1.5 GB table)."""
    return pq.ParquetFile(parquet_source(str(path)), pre_buffer=False)


def _numeric(dtype: pa.DataType) -> bool:
    return pa.types.is_integer(dtype) or pa.types.is_floating(dtype)


def check_numeric_features(schema: pa.Schema, features: Sequence[str], source: str) -> None:
    """A ScreenError naming the feature columns of ``schema`` that are not integer or float."""
    if not features:
        raise ScreenError(f"{source}: no feature columns (every column is Metadata_*)")
    bad = [c for c in features if not _numeric(schema.field(c).type)]
    if bad:
        raise ScreenError(
            f"{source}: non-numeric feature column(s) {bad[:10]} "
            f"({schema.field(bad[0]).type}); prefix metadata with Metadata_"
        )


#: Columns that identify or locate an object, an image or a row in the exports of CellProfiler
#: (ImageNumber, ObjectNumber, ``<Object>_Number_Object_Number``, ``<Object>_Parent_<Object>``,
#: ``<Object>_Location_Center_X``, ``Location_CenterMassIntensity_X_<channel>``,
#: ``AreaShape_Center_X``, ``AreaShape_BoundingBoxMinimum_X``), cytominer-database / CytoTable
#: (TableNumber), pycytominer and JUMP (``Metadata_*``, also inside a name such as
#: ``Image_Metadata_Site``), DeepProfiler (``Location_Center_X/Y`` of its locations) and pandas
#: (a saved index): never features unless named in ``screen.feature_columns``. Matched against
#: the whole column name, case-insensitively, with or without an object prefix (``Cells_``).
IDENTIFIER_PATTERNS: tuple[str, ...] = (
    r"(?:.+_)?(?:TableNumber|ImageNumber|ObjectNumber)(?:_.+)?",
    r"(?:.+_)?Number_Object_Number",
    r"(?:.+_)?Parent_.+",
    r"(?:.+_)?Location_.+",
    r"(?:.+_)?AreaShape_(?:Center|BoundingBoxMinimum|BoundingBoxMaximum)_[XYZ]",
    r"(?:.+_)?(?:Site|Field|FieldID|FieldNumber|Fov|Tile|TileIndex|ImageIndex|Well|Plate|Row|Col|Column|[XYZ])",
    r".*Metadata_.*",
    r"index|level_\d+|__index_level_\d+__|Unnamed: \d+",
)
_IDENTIFIER = re.compile("|".join(f"(?:{p})" for p in IDENTIFIER_PATTERNS), re.IGNORECASE)

log = logging.getLogger(__name__)


def is_identifier(name: str) -> bool:
    """Whether a column name is a known identifier or location column (:data:`IDENTIFIER_PATTERNS`)."""
    return _IDENTIFIER.fullmatch(str(name)) is not None


@dataclass(frozen=True)
class FeatureSelection:
    """Which columns of an embedding file are features (``config["screen"]``'s
    ``feature_prefix``, ``feature_regex``, ``feature_columns``): the numeric columns whose name
    starts with ``prefix`` (default ``emb_``, phenoica's own), else whose whole name matches
    ``regex``, else exactly ``columns`` (in that order). By prefix or regex, identifier and
    location columns (:func:`is_identifier`) are left out and an integer column that counts up
    with the rows of a file is refused; a column named in ``columns`` is a feature as given."""

    prefix: str = screen.FEATURE_PREFIX
    regex: str | None = None
    columns: tuple[str, ...] | None = None

    @classmethod
    def from_config(cls, screen_cfg: Mapping[str, Any]) -> "FeatureSelection":
        """The selection of a validated ``config["screen"]``."""
        columns = screen_cfg.get("feature_columns")
        return cls(
            str(screen_cfg.get("feature_prefix") or screen.FEATURE_PREFIX),
            screen_cfg.get("feature_regex") or None,
            tuple(columns) if columns else None,
        )

    def params(self) -> dict[str, Any]:
        """The selection as a rule's params (what the gathered profiles depend on)."""
        return {"prefix": self.prefix, "regex": self.regex, "columns": list(self.columns) if self.columns else None}

    def describe(self) -> str:
        """The config key that chose the features, in words."""
        if self.columns is not None:
            return f"screen.feature_columns {list(self.columns)[:6]}{' ...' if len(self.columns) > 6 else ''}"
        if self.regex is not None:
            return f"screen.feature_regex {self.regex!r}"
        return f"screen.feature_prefix {self.prefix!r}"

    def matches(self, name: str) -> bool:
        """Whether a (non-metadata) column is chosen by the prefix or regex (not by name)."""
        if self.regex is not None:
            return re.fullmatch(self.regex, name) is not None
        return name.startswith(self.prefix)


def choose_features(
    schema: pa.Schema, columns: Sequence[str], selection: FeatureSelection, source: str, exclude: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """(the feature columns of a file, its numeric columns left out) under ``selection``.

    ``columns`` are the file's data columns; ``exclude`` (an embedding column) is neither.
    Raises ScreenError naming the file and the config key when a named column is absent, a
    chosen column is not numeric, or nothing is chosen (the columns present are listed).
    """
    candidates = [c for c in columns if not str(c).startswith("Metadata_") and c not in exclude]
    if selection.columns is not None:
        missing = [c for c in selection.columns if c not in columns]
        if missing:
            hints = [f"{m!r} (did you mean {screen.near_miss(m, candidates)!r}?)" for m in missing[:5]]
            raise ScreenError(
                f"{source}: column(s) {', '.join(hints)} named by screen.feature_columns not found; "
                f"its columns include {candidates[:12]}"
            )
        features = list(selection.columns)
    else:
        features = [c for c in candidates if selection.matches(c) and not is_identifier(c)]
    if not features and not exclude:
        numeric = [c for c in candidates if _numeric(schema.field(c).type)]
        raise ScreenError(
            f"{source}: no feature columns: no column is chosen by {selection.describe()}; its numeric non-Metadata "
            f"columns are {numeric[:12]}{' ...' if len(numeric) > 12 else ''}. Choose the features with "
            "screen.feature_prefix, screen.feature_regex or screen.feature_columns (docs/bad-input.md)"
        )
    if features:
        check_numeric_features(schema, features, source)
    chosen = set(features)
    left_out = [c for c in candidates if c not in chosen and _numeric(schema.field(c).type)]
    return features, left_out


def check_row_counters(path: str, schema: pa.Schema, features: Sequence[str], selection: FeatureSelection) -> None:
    """Refuse an integer feature column that increases with the row order of its file (and
    takes more than one value): a row, image or object counter such as CellProfiler's
    ``ImageNumber`` under another name, which would make every gene whose rows come late in a
    file look different. A column named in ``screen.feature_columns`` is not checked."""
    named = set(selection.columns or ())
    ints = [c for c in features if pa.types.is_integer(schema.field(c).type) and c not in named]
    if not ints:
        return
    table = pq.read_table(path, columns=ints)
    for col in ints:
        values = table.column(col).to_numpy(zero_copy_only=False)
        if values.size > 1 and values[-1] > values[0] and bool(np.all(np.diff(values) >= 0)):
            raise ScreenError(
                f"{path}: feature column {col!r} holds integers that increase with row order ({values[0]} at row 0 "
                f"up to {values[-1]} at row {values.size - 1}): a row, image or object counter (like CellProfiler's "
                f"ImageNumber), not a feature. Leave it out (it was chosen by {selection.describe()}), or name it in "
                "screen.feature_columns if it really is a feature"
            )


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def as_float32(values: np.ndarray, names: Sequence[str], source: str, start: int = 0) -> np.ndarray:
    """Features as float32 (how profiles are stored); a finite value beyond float32's range
    (about 3.4e38), which would become inf, is a ScreenError naming the column and row."""
    if values.dtype == np.float32:
        return values
    with np.errstate(invalid="ignore"):
        big = np.isfinite(values) & (np.abs(values) > _FLOAT32_MAX)
    if big.any():
        row, col = (int(v[0]) for v in np.nonzero(big))
        raise ScreenError(
            f"{source}: feature column {names[col]!r} row {row + start} holds {float(values[row, col])!r}: finite, but "
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
    buffered until a row group is full). Use inside :func:`phenoica.io.atomic_path`."""

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


# --------------------------------------------------------------------------- embedding columns


def _list_matrix(
    values: pa.Array | pa.ChunkedArray, column: str, source: str, expected: int | None = None, row_offset: int = 0
) -> np.ndarray:
    """A list-valued column (one embedding per row) -> float32 (rows x D).

    Every row must hold ``expected`` values (default: as many as the first row).
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not (
        pa.types.is_list(values.type) or pa.types.is_large_list(values.type) or pa.types.is_fixed_size_list(values.type)
    ) or not _numeric(values.type.value_type):
        raise ScreenError(f"{source}: embedding column {column!r} must hold lists of numbers, got {values.type}")
    n = len(values)
    if values.null_count:
        row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise ScreenError(f"{source}: column {column!r} row {row + row_offset} is empty")
    if n == 0:
        return np.empty((0, expected or 0), dtype=np.float32)
    lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)
    expected = int(lengths[0]) if expected is None else expected
    if (lengths != expected).any():
        row = int(np.flatnonzero(lengths != expected)[0])
        raise ScreenError(
            f"{source}: column {column!r} row {row + row_offset} has length {lengths[row]}, expected {expected}"
        )
    flat = values.flatten().to_numpy(zero_copy_only=False).reshape(n, expected)
    if flat.dtype != np.float32:
        flat = as_float32(
            flat.astype(np.float64, copy=False), [f"{column}[{i}]" for i in range(expected)], source, row_offset
        )
    return flat


def expand_embedding_column(df: pd.DataFrame, column: str, source: str = "embeddings") -> pd.DataFrame:
    """Replace one list-valued embedding column by float32 ``emb_*`` columns."""
    if column not in df.columns:
        raise ScreenError(f"{source}: embedding column {column!r} not found; columns are {list(df.columns)[:12]}")
    values = _list_matrix(pa.array(df[column], from_pandas=True), column, source)
    features = pd.DataFrame(values, columns=[feature_name(i) for i in range(values.shape[1])], index=df.index)
    return pd.concat([df.drop(columns=[column]), features], axis=1)


# --------------------------------------------------------------------------- the files


@dataclass
class _File:
    """What the footer of one embedding file says: its data columns, metadata and features."""

    path: str
    columns: list[str]
    metadata: list[str]
    features: list[str]  # numeric feature columns read as they are (besides the embedding column)


@dataclass
class _Plan:
    """The files and the output's metadata schema (the union over the files, types unified)."""

    files: list[_File]
    metadata: pa.Schema
    embedding_column: str | None
    left_out: list[str]  # numeric columns that are not features (the union over the files)


def _plain_type(dtype: pa.DataType) -> pa.DataType:
    """Dictionary-encoded columns are written as their values."""
    return dtype.value_type if pa.types.is_dictionary(dtype) else dtype


def _plan(
    paths: Sequence[Path | str], embedding_column: str | None, selection: FeatureSelection | None = None
) -> _Plan:
    """Read every file's footer: columns, the features chosen (:func:`choose_features`) and
    checked (:func:`check_row_counters`), and one metadata schema for all files."""
    selection = selection or FeatureSelection()
    files: list[_File] = []
    fields: dict[str, list[tuple[str, pa.Field]]] = {}
    reference: _File | None = None
    left_out: dict[str, None] = {}
    for path in paths:
        path = str(path)
        if not Path(path).exists():
            raise FileNotFoundError(f"{path}: embedding file not found")
        try:
            schema = pq.read_schema(parquet_source(path))
        except (pa.ArrowInvalid, OSError) as exc:
            raise ScreenError(f"{path}: not a readable parquet file ({exc})") from None
        columns = data_columns(schema)
        meta = [c for c in columns if str(c).startswith("Metadata_")]
        if embedding_column is not None and embedding_column not in columns:
            raise ScreenError(f"{path}: embedding column {embedding_column!r} not found; columns are {columns[:12]}")
        exclude = [embedding_column] if embedding_column is not None else []
        if embedding_column is not None:
            features: list[str] = []
            left = [c for c in columns if c not in meta and c != embedding_column and _numeric(schema.field(c).type)]
        else:
            features, left = choose_features(schema, columns, selection, path, exclude)
            check_row_counters(path, schema, features, selection)
        left_out.update(dict.fromkeys(left))
        info = _File(path, columns, meta, features)
        if reference is None:
            reference = info
        elif features != reference.features:
            raise ScreenError(
                f"{path}: feature columns differ from {reference.path} ({len(features)} vs "
                f"{len(reference.features)} columns{_first_difference(features, reference.features)})"
            )
        for name in meta:
            fields.setdefault(name, []).append((path, schema.field(name)))
        files.append(info)
    out = []
    for name, seen in fields.items():
        if name in screen.PROFILE_COLUMNS:
            out.append(pa.field(name, pa.string()))
            continue
        try:
            unified = pa.unify_schemas(
                [pa.schema([pa.field(name, _plain_type(f.type))]) for _, f in seen], promote_options="permissive"
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            kinds = {}
            for path, f in seen:
                kinds.setdefault(str(_plain_type(f.type)), path)
            raise ScreenError(
                f"column {name} has incompatible types across files: "
                + ", ".join(f"{t} in {p}" for t, p in kinds.items())
            ) from None
        out.append(unified.field(name))
    return _Plan(files, pa.schema(out), embedding_column, list(left_out))


def plan_embeddings(
    paths: Sequence[Path | str], embedding_column: str | None = None, selection: FeatureSelection | None = None
) -> tuple[list[str], list[str]]:
    """(the feature columns, the numeric columns left out) of a set of embedding files, from
    their footers (and their integer feature columns): every check of the feature columns
    :func:`write_profiles` makes, before any row is read. The features of a list-valued
    ``embedding_column`` are named ``emb_0000 ...`` once read: here they are ``[column]``."""
    plan = _plan(paths, embedding_column, selection)
    features = plan.files[0].features if plan.files else []
    return (features or [str(embedding_column)]), plan.left_out


def _log_left_out(plan: _Plan, selection: FeatureSelection | None) -> None:
    """The numeric columns that are not features, once, in the log."""
    if not plan.left_out:
        return
    ids = [c for c in plan.left_out if is_identifier(c)]
    other = [c for c in plan.left_out if c not in set(ids)]
    how = (
        f"embedding_column {plan.embedding_column!r}"
        if plan.embedding_column is not None
        else (selection or FeatureSelection()).describe()
    )
    log.info(
        "features: %d numeric column(s) left out (not chosen by %s): identifier/location columns %s; others %s",
        len(plan.left_out),
        how,
        ids,
        other,
    )


def _first_difference(a: Sequence[str], b: Sequence[str]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"; column {i} is {x!r}, expected {y!r}"
    return ""


@dataclass
class _Block:
    """One validated row batch of an embedding file."""

    batch: pa.RecordBatch  # the file's columns
    features: np.ndarray  # float32 (rows x D)
    names: list[str]  # feature names
    start: int  # first row, counted in the file


class _GeneTypes:
    """The data contract across files, kept as the files stream by: no gene a control in one
    file and a perturbation in another, no guide under two genes, and (:meth:`finish`) controls
    in every batch."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[str, str]] = {}
        self.guides: dict[str, tuple[str, str]] = {}
        self.batches: dict[str, bool] = {}

    def update(self, meta: pd.DataFrame, source: str) -> None:
        pairs = meta[[GENE, PERT_TYPE]].astype(str).drop_duplicates()
        for gene, kind in zip(pairs[GENE].tolist(), pairs[PERT_TYPE].tolist()):
            known = self.seen.setdefault(gene, (kind, source))
            if known[0] != kind:
                raise ScreenError(
                    f"gene {gene!r} is listed under both PertTypes: {known[0]} in {known[1]}, {kind} in {source}"
                )
        pairs = meta[[GUIDE, GENE]].astype(str).drop_duplicates()
        for guide, gene in zip(pairs[GUIDE].tolist(), pairs[GENE].tolist()):
            known = self.guides.setdefault(guide, (gene, source))
            if known[0] != gene:
                raise ScreenError(
                    f"guide {guide!r} is listed under 2 genes: {known[0]!r} in {known[1]}, {gene!r} in {source}; "
                    "a guide targets one gene"
                )
        controls = meta[PERT_TYPE].astype(str) == CONTROL
        for batch, has in pd.Series(controls.to_numpy()).groupby(meta[BATCH].astype(str).to_numpy()).any().items():
            self.batches[str(batch)] = self.batches.get(str(batch), False) or bool(has)

    def finish(self, sources: Sequence[str]) -> None:
        """Raise ScreenError if a batch of the files has no control row."""
        missing = sorted(b for b, has in self.batches.items() if not has)
        if missing:
            shown = ", ".join(map(str, sources[:3])) + (" ..." if len(sources) > 3 else "")
            raise ScreenError(
                f"{shown}: batch(es) {missing[:10]} have no control rows ({PERT_TYPE} == {CONTROL!r}); every "
                "batch needs controls: they are the reference its profiles are centred on and classified against"
            )


def _read_blocks(
    file: _File, plan: _Plan, batch_rows: int, reference: list[str] | None, genes: _GeneTypes | None
) -> Iterator[_Block]:
    """Row batches of one embedding file, validated: profile metadata (if ``genes`` is given),
    the embedding column expanded, finite features, feature names equal to ``reference``."""
    with open_parquet(file.path) as pf:
        start = 0
        for batch in pf.iter_batches(batch_size=batch_rows, columns=file.columns):
            if batch.num_rows == 0:
                continue
            if genes is not None:
                present = [c for c in screen.PROFILE_COLUMNS if c in file.columns]
                meta = screen.normalize_names(batch.select(present).to_pandas())
                meta.index = pd.RangeIndex(start, start + len(meta))  # errors name rows of the file
                screen.validate_profile_metadata(meta, source=file.path)
                genes.update(meta, file.path)
            X, names = _block_features(batch, file, plan, reference, start)
            bad = nonfinite_columns(X, names)
            if bad:
                raise ScreenError(f"{file.path}: non-finite values (NaN/inf) in feature column(s) {bad[:10]}")
            reference = names
            yield _Block(batch, X, names, start)
            start += batch.num_rows


def _block_features(
    batch: pa.RecordBatch, file: _File, plan: _Plan, reference: list[str] | None, start: int
) -> tuple[np.ndarray, list[str]]:
    """float32 features of a row batch and their names (the embedding column expanded)."""
    parts, names = [], list(file.features)
    if file.features:
        parts.append(as_float32(batch_features(batch, file.features), file.features, file.path, start))
    if plan.embedding_column is not None:
        expected = None if reference is None else len(reference) - len(file.features)
        values = _list_matrix(batch.column(plan.embedding_column), plan.embedding_column, file.path, expected, start)
        parts.append(values)
        names += [feature_name(i) for i in range(values.shape[1])]
    if reference is not None and names != reference:
        raise ScreenError(
            f"{file.path}: feature columns differ from the first file's ({len(names)} vs {len(reference)} columns)"
        )
    X = parts[0] if len(parts) == 1 else np.hstack(parts)
    return X, names


def _metadata_arrays(batch: pa.RecordBatch, schema: pa.Schema) -> list[pa.Array]:
    """The batch's metadata columns in ``schema``'s order and types; absent ones null."""
    arrays = []
    for field in schema:
        if field.name in batch.schema.names:
            values = batch.column(field.name).cast(field.type)
            if field.name in screen.KEY_COLUMNS and pa.types.is_string(field.type):
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


# --------------------------------------------------------------------------- well level


def constant_within_wells(meta: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """Those of ``columns`` whose value never changes within a (plate, well) of ``meta``."""
    if meta.empty:
        return list(columns)
    nunique = meta.groupby([PLATE, WELL], sort=False, observed=True)[list(columns)].nunique(dropna=False)
    return [c for c in columns if (nunique[c] <= 1).all()]


class WellMeans:
    """Running per-well feature sums (float64) over the row batches of one plate's file.

    ``update(meta, X)`` adds rows (``meta``: an arrow batch with the plate, well and kept
    metadata columns); ``result()`` returns the wells sorted by (plate, well): their first
    row's metadata, the image count and the float32 mean features.
    """

    def __init__(self, kept: Sequence[str], n_features: int) -> None:
        self.kept = [PLATE, WELL, *[c for c in kept if c not in (PLATE, WELL)]]
        self.ids: dict[tuple, int] = {}
        self.first: list[pa.Table] = []
        self.sums = np.zeros((0, n_features))
        self.counts = np.zeros(0, dtype=np.int64)

    def update(self, meta: pa.RecordBatch | pa.Table, X: np.ndarray) -> None:
        """Add the rows of ``meta`` with features ``X``."""
        keys = pd.DataFrame({PLATE: meta.column(PLATE).to_pandas(), WELL: meta.column(WELL).to_pandas()})
        local = keys.groupby([PLATE, WELL], sort=False, dropna=False).ngroup().to_numpy()
        firsts = np.unique(local, return_index=True)[1]
        ids = np.empty(firsts.size, dtype=np.int64)
        new = []
        for g, row in enumerate(firsts):
            key = (keys[PLATE].iat[row], keys[WELL].iat[row])
            if key not in self.ids:
                self.ids[key] = len(self.ids)
                new.append(row)
            ids[g] = self.ids[key]
        if new:
            table = meta if isinstance(meta, pa.Table) else pa.Table.from_batches([meta])
            self.first.append(table.select(self.kept).take(pa.array(new)))
            grow = len(self.ids) - self.counts.size
            self.sums = np.vstack([self.sums, np.zeros((grow, self.sums.shape[1]))])
            self.counts = np.concatenate([self.counts, np.zeros(grow, dtype=np.int64)])
        self.counts[ids] += np.bincount(local, minlength=firsts.size)
        for rows in row_chunks(len(local)):
            part = local[rows]
            indicator = sparse.csr_matrix(
                (np.ones(part.size), (part, np.arange(part.size))), shape=(firsts.size, part.size)
            )
            self.sums[ids] += indicator @ np.asarray(X[rows], dtype=np.float64)

    def result(self) -> tuple[pa.Table, np.ndarray]:
        """(metadata of every well + ``Metadata_NImages``, float32 mean features), sorted by (plate, well)."""
        if not self.first:
            raise ScreenError("well-level aggregation: no rows")
        meta = pa.concat_tables(self.first)
        meta = meta.append_column(N_IMAGES, pa.array(self.counts))
        means = (self.sums / self.counts[:, None]).astype(np.float32)
        keys = pd.DataFrame({"p": meta.column(PLATE).to_pandas(), "w": meta.column(WELL).to_pandas()})
        order = keys.sort_values(["p", "w"], kind="stable").index.to_numpy()
        return meta.take(pa.array(order)), means[order]


def _well_plan(plan: _Plan, genes: _GeneTypes) -> list[str]:
    """The metadata-only first pass of well-level gathering, one file at a time: validates
    every file's profile metadata, checks that no well spans two files, and returns the
    metadata columns constant within every well of every file (the ones kept)."""
    candidates = [c for c in plan.metadata.names if c not in (PLATE, WELL)]
    kept = set(candidates)
    wells: dict[tuple, str] = {}
    for file in plan.files:
        if WELL not in file.metadata:
            raise ScreenError(f"{file.path}: well-level analysis needs the {WELL} column")
        meta = screen.normalize_names(pq.read_table(parquet_source(file.path), columns=file.metadata).to_pandas())
        screen.validate_profile_metadata(meta, source=file.path)
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
) -> Iterator[pa.RecordBatch]:
    """Embedding files -> profile row batches at the requested level (image or well), validated.

    All batches share one schema: metadata columns (the union over the files; a profile
    column as string, identifier names without surrounding whitespace), then float32
    features: those ``selection`` chooses (default: the ``emb_`` columns; see
    :class:`FeatureSelection`), or a list-valued ``embedding_column`` expanded. The numeric
    columns left out are listed once in the log. Image level: at most ``batch_rows`` rows per
    batch. Well level: one batch per file (its wells, sorted by plate and well).
    """
    if level not in LEVELS:
        raise ValueError(f"profiles.level must be 'image' or 'well', got {level!r}")
    if int(batch_rows) < 1:
        raise ValueError(f"batch_rows: expected a positive row count, got {batch_rows}")
    if not paths:
        raise ScreenError("no embedding files given")
    plan = _plan(paths, embedding_column, selection)
    _log_left_out(plan, selection)
    genes = _GeneTypes()
    reference: list[str] | None = None
    schema: pa.Schema | None = None
    if level == "image":
        for file in plan.files:
            for block in _read_blocks(file, plan, batch_rows, reference, genes):
                reference = block.names
                schema = schema or _output_schema(plan.metadata, block.names)
                arrays = _metadata_arrays(block.batch, plan.metadata) + _feature_arrays(block.features)
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)
        genes.finish([f.path for f in plan.files])
        return
    kept = _well_plan(plan, genes)
    genes.finish([f.path for f in plan.files])
    meta_schema = pa.schema(
        [plan.metadata.field(PLATE), plan.metadata.field(WELL)]
        + [plan.metadata.field(c) for c in kept]
        + [pa.field(N_IMAGES, pa.int64())]
    )
    for file in plan.files:
        wells: WellMeans | None = None
        for block in _read_blocks(file, plan, batch_rows, reference, None):
            reference = block.names
            wells = wells or WellMeans(kept, len(block.names))
            wells.update(_with_columns(block.batch, [PLATE, WELL, *kept], plan.metadata), block.features)
        if wells is None:
            continue
        meta, means = wells.result()
        schema = schema or _output_schema(meta_schema, reference)  # type: ignore[arg-type]
        arrays = _metadata_arrays(meta.combine_chunks().to_batches()[0], meta_schema) + _feature_arrays(means)
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _with_columns(batch: pa.RecordBatch, columns: Sequence[str], schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` restricted to ``columns`` in the output types, absent ones as nulls."""
    sub = pa.schema([schema.field(c) for c in columns])
    return pa.RecordBatch.from_arrays(_metadata_arrays(batch, sub), schema=sub)


def write_batches(
    batches: Iterable[pa.RecordBatch], path: Path | str, schema: pa.Schema, batch_rows: int = DEFAULT_BATCH_ROWS
) -> int:
    """Write record batches of ``schema`` to a parquet file atomically, in row groups of
    ``batch_rows`` rows; returns the rows written."""
    with atomic_path(path) as tmp, RowGroupWriter(tmp, schema, batch_rows) as writer:
        for batch in batches:
            writer.write(batch)
    return writer.rows


def write_profiles(
    paths: Sequence[Path | str],
    out: Path | str,
    level: str = "image",
    embedding_column: str | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    selection: FeatureSelection | None = None,
) -> int:
    """Stream embedding files into one profile parquet at ``out`` (atomic; row groups of
    ``batch_rows`` rows; features chosen by ``selection``, see :func:`iter_profiles`); returns
    the number of profile rows written."""
    batches = iter_profiles(paths, level, embedding_column, batch_rows, selection)
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
) -> pd.DataFrame:
    """Embedding files -> one profile table in memory, for use in Python (see
    :func:`iter_profiles`; ``level="image"`` reads the embeddings as they are, validated, with a
    list-valued ``embedding_column`` expanded). For large screens write the table with
    :func:`write_profiles` instead (what the ``gather_profiles`` rule does)."""
    batches = list(iter_profiles(paths, level, embedding_column, batch_rows, selection))
    if not batches:
        raise ScreenError(f"no rows in any of the {len(paths)} embedding file(s) (first: {paths[0]})")
    return pa.Table.from_batches(batches).to_pandas()


def aggregate_wells(df: pd.DataFrame) -> pd.DataFrame:
    """Mean profile per (plate, well); metadata constant within a well is kept, the rest dropped."""
    if WELL not in df.columns:
        raise ScreenError(f"well-level analysis needs the {WELL} column")
    meta = metadata_columns(df)
    features = feature_columns(df)
    kept = constant_within_wells(df, [c for c in meta if c not in (PLATE, WELL)])
    table = pa.Table.from_pandas(df[[PLATE, WELL, *kept]], preserve_index=False)
    wells = WellMeans(kept, len(features))
    wells.update(table, df[features].to_numpy())
    out_meta, means = wells.result()
    out = out_meta.to_pandas()
    values = pd.DataFrame(means, columns=features, index=out.index)
    return pd.concat([out, values], axis=1)


def expand_glob(pattern: str) -> list[str]:
    """Sorted files matching a glob; a clear error when nothing matches."""
    files = sorted(glob.glob(pattern))
    if not files:
        raise ScreenError(f"screen.embeddings: no file matches {pattern!r}")
    return files
