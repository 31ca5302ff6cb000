"""Streaming accumulators: statistics of rows that arrive block by block, in float64.

- :class:`Moments`: count, column means and scatter, merged pairwise (no raw sums of squares);
- :class:`BatchMoments`: per-batch :class:`Moments` of the control rows (for center-scale);
- :class:`RowSample`: a seeded subsample of rows drawn up front and collected as blocks stream past.

The estimators (:mod:`phenoica.transforms._scaling`, :mod:`phenoica.transforms._whitening`) fit from
these, so an in-memory fit and a fit streamed over row batches of a parquet run the same
arithmetic.
"""

from __future__ import annotations

from typing import Container

import numpy as np

from phenoica.utils import CHUNK_ROWS, row_chunks


class Moments:
    """Running row count, column means and scatter (sum of squared deviations) in float64.

    ``update`` takes rows block by block, in any number of blocks; each block's own mean and
    scatter are merged into the running ones (Chan, Golub & LeVeque's pairwise update), so no
    sum of raw squares is ever formed and data far from zero loses no precision. ``full``
    keeps the whole (features x features) scatter (for the covariance), else its diagonal
    only (for per-feature SDs).
    """

    def __init__(self, n_features: int, full: bool = True) -> None:
        self.n = 0
        self.mean = np.zeros(n_features)
        self.scatter = np.zeros((n_features, n_features) if full else n_features)
        self.full = full
        self._buf: np.ndarray | None = None

    def update(self, X: np.ndarray) -> "Moments":
        """Add the rows of ``X`` (rows x features, any float dtype)."""
        for rows in row_chunks(X.shape[0]):
            block = X[rows]
            m = block.shape[0]
            mean = block.mean(axis=0, dtype=np.float64)
            if self.full:
                if self._buf is None or self._buf.shape[0] < m:
                    self._buf = np.empty((min(CHUNK_ROWS, max(m, X.shape[0])), self.mean.size))
                centered = self._buf[:m]
                np.subtract(block, mean, out=centered)
                scatter = centered.T @ centered
            else:
                centered = block - mean
                scatter = np.einsum("ij,ij->j", centered, centered)
            delta = mean - self.mean
            n = self.n + m
            if self.full:
                self.scatter += scatter + np.outer(delta, delta) * (self.n * m / n)
            else:
                self.scatter += scatter + delta * delta * (self.n * m / n)
            self.mean += delta * (m / n)
            self.n = n
        return self

    def covariance(self) -> np.ndarray:
        """The sample covariance (ddof=1): the full matrix, or the variances when not ``full``."""
        if self.n < 2:
            raise ValueError(f"covariance needs at least 2 samples, got {self.n}")
        return self.scatter / (self.n - 1)


class BatchMoments:
    """Per-batch :class:`Moments` (diagonal) of control rows, accumulated block by block.

    Every batch label passed to ``update`` is registered, even one without control rows (its
    count stays 0), so a batch with too few controls is named, not skipped. ``only`` limits the
    accumulation to some batches (those unseen at fit, when applying a transform).
    """

    def __init__(self, n_features: int) -> None:
        self.n_features = n_features
        self.batches: dict[str, Moments] = {}

    def update(
        self, X: np.ndarray, batches: np.ndarray, is_control: np.ndarray, only: Container[str] | None = None
    ) -> "BatchMoments":
        """Add block rows ``X`` with their batch labels (str) and control flags."""
        for batch in np.unique(batches).tolist():
            if only is not None and batch not in only:
                continue
            stats = self.batches.setdefault(batch, Moments(self.n_features, full=False))
            rows = (batches == batch) & is_control
            if rows.any():
                stats.update(X[rows])
        return self


class RowSample:
    """A seeded subsample of at most ``max_samples`` of ``n`` rows, collected from row blocks.

    The row indices are drawn up front (``rng.choice(n, max_samples)``, sorted), so blocks can
    stream past in order and only the chosen rows are kept. ``rng`` is left where the draw left
    it, for callers that continue with it (parallel analysis permutes with the same generator).
    With ``max_samples`` None or >= ``n`` every row is kept.
    """

    def __init__(self, n: int, max_samples: int | None, seed: int) -> None:
        self.n = int(n)
        self.rng = np.random.default_rng(seed)
        self.indices: np.ndarray | None = None
        if max_samples is not None and self.n > max_samples:
            self.indices = np.sort(self.rng.choice(self.n, size=int(max_samples), replace=False))
        self.size = self.n if self.indices is None else self.indices.size
        self._rows: np.ndarray | None = None  # filled in place: no list of parts to concatenate
        self._filled = 0
        self._seen = 0

    def add(self, block: np.ndarray) -> None:
        """Offer the next block of rows (blocks in row order, covering all ``n`` rows once)."""
        lo, hi = self._seen, self._seen + block.shape[0]
        if hi > self.n:
            raise ValueError(f"row sample: {hi} rows offered, the sample was drawn from {self.n}")
        chosen = (
            None
            if self.indices is None
            else (self.indices[np.searchsorted(self.indices, lo) : np.searchsorted(self.indices, hi)] - lo)
        )
        self._seen = hi
        m = block.shape[0] if chosen is None else chosen.size
        if self._rows is None:
            if m == self.size:  # everything in one block (in-memory callers): no second copy
                self._rows, self._filled = (block if chosen is None else block[chosen]), m
                return
            self._rows = np.empty((self.size, *block.shape[1:]), dtype=block.dtype)
        dest = self._rows[self._filled : self._filled + m]
        if chosen is None:
            dest[...] = block
        else:
            np.take(block, chosen, axis=0, out=dest, mode="clip")  # in range; "clip" writes in place, unbuffered
        self._filled += m

    def rows(self) -> np.ndarray:
        """The sampled rows, in row order."""
        if self._seen != self.n or self._rows is None:
            raise ValueError(f"row sample: saw {self._seen} of the {self.n} rows it was drawn from")
        return self._rows
