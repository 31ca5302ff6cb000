"""The estimators of the embedding variants: center-scale, PCA whitening, ICA and random rotations.

They follow the scikit-learn idiom: hyper-parameters in ``__init__``, learned attributes end in
``_`` and are set by ``fit``; ``transform`` never refits. Arithmetic is float64 on row chunks;
float32 input gives float32 output, so a million-row table is never copied whole in float64.

Streaming: the two estimators fitted from moments of all the fit rows, :class:`CenterScale` and
:class:`PCAWhitener`, also fit block by block, as scikit-learn's ``IncrementalPCA`` and
``StandardScaler`` do: ``partial_fit`` adds a block of rows to the accumulated statistics
(:mod:`phenoica.variants.accumulators`) and ``finalize`` turns them into the fitted attributes
(with the checks a fit makes). ``fit(X)`` is ``partial_fit(X)`` then ``finalize()``, the same
arithmetic. The rotations are fitted on rows in memory: :class:`ICARotation` on a seeded
subsample of at most ``max_samples`` whitened rows, :class:`RandomRotation` from the width alone.

Component rules (``n_components``: a count, a fraction, ``"parallel"`` or ``"deflated"``, the
default) live in :mod:`phenoica.variants.components`. The count decides whether ICA helps:
whitening pure-noise directions inflates them to unit variance and ICA then rotates noise into
the signal, while keeping too few drops biology; the default keeps the components above a
noise floor that large nuisance directions do not raise.
"""

from __future__ import annotations

import logging
import numbers
import warnings
from typing import Any, Sequence

import numpy as np
import pandas as pd
from picard import picard
from scipy import linalg
from scipy.stats import ortho_group
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import FastICA
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from phenoica.arrays import centered_chunks, check_matrix, check_rows, column_labels, out_dtype, row_chunks
from phenoica.screen import BATCH, CONTROL, PERT_TYPE, ScreenError
from phenoica.variants.accumulators import BatchMoments, Moments, RowSample
from phenoica.variants.components import MIN_COMPONENTS, deflated_count, rule_name, too_few

LOG = logging.getLogger(__name__)

ICA_METHODS = ("picard", "fastica")


# --------------------------------------------------------------------------- per-row inputs


def check_batches(batches: Any, n: int) -> np.ndarray:
    """Batch labels as a str array, one per row, none missing."""
    arr = check_rows(batches, n, "batches")
    missing = pd.isna(arr)
    if missing.any():
        raise ScreenError(f"batches ({BATCH}): missing value at row(s) {list(np.flatnonzero(missing)[:5])}")
    return arr.astype(str)


