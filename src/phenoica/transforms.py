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
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
from picard import picard
from scipy import linalg
from scipy.stats import ortho_group
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import FastICA
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from phenoica.io import atomic_path
from phenoica.screen import BATCH, CONTROL, PERT_TYPE, ScreenError, feature_columns, metadata_columns

LOG = logging.getLogger(__name__)

VARIANTS: tuple[str, ...] = ("base", "pca", "pca_ica", "pca_rand")
WHITENED_VARIANTS: tuple[str, ...] = ("pca", "pca_ica", "pca_rand")
COMPONENT_PREFIX = "comp_"
FORMAT = "phenoica.transform"
FORMAT_VERSION = 1
CHUNK_ROWS = 32_768
ICA_METHODS = ("picard", "fastica")
#: Defaults of config["transforms"] when a key is absent (the schema's defaults, plus the
#: proposed ``ica_max_samples``: rows ICA is fitted on, a seeded subsample; None = all rows).
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
    "ica_max_samples": None,
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


def _mean(X: np.ndarray) -> np.ndarray:
    """Column means in float64, chunked."""
    total = np.zeros(X.shape[1])
    for rows in _chunks(X.shape[0]):
        total += X[rows].sum(axis=0, dtype=np.float64)
    return total / X.shape[0]


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


