"""Which columns of an embedding file are features (:class:`FeatureSelection`; identifier and
location columns are never chosen by prefix or regex), and list-valued embedding columns read as
float32 features."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from phenoica.contract import FEATURE_PREFIX, ScreenError, feature_name, near_miss
from phenoica.profiles._tables import Rows, as_float32, check_numeric_features, is_numeric_type, row_at

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

    prefix: str = FEATURE_PREFIX
    regex: str | None = None
    columns: tuple[str, ...] | None = None
    across_files: str = "common"  # files whose feature sets differ: "common" (those every file has) or "identical"
    min_shared: float = 0.5  # "common": refused below this share of the smallest file's features

    @classmethod
    def of(
        cls,
        prefix: str | None,
        regex: str | None,
        columns: Sequence[str] | None,
        across_files: str = "common",
        min_shared: float = 0.5,
    ) -> "FeatureSelection":
        """The selection of ``screen.feature_prefix``, ``feature_regex``, ``feature_columns``,
        ``feature_sets`` and ``min_shared_features`` (an empty prefix, regex or list is unset: the
        prefix is then phenoica's own)."""
        return cls(
            str(prefix or FEATURE_PREFIX),
            regex or None,
            tuple(columns) if columns else None,
            str(across_files),
            float(min_shared),
        )

    @classmethod
    def from_config(cls, screen_cfg: Mapping[str, Any]) -> "FeatureSelection":
        """The selection of a validated ``config["screen"]`` (:meth:`of` its keys)."""
        return cls.of(
            screen_cfg["feature_prefix"],
            screen_cfg["feature_regex"],
            screen_cfg["feature_columns"],
            screen_cfg["feature_sets"],
            screen_cfg["min_shared_features"],
        )

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
            hints = [f"{m!r} (did you mean {near_miss(m, candidates)!r}?)" for m in missing[:5]]
            raise ScreenError(
                f"{source}: column(s) {', '.join(hints)} named by screen.feature_columns not found; "
                f"its columns include {candidates[:12]}"
            )
        features = list(selection.columns)
    else:
        features = [c for c in candidates if selection.matches(c) and not is_identifier(c)]
    if not features and not exclude:
        numeric = [c for c in candidates if is_numeric_type(schema.field(c).type)]
        raise ScreenError(
            f"{source}: no feature columns: no column is chosen by {selection.describe()}; its numeric non-Metadata "
            f"columns are {numeric[:12]}{' ...' if len(numeric) > 12 else ''}. Choose the features with "
            "screen.feature_prefix, screen.feature_regex or screen.feature_columns (docs/bad-input.md)"
        )
    if features:
        check_numeric_features(schema, features, source)
    chosen = set(features)
    left_out = [c for c in candidates if c not in chosen and is_numeric_type(schema.field(c).type)]
    return features, left_out


def check_row_counters(
    path: str, schema: pa.Schema, features: Sequence[str], selection: FeatureSelection, source: Any = None
) -> None:
    """Refuse an integer feature column that increases with the row order of its file (and
    takes more than one value): a row, image or object counter such as CellProfiler's
    ``ImageNumber`` under another name, which would make every gene whose rows come late in a
    file look different. A column named in ``screen.feature_columns`` is not checked. ``source``
    is what to open for ``path`` (an export read into memory), default the path."""
    named = set(selection.columns or ())
    ints = [c for c in features if pa.types.is_integer(schema.field(c).type) and c not in named]
    if not ints:
        return
    table = pq.read_table(path if source is None else source, columns=ints)
    for col in ints:
        values = table.column(col).to_numpy(zero_copy_only=False)
        if values.size > 1 and values[-1] > values[0] and bool(np.all(np.diff(values) >= 0)):
            raise ScreenError(
                f"{path}: feature column {col!r} holds integers that increase with row order ({values[0]} at row 0 "
                f"up to {values[-1]} at row {values.size - 1}): a row, image or object counter (like CellProfiler's "
                f"ImageNumber), not a feature. Leave it out (it was chosen by {selection.describe()}), or name it in "
                "screen.feature_columns if it really is a feature"
            )


def list_matrix(
    values: pa.Array | pa.ChunkedArray, column: str, source: str, expected: int | None = None, row_offset: Rows = 0
) -> np.ndarray:
    """A list-valued column (one embedding per row) -> float32 (rows x D).

    Every row must hold ``expected`` values (default: as many as the first row).
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not (
        pa.types.is_list(values.type) or pa.types.is_large_list(values.type) or pa.types.is_fixed_size_list(values.type)
    ) or not is_numeric_type(values.type.value_type):
        raise ScreenError(f"{source}: embedding column {column!r} must hold lists of numbers, got {values.type}")
    n = len(values)
    if values.null_count:
        row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise ScreenError(f"{source}: column {column!r} row {row_at(row_offset, row)} is empty")
    if n == 0:
        return np.empty((0, expected or 0), dtype=np.float32)
    lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)
    expected = int(lengths[0]) if expected is None else expected
    if (lengths != expected).any():
        row = int(np.flatnonzero(lengths != expected)[0])
        raise ScreenError(
            f"{source}: column {column!r} row {row_at(row_offset, row)} has length {lengths[row]}, expected {expected}"
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
    values = list_matrix(pa.array(df[column], from_pandas=True), column, source)
    features = pd.DataFrame(values, columns=[feature_name(i) for i in range(values.shape[1])], index=df.index)
    return pd.concat([df.drop(columns=[column]), features], axis=1)