def check_is_control(is_control: Any, n: int) -> np.ndarray:
    """A boolean control mask, one per row."""
    arr = check_rows(is_control, n, "is_control")
    if arr.dtype != bool:
        raise ValueError(f"is_control: expected a boolean mask, got dtype {arr.dtype}")
    return arr


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

    Streaming: ``partial_fit`` adds a block of rows to each batch's control moments
    (:class:`BatchMoments`), ``finalize`` computes the statistics; ``fit`` does both.
    """

    def __init__(self, min_controls: int = 2, min_sd: float = 1e-8) -> None:
        self.min_controls = min_controls
        self.min_sd = min_sd

    def _stats(
        self, moments: Moments | None, batch: str, names: Sequence[str] | None
    ) -> tuple[np.ndarray, np.ndarray, int]:
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
                f"batch {batch!r}: feature column(s) {column_labels(flat, names)} are constant over the batch's "
                f"{count} controls (SD <= {self.min_sd}); remove them before center-scale"
            )
        return moments.mean.copy(), sd, count  # type: ignore[union-attr]

    def fit(self, X: Any, batches: Any, is_control: Any, feature_names: Sequence[str] | None = None) -> "CenterScale":
        """Record each batch's control mean and SD."""
        self._moments: BatchMoments | None = None
        return self.partial_fit(X, batches, is_control, feature_names).finalize(feature_names)

    def partial_fit(
        self, X: Any, batches: Any, is_control: Any, feature_names: Sequence[str] | None = None
    ) -> "CenterScale":
        """Add a block of rows to each batch's control moments; call :meth:`finalize` after the last block."""
        moments: BatchMoments | None = getattr(self, "_moments", None)
        X = check_matrix(X, "CenterScale.fit X", None if moments is None else moments.n_features, feature_names)
        batches = check_batches(batches, X.shape[0])
        is_control = check_is_control(is_control, X.shape[0])
        if moments is None:
            moments = self._moments = BatchMoments(X.shape[1])
        moments.update(X, batches, is_control)
        return self

    def finalize(self, feature_names: Sequence[str] | None = None) -> "CenterScale":
        """Finish a fit from the blocks added by :meth:`partial_fit`: each batch's control mean
        and SD, checked (every batch registered, even one without controls, is named if it has
        too few). The accumulated moments are then dropped: a later ``partial_fit`` starts anew."""
        moments: BatchMoments | None = getattr(self, "_moments", None)
        if moments is None:
            raise ValueError("CenterScale.finalize: no rows were added; call partial_fit first")
        names = sorted(moments.batches)
        stats = [self._stats(moments.batches[b], b, feature_names) for b in names]
        self.batches_ = np.asarray(names)
        self.mean_ = np.vstack([s[0] for s in stats])
        self.scale_ = np.vstack([s[1] for s in stats])
        self.n_controls_ = np.asarray([s[2] for s in stats], dtype=np.int64)
        self.n_features_in_ = moments.n_features
        self._moments = None
        return self

    def unseen(self, batches: Any) -> list[str]:
        """The batch labels among ``batches`` that were not seen at fit, sorted."""
        check_is_fitted(self, "mean_")
        return sorted(set(np.unique(np.asarray(batches).astype(str)).tolist()) - set(self.batches_.tolist()))

    def with_batches(
        self, moments: BatchMoments, batches: Sequence[str], feature_names: Sequence[str] | None = None
    ) -> "CenterScale":
        """A copy that also knows ``batches`` (unseen at fit), from their own control moments
        (accumulated over every row of those batches); the fitted state of ``self`` is left as it is."""
        check_is_fitted(self, "mean_")
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

    def transform(
        self, X: Any, batches: Any, is_control: Any | None = None, feature_names: Sequence[str] | None = None
    ) -> np.ndarray:
        """(X - batch control mean) / batch control SD; unseen batches use their own controls
        among these rows (``is_control`` is needed only for them)."""
        check_is_fitted(self, "mean_")
        X = check_matrix(X, "CenterScale.transform X", self.n_features_in_, feature_names)
        batches = check_batches(batches, X.shape[0])
        if is_control is not None:
            is_control = check_is_control(is_control, X.shape[0])
        scaler = self
        unseen = self.unseen(batches)
        if unseen:
            if is_control is None:
                raise ValueError(
                    f"batch {unseen[0]!r} was not seen at fit; its own controls are needed: pass is_control"
                )
            own = BatchMoments(X.shape[1]).update(X, batches, is_control, only=set(unseen))
            scaler = self.with_batches(own, unseen, feature_names)
        return scaler._scale(X, batches)

    def _scale(self, X: np.ndarray, batches: np.ndarray) -> np.ndarray:
        """(X - mean) / SD with the statistics of each row's batch (all of them known)."""
        out = np.empty(X.shape, dtype=out_dtype(X))
        known = {b: i for i, b in enumerate(self.batches_.tolist())}
        for batch in np.unique(batches).tolist():
            if batch not in known:
                raise ValueError(f"batch {batch!r} was not seen at fit and has no statistics")
            i = known[batch]
            rows = np.flatnonzero(batches == batch)
            first = int(rows[0])
            run = rows[-1] - first + 1 == rows.size  # one run of rows (the usual case): slices, no gathers
            for part in row_chunks(rows.size):
                r = slice(first + part.start, first + part.stop) if run else rows[part]  # type: ignore[union-attr]
                block = np.subtract(X[r], self.mean_[i])
                block /= self.scale_[i]
                out[r] = block
        return out

    def fit_transform(
        self, X: Any, batches: Any, is_control: Any, feature_names: Sequence[str] | None = None
    ) -> np.ndarray:  # type: ignore[override]
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
    reaching it), ``"deflated"`` (default; deflated deterministic parallel analysis, from the
    covariance alone, :func:`phenoica.variants.components.deflated_count`) or ``"parallel"``
    (Horn's parallel analysis, see :func:`parallel_analysis`, seeded by ``seed``, on at most
    ``parallel_max_samples`` rows). A rule keeping fewer than 2 components is an error naming
    the rule and the leading eigenvalues; a rule keeping more than the numerical rank is capped
    there (logged); a count above the numerical rank is an error.
    Eigen-decomposition of the float64 covariance (scipy ``eigh``) accumulated as
    :class:`Moments`; ``eps`` (absolute, in the data's variance units) is added to each kept
    eigenvalue, so the whitened covariance on the fit data is ``diag(lambda / (lambda + eps))``,
    the identity within eps. Signs are fixed so that each component's largest-magnitude loading
    is positive.

    Streaming: ``partial_fit`` adds a block of fit rows (their moments, and the rows of the
    parallel-analysis subsample among them), ``finalize`` decomposes; ``fit`` does both.

    At most ``min(n_samples - 1, n_features)`` components exist; asking for more is an error.
    """

    def __init__(
        self,
        n_components: int | float | str = "deflated",
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

    def component_rule(self) -> str:
        """The component rule as a string for reports (``count 8``, ``fraction 0.9``,
        ``parallel``, ``deflated``); an error when ``n_components`` is none of these
        (:func:`phenoica.variants.components.rule_name`)."""
        return rule_name(self.n_components)

    def _check_params(self) -> str:
        rule = self.component_rule()
        if self.eps < 0:
            raise ValueError(f"eps: expected >= 0, got {self.eps}")
        return rule

    def fit(self, X: Any, y: Any = None) -> "PCAWhitener":
        """Estimate mean, eigenvectors and the number of components kept."""
        self._check_params()
        X = check_matrix(X, "PCAWhitener.fit X")
        self._stream: tuple[Moments, RowSample | None] | None = None
        return self.partial_fit(X, n_total=X.shape[0]).finalize()

    def partial_fit(self, X: Any, y: Any = None, *, n_total: int | None = None) -> "PCAWhitener":
        """Add a block of fit rows; call :meth:`finalize` after the last block.

        ``n_total``, the number of fit rows that will stream in all, is needed with the first
        block when ``n_components`` is ``"parallel"``: the parallel-analysis subsample is drawn
        up front from it (:class:`RowSample`), so the streamed fit equals the in-memory one.
        """
        rule = self._check_params()
        state: tuple[Moments, RowSample | None] | None = getattr(self, "_stream", None)
        X = check_matrix(X, "PCAWhitener.fit X", None if state is None else state[0].mean.size)
        if state is None:
            sample = None
            if rule == "parallel":
                if n_total is None:
                    raise ValueError(
                        "PCAWhitener.partial_fit: parallel analysis draws its row subsample up front; "
                        "pass n_total (the fit rows that will stream in all) with the first block"
                    )
                sample = RowSample(n_total, self.parallel_max_samples, self.seed)
            state = self._stream = (Moments(X.shape[1]), sample)
        moments, sample = state
        moments.update(X)
        if sample is not None:
            sample.add(X)
        return self

    def finalize(self) -> "PCAWhitener":
        """Finish a fit from the blocks added by :meth:`partial_fit`: eigendecomposition of the
        covariance, the component count by the rule, the whitening matrix. The accumulated
        moments and sample are then dropped: a later ``partial_fit`` starts anew."""
        state: tuple[Moments, RowSample | None] | None = getattr(self, "_stream", None)
        if state is None:
            raise ValueError("PCAWhitener.finalize: no rows were added; call partial_fit first")
        self._stream = None
        moments, sample = state
        rule = self._check_params()
        n, d = moments.n, moments.mean.size
        if sample is not None and sample.n != n:
            raise ValueError(f"PCAWhitener.finalize: {n} rows were added, n_total announced {sample.n}")
        limit = min(n - 1, d)
        if isinstance(self.n_components, numbers.Integral) and self.n_components > limit:
            raise ValueError(
                f"n_components={self.n_components}, but the fit data has {n} samples and {d} features: at "
                f"most min(n_samples - 1, n_features) = {limit} components can be whitened"
            )
        if n < 3:
            raise ValueError(f"PCA whitening needs at least 3 samples, got {n}")
        cov = moments.covariance()
        evals, evecs = linalg.eigh(cov)
        evals, evecs = np.clip(evals[::-1], 0.0, None), evecs[:, ::-1]
        total = float(evals.sum())
        if total <= 0:
            raise ScreenError("PCAWhitener.fit X: every feature is constant; nothing to whiten")
        ratio = evals / total
        k = self._count(rule, evals, evecs, np.diag(cov), n, sample)
        rank = int((evals > evals[0] * 1e-10).sum())
        if not rule.startswith("count") and k > min(rank, limit):
            LOG.warning("PCA whitening: rule %s keeps %d components, capped at the numerical rank %d", rule, k, rank)
            k = min(rank, limit)
        if k > min(rank, limit):
            raise ValueError(
                f"n_components={self.n_components}, but the fit data ({n} samples, {d} features) have numerical "
                f"rank {rank}: at most {min(rank, limit)} components carry variance; the others would be "
                "noise scaled up by 1/sqrt(eps). Ask for fewer components or use a rule (e.g. 'deflated')"
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

    def _count(
        self,
        rule: str,
        evals: np.ndarray,
        evecs: np.ndarray,
        variances: np.ndarray,
        n: int,
        sample: RowSample | None,
    ) -> int:
        """The component count of the rule (sets ``component_thresholds_``: the floor each
        tested rank was compared with, for the rules that have one)."""
        self.parallel_threshold_: np.ndarray | None = None
        self.component_thresholds_: np.ndarray | None = None
        if rule.startswith("count"):
            return int(self.n_components)  # type: ignore[arg-type]
        if rule.startswith("fraction"):
            ratio = evals / float(evals.sum())
            k = int(np.searchsorted(np.cumsum(ratio), float(self.n_components) - 1e-12) + 1)  # type: ignore[arg-type]
        elif rule == "deflated":
            k, self.component_thresholds_ = deflated_count(evals, evecs, variances, n)
        else:
            k, _, threshold = _parallel_analysis(sample, self.n_permutations, 0.95)  # type: ignore[arg-type]
            self.parallel_threshold_ = self.component_thresholds_ = threshold
        if k < MIN_COMPONENTS:
            raise too_few(rule, k, evals, self.component_thresholds_)
        return k

    def transform(self, X: Any) -> np.ndarray:
        """Whiten rows with the fitted mean and components (never refits)."""
        check_is_fitted(self, "whitening_")
        X = check_matrix(X, "PCAWhitener.transform X", self.n_features_in_)
        out = np.empty((X.shape[0], self.n_components_), dtype=out_dtype(X))
        for rows, block in centered_chunks(X, self.mean_):
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
        Z = check_matrix(Z, f"{type(self).__name__}.transform Z", self.n_features_in_)
        out = np.empty(Z.shape, dtype=out_dtype(Z))
        for rows, block in centered_chunks(Z, np.zeros(Z.shape[1])):
            out[rows] = block @ self.rotation_.T
        return out


class ICARotation(_Rotation):
    """An orthogonal ICA unmixing rotation learned on whitened data: ``S = Z @ rotation_.T``.

    ``method="picard"`` (default): python-picard's orthogonal Picard (Picard-O,
    ``ortho=True, extended=True``: handles sub- and super-Gaussian sources). ``"fastica"``:
    scikit-learn FastICA (parallel, logcosh, ``whiten=False`` since the input is white).
    ``max_samples``: fit on a seeded subsample of at most that many rows (None = all); rows
    already subsampled to at most ``max_samples`` (a streamed fit collects them) are all used.

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

    def fit(self, Z: Any, y: Any = None) -> "ICARotation":
        """Learn the rotation on whitened rows ``Z`` (a seeded subsample if ``max_samples``)."""
        self._check_params()
        Z = check_matrix(Z, "ICARotation.fit Z")
        sample = RowSample(Z.shape[0], self.max_samples, self.seed)
        sample.add(Z)
        Z = sample.rows()
        k = Z.shape[1]
        if Z.shape[0] <= k:
            raise ValueError(
                f"ICA: {Z.shape[0]} samples are too few for {k} components (need more samples than components)"
            )
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
                    np.ascontiguousarray(Z.T, dtype=np.float64),
                    ortho=True,
                    extended=True,
                    whiten=False,
                    centering=True,
                    max_iter=self.max_iter,
                    tol=self.tol,
                    random_state=self.seed,
                    return_n_iter=True,
                )
                failed = [w for w in caught if "did not converge" in str(w.message)]
            else:
                ica = FastICA(
                    whiten=False,
                    algorithm="parallel",
                    fun="logcosh",
                    max_iter=self.max_iter,
                    tol=self.tol,
                    random_state=self.seed,
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
                self.method,
                self.n_iter_,
                self.tol,
                Z.shape[0],
                k,
                failed[0].message,
            )
        return self


