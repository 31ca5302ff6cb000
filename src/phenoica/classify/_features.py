"""The feature matrix of a profile table as the classifiers and the mAP readout read it: the
feature columns as one float array, checked, with the constant columns dropped.

Light on purpose (numpy and pandas): the mAP readout reads its matrix here without loading
LightGBM (:mod:`phenoica.classify._engine`).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from phenoica.contract import ScreenError, check_finite, feature_columns


def feature_matrix(
    table: pd.DataFrame, source: str = "table", log: logging.Logger | None = None
) -> tuple[np.ndarray, list[str]]:
    """The table's feature columns as a float array, constant columns dropped (logged).

    Raises ValueError naming the columns that are non-numeric or hold non-finite values.
    """
    log = log or logging.getLogger(__name__)
    names = feature_columns(table)
    if not names:
        raise ScreenError(f"{source}: no feature columns (every column is Metadata_*)")
    bad = [c for c in names if not pd.api.types.is_numeric_dtype(table[c]) or pd.api.types.is_bool_dtype(table[c])]
    if bad:
        raise ValueError(f"{source}: feature column(s) {bad[:10]} are not numeric")
    dtype = np.float32 if all(table[c].dtype == np.float32 for c in names) else np.float64
    X = table[names].to_numpy(dtype=dtype)
    check_finite(X, source, names)
    if len(X):
        constant = X.max(axis=0) == X.min(axis=0)
        if constant.any():
            dropped = [names[j] for j in np.flatnonzero(constant)]
            log.warning(
                "%s: dropping %d constant feature column(s) %s%s (no classifier can use them)",
                source,
                len(dropped),
                dropped[:10],
                " ..." if len(dropped) > 10 else "",
            )
            keep = np.flatnonzero(~constant)
            X = np.ascontiguousarray(X[:, keep])
            names = [names[j] for j in keep]
    return X, names
