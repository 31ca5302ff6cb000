"""Feature matrices as numpy arrays: row chunks, non-finite entries, centring.

One helper per job, shared by the transforms (:mod:`phenoica.transforms`), the alignment
(:mod:`phenoica.identifiability`), the profile tables (:mod:`phenoica.profiles`) and the classifiers
(:mod:`phenoica.classify`):

- :func:`row_chunks`: row selections of at most :data:`CHUNK_ROWS` rows, so float64 work on a
  table of millions of rows never copies it whole;
- :func:`nonfinite_columns` / :func:`first_nonfinite_row`: which feature columns (or rows:
  images, embeddings) hold NaN or inf, without a temporary the size of the data (the checks
  built on them, which raise the contract's errors, are :mod:`phenoica.contract.arrays`);
- :func:`centered_chunks`: ``X - mean`` in float64, one row chunk at a time;
- :func:`finite_values`: the finite entries of a score column (summaries and figures).
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

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
