"""Embedding post-processing: the four variants of the same embeddings, fitted once, re-applied.

Variants (PAPER.md Tables 3/4/6, DESIGN.md "Variants"):

- ``base``: the embeddings as they are (identity; feature names kept, ``emb_*``).
- ``pca``: per-batch center-scale on controls (if ``center_scale``), then PCA whitening.
- ``pca_ica``: ``pca``, then an orthogonal ICA rotation (Picard-O by default, or FastICA).
- ``pca_rand``: ``pca``, then a seeded Haar-random orthogonal rotation (the "any rotation" control).

The three whitened variants share one center-scale and one whitening, so they differ only by
the final rotation. Whitened features are named ``comp_0000 ...``.

Estimators follow the scikit-learn idiom: hyper-parameters in ``__init__``, learned attributes
end in ``_`` and are set by ``fit``; ``transform`` never refits. Arithmetic is float64 on row
chunks; float32 input gives float32 output (sklearn's convention), so a million-row table is
never copied whole in float64.

Streaming (screens of tens of millions of rows): the fits are built on accumulators that take
rows block by block - :class:`Moments` (count, mean, scatter, merged pairwise in float64),
:class:`BatchMoments` (per-batch control moments) and :class:`RowSample` (a seeded subsample
drawn up front, collected as the rows stream past). :func:`fit_variants_streaming` fits every
variant from row blocks in two passes; the in-memory fits (``fit`` of each estimator,
:func:`fit_variants`, :func:`fit_transforms` on a DataFrame) are the same code over row chunks,
so a profile parquet streamed in row batches gives the in-memory result.
:func:`apply_transform_file` writes the transformed rows batch by batch.

Fitted transforms are saved as one ``.npz`` (arrays + the JSON description, no pickled code),
written atomically, with a human-readable ``.json`` sidecar beside it; loading needs only the
``.npz``.

Default component rule (``n_components="parallel"``): Horn's parallel analysis keeps the
leading components whose covariance eigenvalue exceeds the 95th percentile of eigenvalues of
column-wise permuted data (20 seeded permutations of a seeded subsample of <= 20,000 rows). The
component count decides whether ICA helps (PAPER.md, practical notes): whitening pure-noise
directions inflates them to unit variance and ICA then rotates noise into the signal, so the
default keeps only components above the noise floor. An integer count or a fraction of
explained variance can be configured instead (and swept in the report).
"""

from __future__ import annotations

import json
import logging
import numbers
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Container, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from picard import picard
from scipy import linalg
from scipy.stats import ortho_group
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import FastICA
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from phenoica.io import atomic_path
from phenoica.profiles import (
    DEFAULT_BATCH_ROWS,
    ProfileSource,
    check_numeric_features,
    feature_matrix,
    split_columns,
    write_batches,
)
from phenoica.screen import BATCH, CONTROL, PERT_TYPE, ScreenError, feature_columns, metadata_columns

LOG = logging.getLogger(__name__)

VARIANTS: tuple[str, ...] = ("base", "pca", "pca_ica", "pca_rand")
WHITENED_VARIANTS: tuple[str, ...] = ("pca", "pca_ica", "pca_rand")
COMPONENT_PREFIX = "comp_"
FORMAT = "phenoica.transform"
FORMAT_VERSION = 1
#: Rows per float64 work chunk (a 8192 x 384 chunk is 25 MB; BLAS is as fast as on larger ones).
CHUNK_ROWS = 8_192
ICA_METHODS = ("picard", "fastica")
#: Defaults of config["transforms"] when a key is absent: the schema's defaults, plus the
#: proposed ``batch_rows`` (rows per streamed row batch of the profile parquet) and
#: ``parallel_max_samples`` (rows parallel analysis runs on, a seeded subsample).
TRANSFORM_DEFAULTS: dict[str, Any] = {
    "variants": list(VARIANTS),
    "fit_on": "all",
    "center_scale": True,
    "n_components": "parallel",
    "whiten_eps": 1.0e-6,
    "ica": "picard",
    "ica_max_iter": 500,
    "ica_tol": 1.0e-7,
    "frozen": None,
    "ica_max_samples": 200_000,
    "parallel_max_samples": 20_000,
    "batch_rows": DEFAULT_BATCH_ROWS,
}


def component_name(i: int) -> str:
    """Name of whitened/rotated feature ``i``: ``comp_0000``."""
    return f"{COMPONENT_PREFIX}{i:04d}"


# --------------------------------------------------------------------------- validation helpers


def _chunks(n: int, size: int = CHUNK_ROWS) -> Iterator[slice]:
    """Row slices of at most ``size`` rows covering ``range(n)``."""
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


def _out_dtype(X: np.ndarray) -> np.dtype:
    """float32 input stays float32; everything else becomes float64."""
    return np.dtype(np.float32) if X.dtype == np.float32 else np.dtype(np.float64)


def _labels(idx: Sequence[int] | np.ndarray, names: Sequence[str] | None, limit: int = 10) -> str:
    """Readable list of feature columns by name (if known) or index."""
    idx = [int(i) for i in idx]
    shown = [names[i] for i in idx[:limit]] if names is not None else [f"feature {i}" for i in idx[:limit]]
    more = f" (+{len(idx) - limit} more)" if len(idx) > limit else ""
    return f"{shown}{more}"


def _check_matrix(
    X: Any, what: str = "X", n_features: int | None = None, names: Sequence[str] | None = None
) -> np.ndarray:
    """A finite, numeric, 2-D array with rows; errors say what was expected."""
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
    # A float64 column sum is finite iff every value is (no temporary the size of the data).
    if np.isfinite(arr.sum(axis=0, dtype=np.float64)).all():
        return arr
    bad = np.zeros(arr.shape[1], dtype=bool)
    for rows in _chunks(arr.shape[0]):
        bad |= ~np.isfinite(arr[rows]).all(axis=0)
    if bad.any():
        raise ScreenError(f"{what}: non-finite values (NaN or inf) in feature column(s) {_labels(np.flatnonzero(bad), names)}")
    return arr


def _check_rows(values: Any, n: int, what: str) -> np.ndarray:
    """A 1-D per-row array of length ``n``."""
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{what}: expected one value per row ({n}), got shape {arr.shape}")
    return arr


def _check_batches(batches: Any, n: int) -> np.ndarray:
    """Batch labels as a str array, one per row, none missing."""
    arr = _check_rows(batches, n, "batches")
    missing = pd.isna(arr)
    if missing.any():
        raise ScreenError(f"batches ({BATCH}): missing value at row(s) {list(np.flatnonzero(missing)[:5])}")
    return arr.astype(str)


def _check_is_control(is_control: Any, n: int) -> np.ndarray:
    """A boolean control mask, one per row."""
    arr = _check_rows(is_control, n, "is_control")
    if arr.dtype != bool:
        raise ValueError(f"is_control: expected a boolean mask, got dtype {arr.dtype}")
    return arr




