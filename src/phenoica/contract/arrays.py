"""The boundary checks of feature matrices, raising the data contract's errors.

- :func:`check_finite`: the one finiteness check of phenoica (a feature matrix, or one item per
  row: images, embeddings), its error naming columns or rows;
- :func:`check_matrix`: a finite, numeric, 2-D array with rows, or an error that says what was
  expected (and names the columns).

Both are built on :mod:`phenoica.utils.arrays` (no temporary the size of the data).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from phenoica.contract.screen import ScreenError
from phenoica.utils.arrays import column_labels, first_nonfinite_row, nonfinite_mask


def check_finite(
    X: np.ndarray,
    what: str,
    names: Sequence[str] | None = None,
    *,
    row_label: Callable[[int], str] | None = None,
) -> None:
    """A ScreenError when ``X`` holds NaN or inf; nothing when every value is finite.

    Without ``row_label`` ``X`` is a 2-D feature matrix and the error names its non-finite
    feature columns (``names``, else indices), how many, and the first row holding one. With
    ``row_label`` ``X`` has one item per leading-axis row (an image, an embedding) and the error
    is ``f"{what}: {row_label(i)}"`` for its first non-finite row ``i``.
    """
    if row_label is not None:
        row = first_nonfinite_row(X)
        if row is not None:
            raise ScreenError(f"{what}: {row_label(row)}")
        return
    bad = np.flatnonzero(nonfinite_mask(X))
    if not bad.size:
        return
    raise ScreenError(
        f"{what}: non-finite values (NaN or inf) in feature column(s) {column_labels(bad, names)} "
        f"({bad.size} in all; first at row {first_nonfinite_row(X)})"
    )


def check_matrix(
    X: Any, what: str = "X", n_features: int | None = None, names: Sequence[str] | None = None
) -> np.ndarray:
    """A finite, numeric, 2-D array with rows; errors say what was expected.

    Integer and bool input becomes float64; float input is returned as is (no copy).
    ``n_features``: the width the array must have (a fitted estimator's input width).
    """
    arr = np.asarray(X)
    if arr.ndim != 2:
        raise ValueError(f"{what}: expected a 2-D array (samples x features), got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{what}: expected at least one row and one feature, got shape {arr.shape}")
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"{what}: expected numeric features, got dtype {arr.dtype}")
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"{what}: has {arr.shape[1]} features, the transform was fitted on {n_features}")
    check_finite(arr, what, names)
    return arr
