"""Row blocks of a profile table for the transform stages: features, batch labels, control flags.

A profile table is read through :class:`phenoica.profiles.ProfileSource` (a parquet streamed in
row batches, or an in-memory table); each record batch becomes a :data:`RowBlock`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from phenoica.contract import BATCH, CONTROL, PERT_TYPE, ScreenError, feature_columns
from phenoica.profiles import ProfileSource, batch_features, check_numeric_features, split_columns

#: One block of rows: features (rows x features), batch labels and control flags (None when
#: the table has no such columns).
RowBlock = tuple[np.ndarray, "np.ndarray | None", "np.ndarray | None"]
#: What the table-level functions take: a profile parquet (streamed from disk), an in-memory
#: table, or a :class:`phenoica.profiles.ProfileSource`.
Profiles = pd.DataFrame | pa.Table | ProfileSource | Path | str
#: The row columns the transforms read besides the features.
ROW_COLUMNS: tuple[str, ...] = (BATCH, PERT_TYPE)


def profile_source(profiles: Profiles, batch_rows: int, label: str = "profiles") -> ProfileSource:
    """A :class:`ProfileSource` over ``profiles``; a DataFrame's features are checked numeric first."""
    if isinstance(profiles, ProfileSource):
        return profiles
    if isinstance(profiles, pd.DataFrame):
        features = feature_columns(profiles)
        non_numeric = [
            c
            for c in features
            if not pd.api.types.is_numeric_dtype(profiles[c]) or pd.api.types.is_bool_dtype(profiles[c])
        ]
        if non_numeric:
            raise ScreenError(f"{label}: feature column(s) {non_numeric[:10]} are not numeric")
        rows = [c for c in ROW_COLUMNS if c in profiles.columns]
        return ProfileSource(profiles[features + rows], batch_rows, label)
    if isinstance(profiles, pa.Table):
        return ProfileSource(profiles, batch_rows, label)
    return ProfileSource(profiles, batch_rows)


def source_features(src: ProfileSource, label: str) -> list[str]:
    """The feature columns of a profile source, checked numeric."""
    features = split_columns(src.columns)[1]
    check_numeric_features(src.schema, features, label)
    return features


def row_columns(src: ProfileSource, label: str, need: bool) -> list[str]:
    """[batch, PertType] columns when the source has them (an error when ``need`` and absent)."""
    missing = [c for c in ROW_COLUMNS if c not in src.columns]
    if missing:
        if need:
            raise ScreenError(f"{label}: missing column(s) {missing}, needed for center-scale / fit_on controls")
        return []
    return list(ROW_COLUMNS)


def column_values(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """One column of a record batch as a numpy array (dictionary columns decoded)."""
    col = batch.column(name)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    return col.to_numpy(zero_copy_only=False)


def row_block(batch: pa.RecordBatch, features: Sequence[str], rows: bool) -> RowBlock:
    """(features, batch labels, control flags) of a record batch; the labels only with ``rows``."""
    X = batch_features(batch, features)
    if not rows:
        return X, None, None
    return X, column_values(batch, BATCH), np.asarray(column_values(batch, PERT_TYPE) == CONTROL, dtype=bool)