class RandomRotation(_Rotation):
    """A Haar-random orthogonal rotation (scipy ``ortho_group``), seeded: the "any rotation" control."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def fit(self, Z: Any, y: Any = None) -> "RandomRotation":
        """Draw a rotation of the dimension of ``Z`` (only its width is used)."""
        return self.draw(check_matrix(Z, "RandomRotation.fit Z").shape[1])

    def draw(self, n_components: int) -> "RandomRotation":
        """Draw the seeded Haar-random rotation of dimension ``n_components`` (what ``fit`` does
        with the width of its input)."""
        if int(n_components) < 1:
            raise ValueError(f"RandomRotation.draw: n_components must be >= 1, got {n_components}")
        self.rotation_ = np.atleast_2d(ortho_group.rvs(int(n_components), random_state=self.seed)).astype(np.float64)
        self.n_features_in_ = int(n_components)
        return self


# --------------------------------------------------------------------------- CORAL (TVN)


def _sym_power(C: np.ndarray, power: float) -> np.ndarray:
    """A symmetric positive-definite matrix to a real power (eigendecomposition)."""
    vals, vecs = linalg.eigh((C + C.T) / 2.0)
    vals = np.clip(vals, np.finfo(float).tiny, None)
    return (vecs * vals**power) @ vecs.T


class CoralAlignment(TransformerMixin, BaseEstimator):
    """Per-batch CORAL on controls, the last step of TVN (typical variation normalization).

    For every batch ``b``, from the mean ``m_b`` and covariance ``C_b`` of its control rows and
    the pooled controls' ``m``, ``C``: ``z -> (z - m_b) A_b + m`` with
    ``A_b = (C_b + eps I)^(-1/2) (C + eps I)^(1/2)``: the batch's control covariance is whitened
    and re-coloured to the pooled one (Sun et al. 2016, CORAL; applied per batch on controls as
    in EFAAR's ``tvn_on_controls``, whose regularization ``eps`` = 0.5 is the default here).

    ``fit_moments`` takes per-batch control moments (:class:`Moments`, full scatter) already in
    the space the step works in; a batch unseen at fit gets its own controls' moments through
    :meth:`with_batches` (the fitted state is left as it is). A batch with fewer than
    ``min_controls`` controls is an error naming it.
    """

    def __init__(self, eps: float = 0.5, min_controls: int = 2) -> None:
        self.eps = eps
        self.min_controls = min_controls

    def _check(self, batch: str, moments: Moments | None) -> Moments:
        count = 0 if moments is None else moments.n
        if count < max(2, self.min_controls):
            raise ScreenError(
                f"batch {batch!r}: {count} control row(s); TVN's per-batch CORAL needs at least "
                f"{max(2, self.min_controls)} controls ({PERT_TYPE} == {CONTROL!r}) per batch"
            )
        return moments  # type: ignore[return-value]

    def fit(self, Z: Any, batches: Any, is_control: Any) -> "CoralAlignment":
        """Fit from rows in memory: each batch's control rows of ``Z``."""
        Z = check_matrix(Z, "CoralAlignment.fit X")
        batches = check_batches(batches, Z.shape[0])
        is_control = check_is_control(is_control, Z.shape[0])
        moments: dict[str, Moments] = {}
        for batch in np.unique(batches).tolist():
            moments[batch] = Moments(Z.shape[1])
            rows = (batches == batch) & is_control
            if rows.any():
                moments[batch].update(Z[rows])
        return self.fit_moments(moments)

    def fit_moments(self, moments: dict[str, Moments]) -> "CoralAlignment":
        """Fit from each batch's control moments (batch -> :class:`Moments`)."""
        if not moments:
            raise ScreenError("TVN: no control rows to align batches on")
        names = sorted(moments)
        checked = [self._check(b, moments[b]) for b in names]
        d = checked[0].mean.size
        pooled = Moments(d)
        for m in checked:  # merge the batches' moments (Chan et al.'s pairwise update)
            delta = m.mean - pooled.mean
            n = pooled.n + m.n
            pooled.scatter = pooled.scatter + m.scatter + np.outer(delta, delta) * (pooled.n * m.n / n)
            pooled.mean = pooled.mean + delta * (m.n / n)
            pooled.n = n
        self.target_mean_ = pooled.mean.copy()
        self.target_cov_ = pooled.covariance()
        self.n_features_in_ = d
        self.batches_ = np.asarray(names, dtype=str)
        self.source_mean_ = np.vstack([m.mean for m in checked])
        self.alignment_ = np.stack([self._matrix(m.covariance()) for m in checked])
        self.n_controls_ = np.asarray([m.n for m in checked], dtype=np.int64)
        return self

    def _matrix(self, source_cov: np.ndarray) -> np.ndarray:
        eye = np.eye(source_cov.shape[0]) * float(self.eps)
        return _sym_power(source_cov + eye, -0.5) @ _sym_power(self.target_cov_ + eye, 0.5)

    def unseen(self, batches: Any) -> list[str]:
        """The batch labels among ``batches`` not seen at fit, sorted."""
        check_is_fitted(self, "alignment_")
        return sorted(set(np.unique(np.asarray(batches).astype(str)).tolist()) - set(self.batches_.tolist()))

    def with_batches(self, moments: dict[str, Moments]) -> "CoralAlignment":
        """A copy that also aligns the batches of ``moments`` (unseen at fit) from their own controls."""
        check_is_fitted(self, "alignment_")
        out = CoralAlignment(self.eps, self.min_controls)
        names = sorted(moments)
        checked = [self._check(b, moments[b]) for b in names]
        for b, m in zip(names, checked):
            LOG.info("TVN: batch %r unseen at fit, aligned on its own %d controls", b, m.n)
        out.target_mean_, out.target_cov_, out.n_features_in_ = self.target_mean_, self.target_cov_, self.n_features_in_
        out.batches_ = np.concatenate([self.batches_.astype(str), np.asarray(names, dtype=str)])
        out.source_mean_ = np.vstack([self.source_mean_, *[m.mean for m in checked]])
        out.alignment_ = (
            np.concatenate([self.alignment_, np.stack([self._matrix(m.covariance()) for m in checked])])
            if checked
            else self.alignment_
        )
        out.n_controls_ = np.concatenate([self.n_controls_, np.asarray([m.n for m in checked], dtype=np.int64)])
        return out

    def transform(self, Z: Any, batches: Any) -> np.ndarray:
        """Align each row with its batch's map (every batch must be known: see :meth:`with_batches`)."""
        check_is_fitted(self, "alignment_")
        Z = check_matrix(Z, "CoralAlignment.transform X", self.n_features_in_)
        batches = check_batches(batches, Z.shape[0])
        known = {b: i for i, b in enumerate(self.batches_.tolist())}
        out = np.empty(Z.shape, dtype=out_dtype(Z))
        for batch in np.unique(batches).tolist():
            if batch not in known:
                raise ValueError(f"TVN: batch {batch!r} was not seen at fit; align it on its own controls first")
            i = known[batch]
            rows = np.flatnonzero(batches == batch)
            out[rows] = (Z[rows] - self.source_mean_[i]) @ self.alignment_[i] + self.target_mean_
        return out
