"""PCA whitening (:class:`PCAWhitener`) and Horn's parallel analysis (:func:`parallel_analysis`).

The whitener follows the scikit-learn idiom (:mod:`phenoica.transforms._estimator`, without
scikit-learn: hyper-parameters in ``__init__``, learned attributes end in ``_``, ``transform``
never refits) and streams as scikit-learn's ``IncrementalPCA`` does: ``partial_fit`` adds a
block of rows to the accumulated float64 moments and ``finalize`` turns them into the fitted
attributes (with the checks a fit makes); ``fit(X)`` is ``partial_fit(X)`` then ``finalize()``,
the same arithmetic. float32 input gives float32 output. :func:`whitened_moments` carries
per-batch moments through a fitted whitening (TVN's alignment is fitted on them).

Component rules (``n_components``: a count, a fraction, ``"parallel"`` or ``"deflated"``, the
default) live in :mod:`phenoica.transforms._components`. The count decides whether ICA helps:
whitening pure-noise directions inflates them to unit variance and ICA then rotates noise into
the signal, while keeping too few drops biology; the default keeps the components above a
noise floor that large nuisance directions do not raise.
"""

from __future__ import annotations

import logging
import numbers
from typing import Any, Mapping

import numpy as np
from scipy import linalg

from phenoica.contract import MIN_COMPONENTS, ScreenError, check_matrix, component_rule
from phenoica.transforms._accumulators import Moments, RowSample
from phenoica.transforms._components import deflated_count, too_few
from phenoica.transforms._estimator import Transformer, check_fitted
from phenoica.utils import centered_chunks, out_dtype

LOG = logging.getLogger(__name__)


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


class PCAWhitener(Transformer):
    """PCA whitening: ``Z = (X - mean) @ V_k / sqrt(lambda_k + eps)``.

    ``n_components``: an integer count, a fraction in (0, 1) of explained variance (smallest k
    reaching it), ``"deflated"`` (default; deflated deterministic parallel analysis, from the
    covariance alone, :func:`phenoica.transforms._components.deflated_count`) or ``"parallel"``
    (Horn's parallel analysis, see :func:`parallel_analysis`, seeded by ``seed``, on at most
    ``parallel_max_samples`` rows). A rule keeping fewer than 2 components is an error naming
    the rule and the leading eigenvalues; a rule keeping more than the numerical rank is capped
    there (logged); a count above the numerical rank is an error.
    Eigen-decomposition of the float64 covariance (scipy ``eigh``) accumulated as
    :class:`Moments`; ``eps`` (absolute, in the data's variance units) is added to each kept
    eigenvalue, so the whitened covariance on the fit data is ``diag(lambda / (lambda + eps))``,
    the identity within eps. ``ridge`` (relative) adds ``ridge`` times the mean eigenvalue (the
    total variance over the features) as well: a direction whose variance lies far below the
    mean is then shrunk toward zero instead of being inflated to unit variance, so that noise and
    directions the fit rows barely span do not weigh as much as the structure (0, the paper's
    whitening, inflates every kept direction). ``max_components`` caps the count any rule keeps
    (logged; ``component_cap_``). Signs are fixed so that each component's largest-magnitude loading
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
        ridge: float = 0.0,
        max_components: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.eps = eps
        self.seed = seed
        self.n_permutations = n_permutations
        self.parallel_max_samples = parallel_max_samples
        self.ridge = ridge
        self.max_components = max_components

    def component_rule(self) -> str:
        """The component rule as a string for reports (``count 8``, ``fraction 0.9``,
        ``parallel``, ``deflated``); an error when ``n_components`` is none of these
        (:func:`phenoica.contract.component_rule`)."""
        return component_rule(self.n_components, "n_components")

    def _check_params(self) -> str:
        rule = self.component_rule()
        if self.eps < 0:
            raise ValueError(f"eps: expected >= 0, got {self.eps}")
        if self.ridge < 0:
            raise ValueError(f"ridge: expected >= 0, got {self.ridge}")
        if self.max_components is not None and self.max_components < MIN_COMPONENTS:
            raise ValueError(f"max_components: expected >= {MIN_COMPONENTS}, got {self.max_components}")
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
        capped = self.max_components is not None and self.max_components <= limit
        if isinstance(self.n_components, numbers.Integral) and self.n_components > limit and not capped:
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
        self.component_cap_: int | None = None
        if self.max_components is not None and k > self.max_components:
            LOG.warning(
                "PCA whitening: rule %s keeps %d components, capped at %d (max_components: fewer directions "
                "than the fit rows span)",
                rule,
                k,
                self.max_components,
            )
            self.component_cap_ = int(self.max_components)
            k = self.max_components
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
        self.ridge_ = float(self.ridge) * total / d
        self.whitening_ = components / np.sqrt(evals[:k] + self.eps + self.ridge_)[:, None]
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
        check_fitted(self, "whitening_")
        X = check_matrix(X, "PCAWhitener.transform X", self.n_features_in_)
        out = np.empty((X.shape[0], self.n_components_), dtype=out_dtype(X))
        for rows, block in centered_chunks(X, self.mean_):
            out[rows] = block @ self.whitening_.T
        return out


def whitened_moments(moments: Mapping[str, Moments], whitener: PCAWhitener) -> dict[str, Moments]:
    """Per-batch moments carried through the (affine) whitening: mean -> whitened mean,
    scatter -> W^T scatter W (W = ``whitening_.T``)."""
    W = whitener.whitening_.T
    out: dict[str, Moments] = {}
    for batch, m in moments.items():
        w = Moments(W.shape[1])
        w.n, w.mean, w.scatter = m.n, (m.mean - whitener.mean_) @ W, W.T @ m.scatter @ W
        out[batch] = w
    return out
