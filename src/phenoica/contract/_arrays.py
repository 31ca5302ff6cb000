"""The checks of feature matrices, the one home of each, raising the data contract's errors.

- :func:`check_finite`: the one finiteness check of phenoica (a feature matrix, or one item per
  row: images, embeddings), its error naming columns or rows;
- :func:`check_matrix`: a finite, numeric, 2-D array with rows, or an error that says what was
  expected (and names the columns);
- :func:`check_rows`: a 1-D array of one value per row (batches, control flags);
- :func:`nonfinite_mask`, :func:`nonfinite_columns`, :func:`first_nonfinite_row`: which feature
  columns (or rows: images, embeddings) hold NaN or inf, without a temporary the size of the
  data (row chunk by row chunk); :func:`column_labels`: the columns as an error names them.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from phenoica.contract._screen_data import ScreenError
from phenoica.utils import row_chunks


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


def column_labels(idx: Sequence[int] | np.ndarray, names: Sequence[str] | None, limit: int = 10) -> str:
    """Readable list of feature columns by name (if known) or index: ``['emb_0001', ...] (+3 more)``."""
    idx = [int(i) for i in idx]
    shown = [names[i] for i in idx[:limit]] if names is not None else [f"feature {i}" for i in idx[:limit]]
    more = f" (+{len(idx) - limit} more)" if len(idx) > limit else ""
    return f"{shown}{more}"


def nonfinite_mask(X: np.ndarray) -> np.ndarray:
    """One bool per column of the 2-D array ``X``: does it hold NaN or inf?

    A float64 column sum is finite iff every value is, so finite data costs one pass and no
    temporary; otherwise the columns are found row chunk by row chunk.
    """
    bad = np.zeros(X.shape[1], dtype=bool)
    if X.dtype.kind != "f" or np.isfinite(X.sum(axis=0, dtype=np.float64)).all():
        return bad
    for rows in row_chunks(X.shape[0]):
        bad |= ~np.isfinite(X[rows]).all(axis=0)
    return bad


def nonfinite_columns(X: np.ndarray, names: Sequence[str]) -> list[str]:
    """Names of the columns of ``X`` holding NaN or inf."""
    return [names[j] for j in np.flatnonzero(nonfinite_mask(X))]


def first_nonfinite_row(X: np.ndarray) -> int | None:
    """Index along axis 0 of the first row (feature row, image, embedding) of ``X`` holding NaN
    or inf; None when every value is finite (or ``X`` is not a float array).

    A float64 sum is finite iff every value is, so finite data costs one pass and no temporary;
    otherwise the rows are searched row chunk by row chunk.
    """
    if X.dtype.kind != "f" or X.shape[0] == 0 or np.isfinite(X.sum(dtype=np.float64)):
        return None
    for rows in row_chunks(X.shape[0]):
        block = X[rows].reshape(rows.stop - rows.start, -1)  # type: ignore[union-attr]
        hit = np.flatnonzero(~np.isfinite(block).all(axis=1))
        if hit.size:
            return rows.start + int(hit[0])  # type: ignore[union-attr]
    return None


def check_rows(values: Any, n: int, what: str) -> np.ndarray:
    """A 1-D per-row array of length ``n``."""
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{what}: expected one value per row ({n}), got shape {arr.shape}")
    return arr
