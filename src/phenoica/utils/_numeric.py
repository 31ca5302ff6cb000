"""Feature matrices as numpy arrays, in row chunks: no float64 copy of a whole table.

- :func:`row_chunks`: row selections of at most :data:`CHUNK_ROWS` rows, so float64 work on a
  table of millions of rows never copies it whole;
- :func:`out_dtype`: the float type a result keeps (scikit-learn's convention);
- :func:`centered_chunks`: ``X - mean`` in float64, one row chunk at a time;
- :func:`finite_values`: the finite entries of a score column (summaries and figures).

Every check of a feature matrix (finite, numeric, 2-D, one value per row) is the contract's
(:mod:`phenoica.contract`).
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

#: Rows per float64 work chunk (a 8192 x 384 chunk is 25 MB; BLAS is as fast as on larger ones).
CHUNK_ROWS = 8_192


def row_chunks(rows: int | np.ndarray, size: int = CHUNK_ROWS) -> Iterator[slice | np.ndarray]:
    """Row selections of at most ``size`` rows: slices covering ``range(rows)`` for a row
    count, or consecutive pieces of an index array."""
    if size < 1:
        raise ValueError(f"row_chunks: size must be >= 1, got {size}")
    if isinstance(rows, (int, np.integer)):
        n = int(rows)
        for start in range(0, n, size):
            yield slice(start, min(start + size, n))
    else:
        for start in range(0, rows.size, size):
            yield rows[start : start + size]


def out_dtype(X: np.ndarray) -> np.dtype:
    """float32 input stays float32; everything else becomes float64 (scikit-learn's convention)."""
    return np.dtype(np.float32) if X.dtype == np.float32 else np.dtype(np.float64)


def centered_chunks(X: np.ndarray, mean: np.ndarray) -> Iterator[tuple[slice, np.ndarray]]:
    """(rows, float64 ``X[rows] - mean``) over row chunks of ``X``, reusing one buffer.

    One preallocated buffer instead of fresh temporaries per chunk: freshly mapped memory
    costs page faults that, on small VMs, took longer than the arithmetic. The yielded block
    is overwritten by the next one.
    """
    buf = np.empty((min(CHUNK_ROWS, X.shape[0]), X.shape[1]))
    for rows in row_chunks(X.shape[0]):
        block = buf[: rows.stop - rows.start]  # type: ignore[union-attr]
        np.subtract(X[rows], mean, out=block)
        yield rows, block  # type: ignore[misc]


def finite_values(values: Any) -> np.ndarray:
    """The finite entries of ``values`` (a score column: Series, list or array) as a flat float array."""
    arr = np.asarray(values, dtype=float).ravel()
    return arr[np.isfinite(arr)]