def _centered_blocks(X: np.ndarray, mean: np.ndarray) -> Iterator[tuple[slice, np.ndarray]]:
    """(rows, float64 X[rows] - mean) over row chunks, reusing one buffer.

    One preallocated buffer instead of fresh temporaries per chunk: freshly mapped memory
    costs page faults that, on small VMs, took longer than the arithmetic.
    """
    buf = np.empty((min(CHUNK_ROWS, X.shape[0]), X.shape[1]))
    for rows in _chunks(X.shape[0]):
        block = buf[: rows.stop - rows.start]
        np.subtract(X[rows], mean, out=block)
        yield rows, block


# --------------------------------------------------------------------------- streaming accumulators


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
        for rows in _chunks(X.shape[0]):
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

    def update(self, X: np.ndarray, batches: np.ndarray, is_control: np.ndarray,
               only: Container[str] | None = None) -> "BatchMoments":
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
        chosen = None if self.indices is None else (
            self.indices[np.searchsorted(self.indices, lo) : np.searchsorted(self.indices, hi)] - lo
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


def covariance(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and covariance (ddof=1) in float64, accumulated over row chunks."""
    if X.shape[0] < 2:
        raise ValueError(f"covariance needs at least 2 samples, got {X.shape[0]}")
    moments = Moments(X.shape[1]).update(X)
    return moments.mean, moments.covariance()


# --------------------------------------------------------------------------- center-scale


class CenterScale(TransformerMixin, BaseEstimator):
    """Per-batch centering and scaling on each batch's own controls ("CenterScale").

    ``fit(X, batches, is_control)`` records, for every batch, the mean and SD (ddof=1) of its
    control rows. ``transform`` uses those statistics for batches seen at fit; a batch unseen at
    fit (a new plate/batch) is centered and scaled on its own controls among the rows given,
    without changing the fitted state. A batch with fewer than ``min_controls`` controls is an
    error naming it.

    Zero-SD features: an error naming the batch and the feature columns (a feature constant
    over a batch's controls cannot be scaled; it is usually a dead embedding dimension that
    should be removed upstream), rather than a silent epsilon that would blow it up.

    The statistics are :class:`BatchMoments`, so the same fit streams over row blocks
    (:func:`fit_variants_streaming`).
    """

    def __init__(self, min_controls: int = 2, min_sd: float = 1e-8) -> None:
        self.min_controls = min_controls
        self.min_sd = min_sd

    def _stats(self, moments: Moments | None, batch: str, names: Sequence[str] | None) -> tuple[np.ndarray, np.ndarray, int]:
        """Mean, SD and count of one batch's control rows, with the contract's checks."""
        count = 0 if moments is None else moments.n
        if count < max(2, self.min_controls):
            raise ScreenError(
                f"batch {batch!r}: {count} control row(s); center-scale needs at least "
                f"{max(2, self.min_controls)} controls ({PERT_TYPE} == {CONTROL!r}) per batch"
            )
        sd = np.sqrt(moments.covariance())  # type: ignore[union-attr]
        flat = np.flatnonzero(sd <= self.min_sd)
        if flat.size:
            raise ScreenError(
                f"batch {batch!r}: feature column(s) {_labels(flat, names)} are constant over the batch's "
                f"{count} controls (SD <= {self.min_sd}); remove them before center-scale"
            )
        return moments.mean.copy(), sd, count  # type: ignore[union-attr]

    def fit(self, X: Any, batches: Any, is_control: Any, feature_names: Sequence[str] | None = None) -> "CenterScale":
        """Record each batch's control mean and SD."""
        X = _check_matrix(X, "CenterScale.fit X", names=feature_names)
        batches = _check_batches(batches, X.shape[0])
        is_control = _check_is_control(is_control, X.shape[0])
        return self._fit_moments(BatchMoments(X.shape[1]).update(X, batches, is_control), feature_names)

    def _fit_moments(self, moments: BatchMoments, feature_names: Sequence[str] | None) -> "CenterScale":
        """Fit from accumulated per-batch control moments (every batch registered in them)."""
        names = sorted(moments.batches)
        stats = [self._stats(moments.batches[b], b, feature_names) for b in names]
        self.batches_ = np.asarray(names)
        self.mean_ = np.vstack([s[0] for s in stats])
        self.scale_ = np.vstack([s[1] for s in stats])
        self.n_controls_ = np.asarray([s[2] for s in stats], dtype=np.int64)
        self.n_features_in_ = moments.n_features
        return self

    def transform(
        self, X: Any, batches: Any, is_control: Any | None = None, feature_names: Sequence[str] | None = None
    ) -> np.ndarray:
        """(X - batch control mean) / batch control SD; unseen batches use their own controls."""
        check_is_fitted(self, "mean_")
        X = _check_matrix(X, "CenterScale.transform X", self.n_features_in_, feature_names)
        batches = _check_batches(batches, X.shape[0])
        if is_control is not None:
            is_control = _check_is_control(is_control, X.shape[0])
        return self._transform(X, batches, is_control, feature_names)

    def _transform(
        self, X: np.ndarray, batches: np.ndarray, is_control: np.ndarray | None, feature_names: Sequence[str] | None
    ) -> np.ndarray:
        return self._for_rows(X, batches, is_control, feature_names)._scale(X, batches)

    def _for_rows(
        self, X: np.ndarray, batches: np.ndarray, is_control: np.ndarray | None, feature_names: Sequence[str] | None
    ) -> "CenterScale":
        """``self`` if every batch of the rows was seen at fit, else a copy that also knows the
        unseen batches, from their own controls among these rows."""
        unseen = self._unseen(batches)
        if not unseen:
            return self
        if is_control is None:
            raise ValueError(f"batch {unseen[0]!r} was not seen at fit; its own controls are needed: pass is_control")
        own = BatchMoments(X.shape[1]).update(X, batches, is_control, only=set(unseen))
        return self._with_batches(own, unseen, feature_names)

    def _unseen(self, batches: np.ndarray) -> list[str]:
        """The batch labels among ``batches`` that were not seen at fit, sorted."""
        return sorted(set(np.unique(batches).tolist()) - set(self.batches_.tolist()))

    def _with_batches(self, moments: BatchMoments, batches: Sequence[str], feature_names: Sequence[str] | None) -> "CenterScale":
        """A copy that also knows ``batches`` (unseen at fit), from their own control moments;
        the fitted state of ``self`` is left as it is."""
        stats = [self._stats(moments.batches.get(b), b, feature_names) for b in batches]
        for batch, (_, _, count) in zip(batches, stats):
            LOG.info("center-scale: batch %r unseen at fit, scaled on its own %d controls", batch, count)
        out = CenterScale(self.min_controls, self.min_sd)
        out.batches_ = np.concatenate([self.batches_.astype(str), np.asarray(list(batches), dtype=str)])
        out.mean_ = np.vstack([self.mean_, *[s[0] for s in stats]])
        out.scale_ = np.vstack([self.scale_, *[s[1] for s in stats]])
        out.n_controls_ = np.concatenate([self.n_controls_, np.asarray([s[2] for s in stats], dtype=np.int64)])
        out.n_features_in_ = self.n_features_in_
        return out

    def _scale(self, X: np.ndarray, batches: np.ndarray) -> np.ndarray:
        """(X - mean) / SD with the statistics of each row's batch (all of them known)."""
        out = np.empty(X.shape, dtype=_out_dtype(X))
        known = {b: i for i, b in enumerate(self.batches_.tolist())}
        for batch in np.unique(batches).tolist():
            if batch not in known:
                raise ValueError(f"batch {batch!r} was not seen at fit and has no statistics")
            i = known[batch]
            rows = np.flatnonzero(batches == batch)
            first = int(rows[0])
            run = rows[-1] - first + 1 == rows.size  # one run of rows (the usual case): slices, no gathers
            for part in _chunks(rows.size):
                r = slice(first + part.start, first + part.stop) if run else rows[part]
                block = np.subtract(X[r], self.mean_[i])
                block /= self.scale_[i]
                out[r] = block
        return out

    def fit_transform(self, X: Any, batches: Any, is_control: Any, feature_names: Sequence[str] | None = None) -> np.ndarray:  # type: ignore[override]
        """Fit, then transform the same rows."""
        return self.fit(X, batches, is_control, feature_names).transform(X, batches, is_control, feature_names)


# --------------------------------------------------------------------------- PCA whitening


def _check_parallel(n_permutations: int, quantile: float) -> None:
    if n_permutations < 1:
        raise ValueError(f"parallel analysis: n_permutations must be >= 1, got {n_permutations}")
    if not 0 < quantile < 1:
        raise ValueError(f"parallel analysis: quantile must be in (0, 1), got {quantile}")


def parallel_analysis(
    X: np.ndarray,
    *,
    n_permutations: int = 20,
    quantile: float = 0.95,
    max_samples: int | None = 20_000,
    seed: int,
) -> tuple[int, np.ndarray, np.ndarray]:
    """Horn's parallel analysis on the covariance: (components kept, observed eigenvalues, null threshold).

    On a seeded subsample of at most ``max_samples`` rows, each column is permuted
    independently ``n_permutations`` times (destroying correlations, keeping marginals); the
    threshold for rank i is the ``quantile`` of the permuted data's i-th eigenvalue. The count
    kept is the number of leading eigenvalues above their threshold (at least 1).
    """
    _check_parallel(n_permutations, quantile)
    if X.shape[0] < 3:
        raise ValueError(f"parallel analysis needs at least 3 samples, got {X.shape[0]}")
    sample = RowSample(X.shape[0], max_samples, seed)
    sample.add(X)
    return _parallel_analysis(sample, n_permutations, quantile)


def _parallel_analysis(sample: RowSample, n_permutations: int, quantile: float) -> tuple[int, np.ndarray, np.ndarray]:
    """Parallel analysis on collected sample rows, permuting with the sample's generator."""
    _check_parallel(n_permutations, quantile)
    rng = sample.rng
    rows = np.asarray(sample.rows(), dtype=np.float64)
    m, d = rows.shape
    if m < 3:
        raise ValueError(f"parallel analysis needs at least 3 samples, got {m}")
    columns = np.ascontiguousarray((rows - rows.mean(axis=0)).T)  # d x m: each column contiguous
    observed = linalg.eigvalsh(columns @ columns.T / (m - 1))[::-1]
    null = np.empty((n_permutations, d))
    permuted = np.empty_like(columns)
    for i in range(n_permutations):
        rng.permuted(columns, axis=1, out=permuted)
        null[i] = linalg.eigvalsh(permuted @ permuted.T / (m - 1))[::-1]
    threshold = np.quantile(null, quantile, axis=0)
    above = observed > threshold
    k = d if above.all() else int(np.argmin(above))
    return max(1, k), observed, threshold


class PCAWhitener(TransformerMixin, BaseEstimator):
    """PCA whitening: ``Z = (X - mean) @ V_k / sqrt(lambda_k + eps)``.

    ``n_components``: an integer count, a fraction in (0, 1) of explained variance (smallest k
    reaching it), or ``"parallel"`` (default; Horn's parallel analysis, see
    :func:`parallel_analysis`, seeded by ``seed``, on at most ``parallel_max_samples`` rows).
    Eigen-decomposition of the float64 covariance (scipy ``eigh``) accumulated as
    :class:`Moments`, so the same fit streams over row blocks; ``eps`` (absolute, in the
    data's variance units) is added to each kept eigenvalue, so the whitened covariance on the
    fit data is ``diag(lambda / (lambda + eps))``, the identity within eps. Signs are fixed so
    that each component's largest-magnitude loading is positive.

    At most ``min(n_samples - 1, n_features)`` components exist; asking for more is an error.
    """

    def __init__(
        self,
        n_components: int | float | str = "parallel",
        eps: float = 1e-6,
        seed: int = 0,
        n_permutations: int = 20,
        parallel_max_samples: int | None = 20_000,
    ) -> None:
        self.n_components = n_components
        self.eps = eps
        self.seed = seed
        self.n_permutations = n_permutations
        self.parallel_max_samples = parallel_max_samples

    def _rule(self) -> str:
        """The component rule as a string for reports; validates ``n_components``."""
        n = self.n_components
        if isinstance(n, (bool, np.bool_)):
            raise ValueError(f"n_components: expected an integer, a fraction in (0, 1) or 'parallel', got {n!r}")
        if isinstance(n, numbers.Integral):
            if n < 1:
                raise ValueError(f"n_components: an integer count must be >= 1, got {n}")
            return f"count {int(n)}"
        if isinstance(n, numbers.Real):
            if not 0 < n < 1:
                raise ValueError(f"n_components: a fraction of explained variance must be in (0, 1), got {n}")
            return f"fraction {float(n)}"
        if n == "parallel":
            return "parallel"
        raise ValueError(f"n_components: expected an integer, a fraction in (0, 1) or 'parallel', got {n!r}")

    def _check_params(self) -> str:
        rule = self._rule()
        if self.eps < 0:
            raise ValueError(f"eps: expected >= 0, got {self.eps}")
        return rule

    def _parallel_sample(self, n: int) -> RowSample | None:
        """The row sample parallel analysis needs from ``n`` fit rows (None for other rules)."""
        return RowSample(n, self.parallel_max_samples, self.seed) if self._rule() == "parallel" else None

    def fit(self, X: Any, y: Any = None) -> "PCAWhitener":
        """Estimate mean, eigenvectors and the number of components kept."""
        self._check_params()
        X = _check_matrix(X, "PCAWhitener.fit X")
        moments = Moments(X.shape[1]).update(X)
        sample = self._parallel_sample(X.shape[0])
        if sample is not None:
            sample.add(X)
        return self._fit_moments(moments, sample)

    def _fit_moments(self, moments: Moments, sample: RowSample | None) -> "PCAWhitener":
        """Fit from the fit rows' accumulated moments (+ their parallel-analysis sample)."""
        rule = self._check_params()
        n, d = moments.n, moments.mean.size
        limit = min(n - 1, d)
        if isinstance(self.n_components, numbers.Integral) and self.n_components > limit:
            raise ValueError(
                f"n_components={self.n_components}, but the fit data has {n} samples and {d} features: at "
                f"most min(n_samples - 1, n_features) = {limit} components can be whitened"
            )
        if n < 3:
            raise ValueError(f"PCA whitening needs at least 3 samples, got {n}")
        evals, evecs = linalg.eigh(moments.covariance())
        evals, evecs = np.clip(evals[::-1], 0.0, None), evecs[:, ::-1]
        total = float(evals.sum())
        if total <= 0:
            raise ScreenError("PCAWhitener.fit X: every feature is constant; nothing to whiten")
        ratio = evals / total
        self.parallel_threshold_: np.ndarray | None = None
        if rule.startswith("count"):
            k = int(self.n_components)
        elif rule.startswith("fraction"):
            k = int(np.searchsorted(np.cumsum(ratio), float(self.n_components) - 1e-12) + 1)
        else:
            if sample is None:
                raise ValueError("PCA whitening with parallel analysis needs the sample rows")
            k, _, threshold = _parallel_analysis(sample, self.n_permutations, 0.95)
            self.parallel_threshold_ = threshold
        k = min(k, limit)
        rank = int((evals > evals[0] * 1e-10).sum())
        if k > rank:
            LOG.warning(
                "PCA whitening: %d components requested but the fit data has numerical rank %d; "
                "the extra directions are noise scaled up by 1/sqrt(eps)", k, rank,
            )
        components = evecs[:, :k].T.copy()
        flip = np.sign(components[np.arange(k), np.abs(components).argmax(axis=1)])
        components *= flip[:, None]
        self.mean_ = moments.mean.copy()
        self.components_ = components
        self.eigenvalues_ = evals
        self.explained_variance_ = evals[:k].copy()
        self.explained_variance_ratio_ = ratio[:k].copy()
        self.whitening_ = components / np.sqrt(evals[:k] + self.eps)[:, None]
        self.n_components_ = k
        self.n_features_in_ = d
        self.n_samples_fit_ = n
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Whiten rows with the fitted mean and components (never refits)."""
        check_is_fitted(self, "whitening_")
        return self._transform(_check_matrix(X, "PCAWhitener.transform X", self.n_features_in_))

    def _transform(self, X: np.ndarray) -> np.ndarray:
        out = np.empty((X.shape[0], self.n_components_), dtype=_out_dtype(X))
        for rows, block in _centered_blocks(X, self.mean_):
            out[rows] = block @ self.whitening_.T
        return out


# --------------------------------------------------------------------------- rotations


def nearest_orthogonal(W: np.ndarray) -> np.ndarray:
    """The orthogonal matrix closest to ``W`` in Frobenius norm (polar factor, via SVD)."""
    U, _, Vt = linalg.svd(W)
    return U @ Vt


class _Rotation(TransformerMixin, BaseEstimator):
    """Shared transform of the orthogonal rotations: ``Z @ rotation_.T``."""

    def transform(self, Z: Any) -> np.ndarray:
        """Rotate whitened rows (never refits)."""
        check_is_fitted(self, "rotation_")
        return self._transform(_check_matrix(Z, f"{type(self).__name__}.transform Z", self.n_features_in_))

    def _transform(self, Z: np.ndarray) -> np.ndarray:
        out = np.empty(Z.shape, dtype=_out_dtype(Z))
        for rows, block in _centered_blocks(Z, np.zeros(Z.shape[1])):
            out[rows] = block @ self.rotation_.T
        return out


class ICARotation(_Rotation):
    """An orthogonal ICA unmixing rotation learned on whitened data: ``S = Z @ rotation_.T``.

    ``method="picard"`` (default): python-picard's orthogonal Picard (Picard-O,
    ``ortho=True, extended=True``: handles sub- and super-Gaussian sources). ``"fastica"``:
    scikit-learn FastICA (parallel, logcosh, ``whiten=False`` since the input is white).
    ``max_samples``: fit on a seeded subsample of at most that many rows (None = all).

    Convergence is reported, never hidden: ``converged_`` and ``n_iter_`` are recorded and a
    non-converged fit logs a warning (the rotation is then the last iterate). The returned
    unmixing is projected onto the nearest orthogonal matrix (``orthogonality_error_`` records
    max |W W^T - I| before the projection), so the whitened covariance stays the identity.
    Signs are fixed so that each row's largest-magnitude entry is positive.
    """

    def __init__(
        self,
        method: str = "picard",
        max_iter: int = 500,
        tol: float = 1e-7,
        seed: int = 0,
        max_samples: int | None = None,
    ) -> None:
        self.method = method
        self.max_iter = max_iter
        self.tol = tol
        self.seed = seed
        self.max_samples = max_samples

    def _check_params(self) -> None:
        if self.method not in ICA_METHODS:
            raise ValueError(f"ICA method: expected one of {ICA_METHODS}, got {self.method!r}")
        if self.max_iter < 1 or self.tol <= 0:
            raise ValueError(f"ICA: max_iter must be >= 1 and tol > 0, got {self.max_iter}, {self.tol}")

    def _row_sample(self, n: int) -> RowSample:
        """The seeded subsample of ``n`` whitened rows the rotation is fitted on."""
        return RowSample(n, self.max_samples, self.seed)

    def fit(self, Z: Any, y: Any = None) -> "ICARotation":
        """Learn the rotation on whitened rows ``Z`` (a seeded subsample if ``max_samples``)."""
        self._check_params()
        Z = _check_matrix(Z, "ICARotation.fit Z")
        sample = self._row_sample(Z.shape[0])
        sample.add(Z)
        return self._fit_sample(sample.rows())

    def _fit_sample(self, Z: np.ndarray) -> "ICARotation":
        """Learn the rotation on the (already subsampled) whitened rows ``Z``."""
        self._check_params()
        k = Z.shape[1]
        if Z.shape[0] <= k:
            raise ValueError(f"ICA: {Z.shape[0]} samples are too few for {k} components (need more samples than components)")
        self.n_features_in_ = k
        self.n_samples_fit_ = int(Z.shape[0])
        if k == 1:
            self.rotation_ = np.ones((1, 1))
            self.converged_, self.n_iter_, self.orthogonality_error_ = True, 0, 0.0
            return self
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if self.method == "picard":
                _, W, _, n_iter = picard(
                    np.ascontiguousarray(Z.T, dtype=np.float64), ortho=True, extended=True, whiten=False,
                    centering=True, max_iter=self.max_iter, tol=self.tol, random_state=self.seed,
                    return_n_iter=True,
                )
                failed = [w for w in caught if "did not converge" in str(w.message)]
            else:
                ica = FastICA(
                    whiten=False, algorithm="parallel", fun="logcosh", max_iter=self.max_iter,
                    tol=self.tol, random_state=self.seed,
                ).fit(Z.astype(np.float64))
                W, n_iter = ica.components_, ica.n_iter_
                failed = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
        for w in caught:
            if w not in failed:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        W = np.asarray(W, dtype=np.float64)
        self.orthogonality_error_ = float(np.abs(W @ W.T - np.eye(k)).max())
        W = nearest_orthogonal(W)
        W *= np.sign(W[np.arange(k), np.abs(W).argmax(axis=1)])[:, None]
        self.rotation_ = W
        self.n_iter_ = int(n_iter)
        self.converged_ = not failed
        if failed:
            LOG.warning(
                "ICA (%s) did not converge in %d iterations (tol %g) on %d x %d whitened data: %s; "
                "the rotation is the last iterate. Raise ica_max_iter or ica_tol.",
                self.method, self.n_iter_, self.tol, Z.shape[0], k, failed[0].message,
            )
        return self


class RandomRotation(_Rotation):
    """A Haar-random orthogonal rotation (scipy ``ortho_group``), seeded: the "any rotation" control."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def fit(self, Z: Any, y: Any = None) -> "RandomRotation":
        """Draw a rotation of the dimension of ``Z`` (only its width is used)."""
        return self._draw(_check_matrix(Z, "RandomRotation.fit Z").shape[1])

    def _draw(self, k: int) -> "RandomRotation":
        """Draw a seeded Haar-random rotation of dimension ``k``."""
        self.rotation_ = np.atleast_2d(ortho_group.rvs(k, random_state=self.seed)).astype(np.float64)
        self.n_features_in_ = k
        return self


# --------------------------------------------------------------------------- variants

_STEP_CLASSES: dict[str, type] = {c.__name__: c for c in (CenterScale, PCAWhitener, ICARotation, RandomRotation)}


def _jsonable(value: Any) -> Any:
    """numpy scalars -> python; everything else as is."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def _export(step: BaseEstimator, name: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A fitted step as (JSON description, arrays): class, params, fitted scalars / arrays."""
    scalars: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for attr, value in vars(step).items():
        if not attr.endswith("_") or attr.startswith("_"):
            continue
        if isinstance(value, np.ndarray):
            if value.dtype.kind == "O":
                value = value.astype(str)
            arrays[f"{name}.{attr}"] = value
        else:
            scalars[attr] = _jsonable(value)
    params = {k: _jsonable(v) for k, v in step.get_params().items()}
    return {"class": type(step).__name__, "params": params, "fitted": scalars}, arrays


def _restore(desc: Mapping[str, Any], name: str, arrays: Mapping[str, np.ndarray], source: str) -> BaseEstimator:
    """Rebuild a fitted step from its JSON description and arrays (classes from a fixed registry)."""
    cls = _STEP_CLASSES.get(desc.get("class", ""))
    if cls is None:
        raise ValueError(f"{source}: unknown transform step class {desc.get('class')!r} for step {name!r}")
    step = cls(**desc["params"])
    for attr, value in desc["fitted"].items():
        setattr(step, attr, value)
    prefix = f"{name}."
    for key, value in arrays.items():
        if key.startswith(prefix):
            setattr(step, key[len(prefix):], value)
    return step


@dataclass
class VariantTransform:
    """One fitted variant: optional center-scale, optional whitening, optional rotation.

    ``transform(X, batches, is_control)`` applies the steps in order (batches / is_control
    are needed only when center-scale is part of the variant; is_control only for batches
    unseen at fit). ``fit_report`` describes the fit for the report.
    """

    variant: str
    feature_names_in: list[str]
    center_scale: CenterScale | None = None
    whitener: PCAWhitener | None = None
    rotation: ICARotation | RandomRotation | None = None
    fit_report: dict[str, Any] = field(default_factory=dict)

    @property
    def feature_names_out(self) -> list[str]:
        """``emb_*`` names for base; ``comp_0000 ...`` for whitened variants."""
        if self.whitener is None:
            return list(self.feature_names_in)
        return [component_name(i) for i in range(self.whitener.n_components_)]

    def transform(self, X: Any, batches: Any = None, is_control: Any = None) -> np.ndarray:
        """Apply the fitted steps to rows ``X`` (n x features_in) -> (n x features_out)."""
        names = self.feature_names_in
        X = _check_matrix(X, f"variant {self.variant} X", len(names), names)
        scaler, b = None, None
        if self.center_scale is not None:
            if batches is None:
                raise ValueError(f"variant {self.variant}: center-scale needs the batch of every row")
            b = _check_batches(batches, X.shape[0])
            c = None if is_control is None else _check_is_control(is_control, X.shape[0])
            scaler = self.center_scale._for_rows(X, b, c, names)
        return self._steps(X, b, scaler)

    def _steps(self, X: np.ndarray, batches: np.ndarray | None, scaler: CenterScale | None) -> np.ndarray:
        """The fitted steps on checked rows; ``scaler`` is the center-scale knowing every batch
        of ``batches`` (the fitted one, or a copy extended with unseen batches' own controls)."""
        if scaler is not None:
            X = scaler._scale(X, batches)  # type: ignore[arg-type]
        if self.whitener is not None:
            X = self.whitener._transform(X)
        if self.rotation is not None:
            X = self.rotation._transform(X)
        return X

    def _description(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta: dict[str, Any] = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "variant": self.variant,
            "feature_names_in": list(self.feature_names_in),
            "feature_names_out": self.feature_names_out,
            "steps": {},
            "fit_report": self.fit_report,
        }
        arrays: dict[str, np.ndarray] = {}
        for name in ("center_scale", "whitener", "rotation"):
            step = getattr(self, name)
            if step is not None:
                meta["steps"][name], step_arrays = _export(step, name)
                arrays.update(step_arrays)
        return meta, arrays

    def save(self, path: Path | str) -> Path:
        """Write ``path`` (.npz: arrays + JSON description) and a ``.json`` sidecar, atomically."""
        path = Path(path)
        if path.suffix != ".npz":
            raise ValueError(f"{path}: a transform is saved as a .npz file")
        meta, arrays = self._description()
        text = json.dumps(meta, indent=2, default=_jsonable)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, __meta__=np.array(text), **arrays)
        with atomic_path(path.with_suffix(".json")) as tmp:
            tmp.write_text(text + "\n")
        return path

    @classmethod
    def load(cls, path: Path | str) -> "VariantTransform":
        """Read a transform written by :meth:`save` (the .npz alone; no pickle)."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path}: fitted transform not found")
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable transform .npz ({exc})") from None
        if "__meta__" not in arrays:
            raise ValueError(f"{path}: not a phenoica transform (no __meta__ entry)")
        meta = json.loads(str(arrays.pop("__meta__")))
        if meta.get("format") != FORMAT or meta.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"{path}: format {meta.get('format')!r} version {meta.get('version')!r}; "
                f"expected {FORMAT!r} version {FORMAT_VERSION}"
            )
        steps = {name: _restore(desc, name, arrays, str(path)) for name, desc in meta["steps"].items()}
        return cls(
            variant=meta["variant"],
            feature_names_in=list(meta["feature_names_in"]),
            center_scale=steps.get("center_scale"),  # type: ignore[arg-type]
            whitener=steps.get("whitener"),  # type: ignore[arg-type]
            rotation=steps.get("rotation"),  # type: ignore[arg-type]
            fit_report=meta.get("fit_report", {}),
        )


def load_transform(path: Path | str) -> VariantTransform:
    """Read a fitted variant transform (.npz)."""
    return VariantTransform.load(path)




def transform_config(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """config["transforms"] with absent keys defaulted; unknown keys and bad values are errors."""
    cfg = dict(cfg or {})
    unknown = sorted(set(cfg) - set(TRANSFORM_DEFAULTS))
    if unknown:
        raise ValueError(f"transforms config: unknown key(s) {unknown}; expected keys {sorted(TRANSFORM_DEFAULTS)}")
    out = {**TRANSFORM_DEFAULTS, **cfg}
    bad = [v for v in out["variants"] if v not in VARIANTS]
    if bad:
        raise ValueError(f"transforms.variants: unknown variant(s) {bad}; expected some of {list(VARIANTS)}")
    if out["fit_on"] not in ("all", "controls"):
        raise ValueError(f"transforms.fit_on: expected 'all' or 'controls', got {out['fit_on']!r}")
    if out["ica"] not in ICA_METHODS:
        raise ValueError(f"transforms.ica: expected one of {ICA_METHODS}, got {out['ica']!r}")
    for key, least in (("batch_rows", 1), ("parallel_max_samples", 3), ("ica_max_samples", 1)):
        value = out[key]
        if value is None and key != "batch_rows":
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
            raise ValueError(f"transforms.{key}: expected an integer >= {least}, got {value!r}")
    PCAWhitener(n_components=out["n_components"])._rule()
    return out


def derive_seed(seed: int, purpose: str) -> int:
    """An independent 32-bit seed for one purpose ('whiten', 'ica', 'rand') from the base seed."""
    purposes = ("whiten", "ica", "rand")
    return int(np.random.SeedSequence([int(seed), purposes.index(purpose)]).generate_state(1)[0])


#: One block of rows: features (rows x features), batch labels and control flags (None when
#: the table has no such columns).
RowBlock = tuple[np.ndarray, "np.ndarray | None", "np.ndarray | None"]


def fit_variants_streaming(
    variants: Sequence[str],
    blocks: Callable[[], Iterable[RowBlock]],
    cfg: Mapping[str, Any] | None,
    seed: int,
    feature_names: Sequence[str],
    source: str = "profiles",
) -> dict[str, VariantTransform]:
    """Fit several variants from row blocks, sharing one center-scale and one whitening.

    ``blocks()`` returns a fresh iterator over the rows in the same order each time (it is
    called once or twice). ``cfg`` is config["transforms"]. Memory holds one block, the
    (features x features) scatter and the seeded row samples, never the table:

    - pass 1: rows are checked (finite, numeric; features constant over the fit rows are an
      error naming them), the fit rows (``fit_on``: all rows, or the controls) counted, and
      each batch's control moments accumulated for center-scale (:class:`BatchMoments`);
    - pass 2 (whitened variants only): rows are center-scaled; the fit rows' mean and scatter
      are accumulated (:class:`Moments`, float64) and two seeded samples of fit rows collected,
      drawn up front from the fit-row count: one for parallel analysis
      (``parallel_max_samples``) and one for ICA (``ica_max_samples``).

    The whitening is the eigendecomposition of that covariance; ICA is fitted on the whitened
    ICA sample. Seeds for the parallel analysis, ICA and the random rotation derive from
    ``seed`` (:func:`derive_seed`), so the fit equals the in-memory one on the same rows.
    """
    cfg = transform_config(cfg)
    variants = list(variants)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; expected some of {list(VARIANTS)}")
    names = list(feature_names)
    d = len(names)
    whitened = [v for v in variants if v in WHITENED_VARIANTS]
    on_controls = cfg["fit_on"] == "controls"
    center = bool(whitened) and bool(cfg["center_scale"])

    def checked(block: RowBlock) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        X, batches, is_control = block
        X = _check_matrix(X, source, d, names)
        m = X.shape[0]
        b = None if batches is None or not center else _check_batches(batches, m)
        c = None if is_control is None else _check_is_control(is_control, m)
        if center and (b is None or c is None):
            raise ValueError("center_scale is on: the batch and control flag of every row are needed")
        if on_controls and whitened and c is None:
            raise ValueError("fit_on is 'controls': the control flag of every row is needed")
        return X, b, c

    def fit_rows(X: np.ndarray, c: np.ndarray | None) -> np.ndarray:
        return X[c] if on_controls and c is not None else X

    def first_pass() -> tuple[int, int, np.ndarray, np.ndarray, BatchMoments | None]:
        """Checks, fit-row count, per-feature range over the fit rows, per-batch control moments
        (a function, so that the last block is freed when it returns)."""
        n = n_fit = 0
        lo, hi = np.full(d, np.inf), np.full(d, -np.inf)
        control_moments = BatchMoments(d) if center else None
        for block in blocks():
            if np.shape(block[0])[0] == 0:
                continue
            X, b, c = checked(block)
            n += X.shape[0]
            Xf = fit_rows(X, c)
            if Xf.shape[0]:
                n_fit += Xf.shape[0]
                lo = np.minimum(lo, Xf.min(axis=0))
                hi = np.maximum(hi, Xf.max(axis=0))
            if control_moments is not None:
                control_moments.update(X, b, c)  # type: ignore[arg-type]
        return n, n_fit, lo, hi, control_moments

    n, n_fit, lo, hi, control_moments = first_pass()
    if n == 0:
        raise ScreenError(f"{source}: no rows to fit the transforms on")
    if n_fit == 0:
        raise ScreenError(f"{source}: fit_on is 'controls' but no row has {PERT_TYPE} == {CONTROL!r}")
    flat = np.flatnonzero(lo == hi)
    if flat.size:
        raise ScreenError(
            f"{source}: feature column(s) {_labels(flat, names)} are constant over the {n_fit} "
            f"fit rows (fit_on {cfg['fit_on']!r}); remove them before fitting transforms"
        )
    fitted: dict[str, VariantTransform] = {}
    if "base" in variants:
        fitted["base"] = VariantTransform("base", names, fit_report={"variant": "base", "n_features_in": d, "steps": "identity"})
    if not whitened:
        return fitted
    center_scale = CenterScale()._fit_moments(control_moments, names) if control_moments is not None else None
    whitener = PCAWhitener(
        cfg["n_components"], cfg["whiten_eps"], derive_seed(seed, "whiten"),
        parallel_max_samples=cfg["parallel_max_samples"],
    )
    whitener._check_params()
    ica = None
    if "pca_ica" in whitened:
        ica = ICARotation(cfg["ica"], cfg["ica_max_iter"], cfg["ica_tol"], derive_seed(seed, "ica"), cfg["ica_max_samples"])
        ica._check_params()

    def second_pass(moments: Moments, samples: Sequence[RowSample]) -> None:
        """Center-scaled fit rows -> their moments and the seeded samples (parallel analysis, ICA)."""
        for block in blocks():
            if np.shape(block[0])[0] == 0:
                continue
            X, b, c = checked(block)
            Xw = X if center_scale is None else center_scale._scale(X, b)  # type: ignore[arg-type]
            Xw = fit_rows(Xw, c)
            if Xw.shape[0] == 0:
                continue
            moments.update(Xw)
            for sample in samples:
                sample.add(Xw)

    moments = Moments(d)
    parallel_sample = whitener._parallel_sample(n_fit)
    ica_sample = None if ica is None else ica._row_sample(n_fit)
    second_pass(moments, [s for s in (parallel_sample, ica_sample) if s is not None])
    if moments.n != n_fit:
        raise ValueError(f"{source}: the second pass saw {moments.n} fit rows, the first {n_fit}; the rows changed")
    whitener._fit_moments(moments, parallel_sample)
    base_report: dict[str, Any] = {
        "n_features_in": d,
        "fit_on": cfg["fit_on"],
        "n_samples_fit": int(n_fit),
        "center_scale": bool(cfg["center_scale"]),
        "batches": [] if center_scale is None else center_scale.batches_.tolist(),
        "controls_per_batch": [] if center_scale is None else center_scale.n_controls_.tolist(),
        "n_components_rule": whitener._rule(),
        "n_components": int(whitener.n_components_),
        "explained_variance_ratio": float(whitener.explained_variance_ratio_.sum()),
        "whiten_eps": float(cfg["whiten_eps"]),
    }
    for variant in whitened:
        rotation: ICARotation | RandomRotation | None = None
        report = {"variant": variant, **base_report}
        if variant == "pca_ica":
            rotation = ica._fit_sample(whitener._transform(ica_sample.rows()))  # type: ignore[union-attr]
            report["ica"] = {
                "method": cfg["ica"],
                "converged": bool(rotation.converged_),
                "n_iter": int(rotation.n_iter_),
                "max_iter": int(cfg["ica_max_iter"]),
                "tol": float(cfg["ica_tol"]),
                "n_samples": int(rotation.n_samples_fit_),
                "orthogonality_error": float(rotation.orthogonality_error_),
            }
        elif variant == "pca_rand":
            rotation = RandomRotation(derive_seed(seed, "rand"))._draw(whitener.n_components_)
            report["rotation"] = "haar-random"
        fitted[variant] = VariantTransform(variant, names, center_scale, whitener, rotation, report)
    return fitted


def fit_variants(
    variants: Sequence[str],
    X: Any,
    batches: Any,
    is_control: Any,
    cfg: Mapping[str, Any] | None,
    seed: int,
    feature_names: Sequence[str] | None = None,
) -> dict[str, VariantTransform]:
    """Fit several variants on in-memory rows (see :func:`fit_variants_streaming`, which this
    runs over row chunks of ``X``).

    Center-scale (if ``center_scale``) is fitted on each batch's controls; whitening and ICA
    on the rows chosen by ``fit_on`` (all rows, or the controls), after center-scale.
    """
    cfg = transform_config(cfg)
    names = list(feature_names) if feature_names is not None else [f"feature_{i}" for i in range(np.shape(X)[1])]
    X = _check_matrix(X, "fit X", len(names), names)
    n = X.shape[0]
    b = None if batches is None else _check_rows(batches, n, "batches")
    c = None if is_control is None else _check_rows(is_control, n, "is_control")

    def blocks() -> Iterator[RowBlock]:
        for rows in _chunks(n, cfg["batch_rows"]):
            yield X[rows], None if b is None else b[rows], None if c is None else c[rows]

    return fit_variants_streaming(variants, blocks, cfg, seed, names, source="fit X")


def fit_variant(
    variant: str,
    X: Any,
    batches: Any,
    is_control: Any,
    cfg: Mapping[str, Any] | None,
    seed: int,
    feature_names: Sequence[str] | None = None,
) -> VariantTransform:
    """Fit one variant (see :func:`fit_variants`)."""
    return fit_variants([variant], X, batches, is_control, cfg, seed, feature_names)[variant]


# --------------------------------------------------------------------------- table level

#: What the table-level functions take: a profile parquet (streamed from disk), an in-memory
#: table, or a :class:`phenoica.profiles.ProfileSource`.
Profiles = pd.DataFrame | pa.Table | ProfileSource | Path | str


def _source(profiles: Profiles, batch_rows: int, label: str = "profiles") -> ProfileSource:
    """A :class:`ProfileSource` over ``profiles``; a DataFrame's features are checked numeric first."""
    if isinstance(profiles, ProfileSource):
        return profiles
    if isinstance(profiles, pd.DataFrame):
        features = feature_columns(profiles)
        non_numeric = [c for c in features if not pd.api.types.is_numeric_dtype(profiles[c])
                       or pd.api.types.is_bool_dtype(profiles[c])]
        if non_numeric:
            raise ScreenError(f"{label}: feature column(s) {non_numeric[:10]} are not numeric")
        rows = [c for c in (BATCH, PERT_TYPE) if c in profiles.columns]
        return ProfileSource(profiles[features + rows], batch_rows, label)
    if isinstance(profiles, pa.Table):
        return ProfileSource(profiles, batch_rows, label)
    return ProfileSource(profiles, batch_rows)


