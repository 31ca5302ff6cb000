"""The per-batch estimators of the variants, fitted on each batch's controls: center-scale
(:class:`CenterScale`, the first step of every whitened variant) and CORAL alignment
(:class:`CoralAlignment`, the last step of TVN).

They follow the scikit-learn idiom (:mod:`phenoica.transforms._estimator`, without scikit-learn):
hyper-parameters in ``__init__``, learned attributes end in ``_`` and are set by ``fit``;
``transform`` never refits. Arithmetic is float64 on row chunks; float32 input gives float32
output. :class:`CenterScale` also fits block by block: ``partial_fit`` adds a block of rows to the
accumulated statistics (:mod:`phenoica.transforms._accumulators`) and ``finalize`` turns them into
the fitted attributes; ``fit(X)`` is ``partial_fit(X)`` then ``finalize()``, the same arithmetic.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy import linalg

from phenoica.contract import BATCH, CONTROL, PERT_TYPE, ScreenError, check_matrix, check_rows, column_labels
from phenoica.transforms._accumulators import BatchMoments, Moments
from phenoica.transforms._estimator import Estimator, check_fitted
from phenoica.utils import out_dtype, row_chunks

LOG = logging.getLogger(__name__)


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


class CenterScale(Estimator):
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
        check_fitted(self, "mean_")
        return sorted(set(np.unique(np.asarray(batches).astype(str)).tolist()) - set(self.batches_.tolist()))

    def with_batches(
        self, moments: BatchMoments, batches: Sequence[str], feature_names: Sequence[str] | None = None
    ) -> "CenterScale":
        """A copy that also knows ``batches`` (unseen at fit), from their own control moments
        (accumulated over every row of those batches); the fitted state of ``self`` is left as it is."""
        check_fitted(self, "mean_")
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
        check_fitted(self, "mean_")
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


# --------------------------------------------------------------------------- CORAL (TVN)


def _sym_power(C: np.ndarray, power: float) -> np.ndarray:
    """A symmetric positive-definite matrix to a real power (eigendecomposition)."""
    vals, vecs = linalg.eigh((C + C.T) / 2.0)
    vals = np.clip(vals, np.finfo(float).tiny, None)
    return (vecs * vals**power) @ vecs.T


class CoralAlignment(Estimator):
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
        check_fitted(self, "alignment_")
        return sorted(set(np.unique(np.asarray(batches).astype(str)).tolist()) - set(self.batches_.tolist()))

    def with_batches(self, moments: dict[str, Moments]) -> "CoralAlignment":
        """A copy that also aligns the batches of ``moments`` (unseen at fit) from their own controls."""
        check_fitted(self, "alignment_")
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
        check_fitted(self, "alignment_")
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