def covariance(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and covariance (ddof=1) in float64, accumulated over row chunks."""
    n, d = X.shape
    if n < 2:
        raise ValueError(f"covariance needs at least 2 samples, got {n}")
    mean = _mean(X)
    cov = np.zeros((d, d))
    for _, block in _centered_blocks(X, mean):
        cov += block.T @ block
    return mean, cov / (n - 1)


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
    """

    def __init__(self, min_controls: int = 2, min_sd: float = 1e-8) -> None:
        self.min_controls = min_controls
        self.min_sd = min_sd

    def _stats(self, Xb: np.ndarray, batch: str, names: Sequence[str] | None) -> tuple[np.ndarray, np.ndarray]:
        """Mean and SD of one batch's control rows, with the contract's checks."""
        if Xb.shape[0] < max(2, self.min_controls):
            raise ScreenError(
                f"batch {batch!r}: {Xb.shape[0]} control row(s); center-scale needs at least "
                f"{max(2, self.min_controls)} controls ({PERT_TYPE} == {CONTROL!r}) per batch"
            )
        mean = Xb.mean(axis=0, dtype=np.float64)
        sd = Xb.astype(np.float64).std(axis=0, ddof=1)
        flat = np.flatnonzero(sd <= self.min_sd)
        if flat.size:
            raise ScreenError(
                f"batch {batch!r}: feature column(s) {_labels(flat, names)} are constant over the batch's "
                f"{Xb.shape[0]} controls (SD <= {self.min_sd}); remove them before center-scale"
            )
        return mean, sd

    def fit(self, X: Any, batches: Any, is_control: Any, feature_names: Sequence[str] | None = None) -> "CenterScale":
        """Record each batch's control mean and SD."""
        X = _check_matrix(X, "CenterScale.fit X", names=feature_names)
        batches = _check_batches(batches, X.shape[0])
        is_control = _check_is_control(is_control, X.shape[0])
        names = np.unique(batches)
        means, sds, counts = [], [], []
        for batch in names.tolist():
            rows = (batches == batch) & is_control
            mean, sd = self._stats(X[rows], batch, feature_names)
            means.append(mean)
            sds.append(sd)
            counts.append(int(rows.sum()))
        self.batches_ = names
        self.mean_ = np.vstack(means)
        self.scale_ = np.vstack(sds)
        self.n_controls_ = np.asarray(counts, dtype=np.int64)
        self.n_features_in_ = X.shape[1]
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
        out = np.empty(X.shape, dtype=_out_dtype(X))
        known = {b: i for i, b in enumerate(self.batches_.tolist())}
        for batch in np.unique(batches).tolist():
            rows = np.flatnonzero(batches == batch)
            if batch in known:
                mean, sd = self.mean_[known[batch]], self.scale_[known[batch]]
            else:
                if is_control is None:
                    raise ValueError(
                        f"batch {batch!r} was not seen at fit; its own controls are needed: pass is_control"
                    )
                mean, sd = self._stats(X[rows[is_control[rows]]], batch, feature_names)
                LOG.info("center-scale: batch %r unseen at fit, scaled on its own %d controls",
                         batch, int(is_control[rows].sum()))
            for part in _chunks(rows.size):
                r = rows[part]
                out[r] = (X[r] - mean) / sd
        return out

    def fit_transform(self, X: Any, batches: Any, is_control: Any, feature_names: Sequence[str] | None = None) -> np.ndarray:  # type: ignore[override]
        """Fit, then transform the same rows."""
        return self.fit(X, batches, is_control, feature_names).transform(X, batches, is_control, feature_names)


# --------------------------------------------------------------------------- PCA whitening


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
    if n_permutations < 1:
        raise ValueError(f"parallel analysis: n_permutations must be >= 1, got {n_permutations}")
    if not 0 < quantile < 1:
        raise ValueError(f"parallel analysis: quantile must be in (0, 1), got {quantile}")
    rng = np.random.default_rng(seed)
    n, d = X.shape
    if n < 3:
        raise ValueError(f"parallel analysis needs at least 3 samples, got {n}")
    if max_samples is not None and n > max_samples:
        sample = np.asarray(X[np.sort(rng.choice(n, size=max_samples, replace=False))], dtype=np.float64)
    else:
        sample = np.asarray(X, dtype=np.float64)
    m = sample.shape[0]
    columns = np.ascontiguousarray((sample - sample.mean(axis=0)).T)  # d x m: each column contiguous
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
    :func:`parallel_analysis`, seeded by ``seed``). Eigen-decomposition of the float64
    covariance (scipy ``eigh``); ``eps`` (absolute, in the data's variance units) is added to
    each kept eigenvalue, so the whitened covariance on the fit data is
    ``diag(lambda / (lambda + eps))``, the identity within eps. Signs are fixed so that each
    component's largest-magnitude loading is positive.

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

    def fit(self, X: Any, y: Any = None) -> "PCAWhitener":
        """Estimate mean, eigenvectors and the number of components kept."""
        rule = self._rule()
        if self.eps < 0:
            raise ValueError(f"eps: expected >= 0, got {self.eps}")
        X = _check_matrix(X, "PCAWhitener.fit X")
        n, d = X.shape
        limit = min(n - 1, d)
        if isinstance(self.n_components, numbers.Integral) and self.n_components > limit:
            raise ValueError(
                f"n_components={self.n_components}, but the fit data has {n} samples and {d} features: at "
                f"most min(n_samples - 1, n_features) = {limit} components can be whitened"
            )
        if n < 3:
            raise ValueError(f"PCA whitening needs at least 3 samples, got {n}")
        mean, cov = covariance(X)
        evals, evecs = linalg.eigh(cov)
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
            k, _, threshold = parallel_analysis(
                X, n_permutations=self.n_permutations, max_samples=self.parallel_max_samples, seed=self.seed
            )
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
        self.mean_ = mean
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

    def fit(self, Z: Any, y: Any = None) -> "ICARotation":
        """Learn the rotation on whitened rows ``Z``."""
        if self.method not in ICA_METHODS:
            raise ValueError(f"ICA method: expected one of {ICA_METHODS}, got {self.method!r}")
        if self.max_iter < 1 or self.tol <= 0:
            raise ValueError(f"ICA: max_iter must be >= 1 and tol > 0, got {self.max_iter}, {self.tol}")
        Z = _check_matrix(Z, "ICARotation.fit Z")
        n, k = Z.shape
        if self.max_samples is not None and n > self.max_samples:
            rng = np.random.default_rng(self.seed)
            Z = Z[np.sort(rng.choice(n, size=self.max_samples, replace=False))]
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
        k = _check_matrix(Z, "RandomRotation.fit Z").shape[1]
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
        if self.center_scale is not None:
            if batches is None:
                raise ValueError(f"variant {self.variant}: center-scale needs the batch of every row")
            b = _check_batches(batches, X.shape[0])
            c = None if is_control is None else _check_is_control(is_control, X.shape[0])
            X = self.center_scale._transform(X, b, c, names)
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
    PCAWhitener(n_components=out["n_components"])._rule()
    return out


def derive_seed(seed: int, purpose: str) -> int:
    """An independent 32-bit seed for one purpose ('whiten', 'ica', 'rand') from the base seed."""
    purposes = ("whiten", "ica", "rand")
    return int(np.random.SeedSequence([int(seed), purposes.index(purpose)]).generate_state(1)[0])


def fit_variants(
    variants: Sequence[str],
    X: Any,
    batches: Any,
    is_control: Any,
    cfg: Mapping[str, Any] | None,
    seed: int,
    feature_names: Sequence[str] | None = None,
) -> dict[str, VariantTransform]:
    """Fit several variants at once, sharing one center-scale and one whitening between them.

    ``cfg`` is config["transforms"]. Center-scale (if ``center_scale``) is fitted on each
    batch's controls; whitening and ICA on the rows chosen by ``fit_on`` (all rows, or the
    controls), after center-scale. Seeds for the parallel analysis, ICA initialisation and
    the random rotation derive from ``seed`` (:func:`derive_seed`).
    """
    cfg = transform_config(cfg)
    variants = list(variants)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; expected some of {list(VARIANTS)}")
    names = list(feature_names) if feature_names is not None else [f"feature_{i}" for i in range(np.shape(X)[1])]
    X = _check_matrix(X, "fit X", len(names), names)
    n = X.shape[0]
    controls = None if is_control is None else _check_is_control(is_control, n)
    fitted: dict[str, VariantTransform] = {}
    if "base" in variants:
        fitted["base"] = VariantTransform(
            "base", names, fit_report={"variant": "base", "n_features_in": len(names), "steps": "identity"}
        )
    whitened = [v for v in variants if v in WHITENED_VARIANTS]
    if not whitened:
        return fitted
    center_scale = None
    Xw = X
    if cfg["center_scale"]:
        if batches is None or controls is None:
            raise ValueError("center_scale is on: the batch and control flag of every row are needed")
        b = _check_batches(batches, n)
        center_scale = CenterScale().fit(X, b, controls, names)
        Xw = center_scale._transform(X, b, controls, names)
    if cfg["fit_on"] == "controls":
        if controls is None:
            raise ValueError("fit_on is 'controls': the control flag of every row is needed")
        Xw = Xw[controls]
    whitener = PCAWhitener(cfg["n_components"], cfg["whiten_eps"], derive_seed(seed, "whiten")).fit(Xw)
    Z = whitener._transform(Xw)
    base_report: dict[str, Any] = {
        "n_features_in": len(names),
        "fit_on": cfg["fit_on"],
        "n_samples_fit": int(Xw.shape[0]),
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
            rotation = ICARotation(
                cfg["ica"], cfg["ica_max_iter"], cfg["ica_tol"], derive_seed(seed, "ica"), cfg["ica_max_samples"]
            ).fit(Z)
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
            rotation = RandomRotation(derive_seed(seed, "rand")).fit(Z)
            report["rotation"] = "haar-random"
        fitted[variant] = VariantTransform(variant, names, center_scale, whitener, rotation, report)
    return fitted


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


def _table_features(table: pd.DataFrame, source: str) -> list[str]:
    """Feature columns of a profile table, checked numeric."""
    features = feature_columns(table)
    if not features:
        raise ScreenError(f"{source}: no feature columns (every column is Metadata_*)")
    non_numeric = [c for c in features if not pd.api.types.is_numeric_dtype(table[c]) or pd.api.types.is_bool_dtype(table[c])]
    if non_numeric:
        raise ScreenError(f"{source}: feature column(s) {non_numeric[:10]} are not numeric")
    return features


def _table_rows(table: pd.DataFrame, source: str, need: bool) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Batch labels and control mask of a profile table (None when not needed and absent)."""
    missing = [c for c in (BATCH, PERT_TYPE) if c not in table.columns]
    if missing:
        if need:
            raise ScreenError(f"{source}: missing column(s) {missing}, needed for center-scale / fit_on controls")
        return None, None
    return table[BATCH].to_numpy(), (table[PERT_TYPE].astype(str) == CONTROL).to_numpy()


def _constant_columns(X: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Indices of columns whose value never changes over the selected rows (chunked)."""
    idx = np.flatnonzero(rows)
    lo = np.full(X.shape[1], np.inf)
    hi = np.full(X.shape[1], -np.inf)
    for part in _chunks(idx.size):
        block = X[idx[part]]
        lo = np.minimum(lo, block.min(axis=0))
        hi = np.maximum(hi, block.max(axis=0))
    return np.flatnonzero(lo == hi)


def fit_transforms(
    table: pd.DataFrame,
    cfg: Mapping[str, Any] | None,
    seed: int,
    out_dir: Path | str,
    log: logging.Logger | None = None,
) -> dict[str, Path]:
    """Fit every variant in ``cfg["variants"]`` on a profile table and save it.

    Writes ``{out_dir}/{variant}.npz`` (+ ``.json`` sidecar) and ``{out_dir}/fit_report.json``
    (variant -> fit report). Non-finite features and features constant over the fit rows are
    errors naming the columns. Returns variant -> .npz path.
    """
    log = log or LOG
    cfg = transform_config(cfg)
    out_dir = Path(out_dir)
    source = "profiles"
    features = _table_features(table, source)
    needs_rows = bool(cfg["center_scale"] or cfg["fit_on"] == "controls") and any(
        v in WHITENED_VARIANTS for v in cfg["variants"]
    )
    batches, controls = _table_rows(table, source, needs_rows)
    X = _check_matrix(table[features].to_numpy(), source, names=features)
    fit_rows = controls if cfg["fit_on"] == "controls" and controls is not None else np.ones(len(X), dtype=bool)
    if not fit_rows.any():
        raise ScreenError(f"{source}: fit_on is 'controls' but no row has {PERT_TYPE} == {CONTROL!r}")
    flat = _constant_columns(X, fit_rows)
    if flat.size:
        raise ScreenError(
            f"{source}: feature column(s) {_labels(flat, features)} are constant over the {int(fit_rows.sum())} "
            f"fit rows (fit_on {cfg['fit_on']!r}); remove them before fitting transforms"
        )
    fitted = fit_variants(cfg["variants"], X, batches, controls, cfg, seed, features)
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


def apply_transform(table: pd.DataFrame, transform_path: Path | str) -> pd.DataFrame:
    """A profile table through one fitted variant: Metadata_* untouched + float32 features.

    The table's feature columns must be exactly the fitted ones (any order). Batches unseen
    at fit are center-scaled on their own controls; nothing is refitted.
    """
    transform = load_transform(transform_path)
    source = f"profiles (transform {transform_path})"
    features = _table_features(table, source)
    expected = transform.feature_names_in
    missing = [c for c in expected if c not in table.columns]
    extra = sorted(set(features) - set(expected))
    if missing or extra:
        raise ScreenError(
            f"{source}: feature columns differ from the fitted ones: missing {missing[:10]}, unexpected {extra[:10]}"
        )
    batches, controls = _table_rows(table, source, transform.center_scale is not None)
    X = _check_matrix(table[expected].to_numpy(), source, names=expected)
    out = transform.transform(X, batches, controls)
    meta = table[metadata_columns(table)]
    values = pd.DataFrame(out.astype(np.float32, copy=False), columns=transform.feature_names_out, index=table.index)
    return pd.concat([meta, values], axis=1)