def _source_features(src: ProfileSource, label: str) -> list[str]:
    """The feature columns of a profile source, checked numeric."""
    features = split_columns(src.columns)[1]
    check_numeric_features(src.schema, features, label)
    return features


def _row_columns(src: ProfileSource, label: str, need: bool) -> list[str]:
    """[batch, PertType] columns when the source has them (an error when ``need`` and absent)."""
    missing = [c for c in (BATCH, PERT_TYPE) if c not in src.columns]
    if missing:
        if need:
            raise ScreenError(f"{label}: missing column(s) {missing}, needed for center-scale / fit_on controls")
        return []
    return [BATCH, PERT_TYPE]


def _labels_of(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """One column of a record batch as a numpy array (dictionary columns decoded)."""
    col = batch.column(name)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    return col.to_numpy(zero_copy_only=False)


def _row_block(batch: pa.RecordBatch, features: Sequence[str], rows: bool) -> RowBlock:
    """(features, batch labels, control flags) of a record batch."""
    X = feature_matrix(batch, features)
    if not rows:
        return X, None, None
    return X, _labels_of(batch, BATCH), np.asarray(_labels_of(batch, PERT_TYPE) == CONTROL, dtype=bool)


def fit_transforms(
    profiles: Profiles,
    cfg: Mapping[str, Any] | None,
    seed: int,
    out_dir: Path | str,
    log: logging.Logger | None = None,
) -> dict[str, Path]:
    """Fit every variant in ``cfg["variants"]`` on a profile table and save it.

    ``profiles`` is the profile parquet (read in row batches of ``cfg["batch_rows"]``, two
    passes, memory independent of its length) or an in-memory table, which goes through the
    same streaming fit (:func:`fit_variants_streaming`).

    Writes ``{out_dir}/{variant}.npz`` (+ ``.json`` sidecar) and ``{out_dir}/fit_report.json``
    (variant -> fit report). Non-finite features and features constant over the fit rows are
    errors naming the columns. Returns variant -> .npz path.
    """
    log = log or LOG
    cfg = transform_config(cfg)
    out_dir = Path(out_dir)
    src = _source(profiles, cfg["batch_rows"])
    features = _source_features(src, src.label)
    needs_rows = bool(cfg["center_scale"] or cfg["fit_on"] == "controls") and any(
        v in WHITENED_VARIANTS for v in cfg["variants"]
    )
    row_columns = _row_columns(src, src.label, needs_rows)

    def blocks() -> Iterator[RowBlock]:
        for batch in src.batches(features + row_columns):
            block = _row_block(batch, features, bool(row_columns))
            del batch  # hold one copy of the rows, not two
            yield block

    fitted = fit_variants_streaming(cfg["variants"], blocks, cfg, seed, features, source=src.label)
    paths: dict[str, Path] = {}
    reports: dict[str, Any] = {}
    for variant, transform in fitted.items():
        paths[variant] = transform.save(out_dir / f"{variant}.npz")
        reports[variant] = transform.fit_report
        rep = transform.fit_report
        if variant == "base":
            log.info("variant base: identity on %d features", len(features))
            continue
        log.info(
            "variant %s: %d components (%s) explaining %.3f of the variance, fitted on %d rows",
            variant, rep["n_components"], rep["n_components_rule"], rep["explained_variance_ratio"], rep["n_samples_fit"],
        )
        ica = rep.get("ica")
        if ica:
            level = logging.INFO if ica["converged"] else logging.WARNING
            log.log(level, "variant %s: ICA (%s) %s after %d of %d iterations on %d rows",
                    variant, ica["method"], "converged" if ica["converged"] else "DID NOT CONVERGE",
                    ica["n_iter"], ica["max_iter"], ica["n_samples"])
    with atomic_path(out_dir / "fit_report.json") as tmp:
        tmp.write_text(json.dumps(reports, indent=2) + "\n")
    return paths


def _apply_plan(transform: VariantTransform, src: ProfileSource, label: str) -> tuple[list[str], list[str], CenterScale | None]:
    """Checks before applying: (fitted feature columns, row columns read, center-scale knowing
    every batch of the table). A batch unseen at fit gets its own controls' statistics, over
    the whole table (one extra pass over its rows); the saved transform is not changed."""
    features = _source_features(src, label)
    expected = transform.feature_names_in
    missing = [c for c in expected if c not in src.columns]
    extra = sorted(set(features) - set(expected))
    if missing or extra:
        raise ScreenError(
            f"{label}: feature columns differ from the fitted ones: missing {missing[:10]}, unexpected {extra[:10]}"
        )
    cs = transform.center_scale
    row_columns = _row_columns(src, label, cs is not None)
    if cs is None:
        return expected, row_columns, None
    seen: set[str] = set()
    for batch in src.batches([BATCH]):
        seen.update(str(v) for v in pc.unique(batch.column(BATCH)).to_pylist() if v is not None)
    unseen = cs._unseen(np.asarray(sorted(seen), dtype=str)) if seen else []
    if not unseen:
        return expected, row_columns, cs
    own = BatchMoments(len(expected))
    for batch in src.batches(expected + row_columns):
        X, b, c = _row_block(batch, expected, True)
        X = _check_matrix(X, label, len(expected), expected)
        own.update(X, _check_batches(b, X.shape[0]), c, only=set(unseen))
    return expected, row_columns, cs._with_batches(own, unseen, expected)


def _transformed_batches(transform: VariantTransform, src: ProfileSource, label: str,
                         columns: Sequence[str] | None = None) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """(record batch, its rows through the fitted variant) for every row batch of ``src``;
    the record batches hold ``columns`` (default: the features and row columns read)."""
    expected, row_columns, scaler = _apply_plan(transform, src, label)
    read = list(dict.fromkeys([*(columns or []), *expected, *row_columns]))
    for batch in src.batches(read):
        X, b, _ = _row_block(batch, expected, bool(row_columns))
        X = _check_matrix(X, label, len(expected), expected) if batch.num_rows else X
        if scaler is not None and batch.num_rows:
            b = _check_batches(b, X.shape[0])
        yield batch, transform._steps(X, b, scaler) if batch.num_rows else np.empty((0, len(transform.feature_names_out)))


def apply_transform(table: pd.DataFrame, transform_path: Path | str, batch_rows: int = DEFAULT_BATCH_ROWS) -> pd.DataFrame:
    """A profile table through one fitted variant: Metadata_* untouched + float32 features.

    The table's feature columns must be exactly the fitted ones (any order). Batches unseen
    at fit are center-scaled on their own controls; nothing is refitted. Row batch by row
    batch, as :func:`apply_transform_file` streams a parquet.
    """
    transform = load_transform(transform_path)
    label = f"profiles (transform {transform_path})"
    src = _source(table, batch_rows, label)
    parts = [out.astype(np.float32, copy=False) for _, out in _transformed_batches(transform, src, label)]
    values = np.concatenate(parts) if parts else np.empty((0, len(transform.feature_names_out)), np.float32)
    meta = table[metadata_columns(table)]
    return pd.concat([meta, pd.DataFrame(values, columns=transform.feature_names_out, index=table.index)], axis=1)


def apply_transform_file(
    profiles_path: Path | str,
    transform_path: Path | str,
    out_path: Path | str,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> int:
    """Stream a profile parquet through one fitted variant into ``out_path`` (atomic; row
    groups of ``batch_rows`` rows): the metadata columns as they are, then float32 features.
    Memory holds one row batch. Returns the rows written."""
    transform = load_transform(transform_path)
    src = ProfileSource(profiles_path, batch_rows)
    label = f"{profiles_path} (transform {transform_path})"
    meta = split_columns(src.columns)[0]
    schema = pa.schema([src.schema.field(c) for c in meta] + [pa.field(n, pa.float32()) for n in transform.feature_names_out])

    def batches() -> Iterator[pa.RecordBatch]:
        for batch, values in _transformed_batches(transform, src, label, meta):
            arrays = [batch.column(c) for c in meta] + [pa.array(col) for col in np.ascontiguousarray(values.T, dtype=np.float32)]
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    return write_batches(batches(), out_path, schema, batch_rows)
