"""The fitted maps from model A's latents to model B's: permutation, rigid, linear and ICA (see the package docstring)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import linalg
from scipy.optimize import linear_sum_assignment
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from phenoica.contract import check_matrix
from phenoica.transforms import ICARotation, PCAWhitener
from phenoica.utils import derive_seed, row_chunks

LOG = logging.getLogger(__name__)


MAPS: tuple[str, ...] = ("permutation", "rigid", "linear", "ica")


PERMUTATION_MATCHES: tuple[str, ...] = ("correlation", "least_squares")


def check_embedding_pair(A: Any, B: Any) -> tuple[np.ndarray, np.ndarray]:
    """Two finite numeric 2-D arrays with the same number of rows (the same images)."""
    A = check_matrix(A, "A (embeddings of model A)")
    B = check_matrix(B, "B (embeddings of model B)")
    if A.shape[0] != B.shape[0]:
        raise ValueError(f"A and B must embed the same images row for row: A has {A.shape[0]} rows, B has {B.shape[0]}")
    return A, B


def _polar(M: np.ndarray) -> np.ndarray:
    """The (semi-)orthogonal factor ``U V^T`` of the thin SVD of ``M``."""
    U, _, Vt = linalg.svd(M, full_matrices=False)
    return U @ Vt


@dataclass(frozen=True)
class CrossProducts:
    """Means and centered scatter matrices of a pair of embeddings over some rows (float64).

    ``aa = A_c^T A_c``, ``ab = A_c^T B_c``, ``bb = B_c^T B_c`` with ``A_c = A - mean_a``: every
    least-squares map of this module is a function of them, so the data are read once.
    """

    n: int
    mean_a: np.ndarray
    mean_b: np.ndarray
    aa: np.ndarray
    ab: np.ndarray
    bb: np.ndarray

    @classmethod
    def of(cls, A: np.ndarray, B: np.ndarray, rows: np.ndarray | None = None) -> "CrossProducts":
        """Cross-products of ``A[rows]`` and ``B[rows]`` (all rows if None), in row chunks."""
        sel: np.ndarray | int = A.shape[0] if rows is None else np.asarray(rows)
        n = int(sel) if isinstance(sel, int) else int(sel.size)
        if n < 1:
            raise ValueError("cross-products need at least one row")
        sum_a, sum_b = np.zeros(A.shape[1]), np.zeros(B.shape[1])
        for part in row_chunks(sel):
            sum_a += A[part].sum(axis=0, dtype=np.float64)
            sum_b += B[part].sum(axis=0, dtype=np.float64)
        mean_a, mean_b = sum_a / n, sum_b / n
        aa = np.zeros((A.shape[1], A.shape[1]))
        ab = np.zeros((A.shape[1], B.shape[1]))
        bb = np.zeros((B.shape[1], B.shape[1]))
        for part in row_chunks(sel):
            a = A[part] - mean_a
            b = B[part] - mean_b
            aa += a.T @ a
            ab += a.T @ b
            bb += b.T @ b
        return cls(n, mean_a, mean_b, aa, ab, bb)

    def pooled(self, other: "CrossProducts") -> "CrossProducts":
        """The cross-products of the union of two disjoint row sets (exact pooling of scatters)."""
        n = self.n + other.n
        da, db = other.mean_a - self.mean_a, other.mean_b - self.mean_b
        w = self.n * other.n / n
        return CrossProducts(
            n,
            (self.n * self.mean_a + other.n * other.mean_a) / n,
            (self.n * self.mean_b + other.n * other.mean_b) / n,
            self.aa + other.aa + w * np.outer(da, da),
            self.ab + other.ab + w * np.outer(da, db),
            self.bb + other.bb + w * np.outer(db, db),
        )


class AffineMap(BaseEstimator):
    """Shared prediction and scoring of the affine maps: ``f(a) = a @ coef_ + intercept_``.

    scikit-learn idiom: hyper-parameters in ``__init__``, fitted attributes end in ``_``.
    """

    coef_: np.ndarray
    intercept_: np.ndarray

    def _finish(self, coef: np.ndarray, cross: CrossProducts) -> None:
        """Store ``coef`` and the intercept sending A's training mean to B's training mean."""
        self.coef_ = coef
        self.intercept_ = cross.mean_b - cross.mean_a @ coef
        self.n_features_in_ = coef.shape[0]
        self.n_features_out_ = coef.shape[1]

    def predict(self, A: Any) -> np.ndarray:
        """Map rows of A into B's space (float64, n x Db)."""
        check_is_fitted(self, "coef_")
        A = check_matrix(A, f"{type(self).__name__}.predict A", self.n_features_in_)
        out = np.empty((A.shape[0], self.n_features_out_))
        for part in row_chunks(A.shape[0]):
            out[part] = A[part] @ self.coef_ + self.intercept_
        return out

    def row_errors(self, A: Any, B: Any, rows: np.ndarray | None = None) -> np.ndarray:
        """l2 error ``||f(a_i) - b_i||`` of each row (of ``rows``, or all), chunked."""
        check_is_fitted(self, "coef_")
        A, B = check_embedding_pair(A, B)
        if (A.shape[1], B.shape[1]) != self.coef_.shape:
            raise ValueError(
                f"{type(self).__name__}: fitted for {self.coef_.shape[0]} -> {self.coef_.shape[1]} "
                f"dimensions, got A with {A.shape[1]} and B with {B.shape[1]}"
            )
        sel: np.ndarray | int = A.shape[0] if rows is None else np.asarray(rows)
        out = np.empty(sel if isinstance(sel, int) else sel.size)
        start = 0
        for part in row_chunks(sel):
            diff = A[part] @ self.coef_ + self.intercept_ - B[part]
            stop = start + diff.shape[0]
            out[start:stop] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
            start = stop
        return out


def _signed_assignment(
    score: np.ndarray, signed: np.ndarray, maximize: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hungarian assignment on ``score``; signs from ``signed`` at the matched entries (0 -> +1)."""
    rows, cols = linear_sum_assignment(score, maximize=maximize)
    signs = np.where(signed[rows, cols] < 0, -1.0, 1.0)
    return rows, cols, signs


class PermutationMap(AffineMap):
    """A signed matching of A's dimensions to B's (no scaling), plus an intercept.

    ``match="correlation"``: Hungarian on the absolute Pearson correlation of training
    dimensions (maximized; a constant dimension has correlation 0). ``match="least_squares"``:
    Hungarian on the cost ``||a_i||^2 - 2 |a_i . b_j|`` of centered training columns, which
    gives the signed (partial) permutation with the least training squared error. min(Da, Db)
    pairs are matched; B dimensions left unmatched are predicted by their training mean.
    Attributes: ``a_dims_``, ``b_dims_`` (matched pairs), ``signs_``, ``unmatched_b_``.
    """

    def __init__(self, match: str = "correlation") -> None:
        self.match = match

    def fit(self, A: Any, B: Any) -> "PermutationMap":
        """Match dimensions on training rows ``A``, ``B``."""
        return self.fit_cross(CrossProducts.of(*check_embedding_pair(A, B)))

    def fit_cross(self, cross: CrossProducts) -> "PermutationMap":
        """Match dimensions from the training cross-products."""
        if self.match not in PERMUTATION_MATCHES:
            raise ValueError(f"PermutationMap: match must be one of {PERMUTATION_MATCHES}, got {self.match!r}")
        if self.match == "correlation":
            sd_a, sd_b = np.sqrt(np.diag(cross.aa)), np.sqrt(np.diag(cross.bb))
            denom = np.outer(sd_a, sd_b)
            corr = np.divide(cross.ab, denom, out=np.zeros_like(cross.ab), where=denom > 0)
            rows, cols, signs = _signed_assignment(np.abs(corr), corr, maximize=True)
        else:
            cost = np.diag(cross.aa)[:, None] - 2.0 * np.abs(cross.ab)
            rows, cols, signs = _signed_assignment(cost, cross.ab, maximize=False)
        coef = np.zeros_like(cross.ab)
        coef[rows, cols] = signs
        self.a_dims_, self.b_dims_, self.signs_ = rows, cols, signs
        self.unmatched_b_ = np.setdiff1d(np.arange(cross.ab.shape[1]), cols)
        self._finish(coef, cross)
        return self


class RigidMap(AffineMap):
    """Orthogonal Procrustes after centering: ``f(a) = c (a - mean_a) R + mean_b``.

    ``R`` (Da x Db) is (semi-)orthogonal: ``U V^T`` of the thin SVD of ``A_c^T B_c``, the
    least-squares optimum when Da <= Db. When Da > Db the least-squares problem over matrices
    with orthonormal columns has no closed form; the solution is refined by majorization
    (``R <- polar(A_c^T B_c + c (alpha I - A_c^T A_c) R)``, alpha the largest eigenvalue of
    ``A_c^T A_c``; each step never increases the training error), started from the better of
    the SVD solution and the least-squares signed permutation, for at most ``max_iter`` steps
    or until the decrease falls below ``tol`` times ``||B_c||^2``. ``scale=True`` fits one
    isotropic factor ``c >= 0`` by least squares (alternating with ``R`` when Da > Db);
    otherwise ``c = 1``. Attributes: ``rotation_``, ``scale_``, ``n_iter_``, ``converged_``.
    """

    def __init__(self, scale: bool = False, max_iter: int = 500, tol: float = 1e-12) -> None:
        self.scale = scale
        self.max_iter = max_iter
        self.tol = tol

    @staticmethod
    def _objective(R: np.ndarray, c: float, cross: CrossProducts) -> float:
        """Training squared error minus ``||B_c||^2``: ``c^2 tr(R^T M R) - 2 c tr(R^T C)``."""
        return float(c * c * np.einsum("ij,ij->", R, cross.aa @ R) - 2.0 * c * np.einsum("ij,ij->", R, cross.ab))

    def _best_scale(self, R: np.ndarray, cross: CrossProducts) -> float:
        """The least-squares isotropic scale for ``R`` (>= 0), or 1 when scaling is off."""
        if not self.scale:
            return 1.0
        denom = float(np.einsum("ij,ij->", R, cross.aa @ R))
        return max(float(np.einsum("ij,ij->", R, cross.ab)) / denom, 0.0) if denom > 0 else 1.0

    def fit(self, A: Any, B: Any) -> "RigidMap":
        """Fit on training rows ``A``, ``B``."""
        return self.fit_cross(CrossProducts.of(*check_embedding_pair(A, B)))

    def fit_cross(self, cross: CrossProducts) -> "RigidMap":
        """Fit from the training cross-products."""
        if self.max_iter < 0 or self.tol < 0:
            raise ValueError(f"RigidMap: max_iter and tol must be >= 0, got {self.max_iter}, {self.tol}")
        R = _polar(cross.ab)
        c = self._best_scale(R, cross)
        self.n_iter_, self.converged_ = 0, True
        if cross.ab.shape[0] > cross.ab.shape[1]:
            R, c = self._refine(R, c, cross)
        self.rotation_, self.scale_ = R, c
        self._finish(c * R, cross)
        return self

    def _refine(self, R: np.ndarray, c: float, cross: CrossProducts) -> tuple[np.ndarray, float]:
        """Majorization for Da > Db, from the better of ``R`` and the least-squares signed permutation."""
        P = PermutationMap("least_squares").fit_cross(cross).coef_
        cp = self._best_scale(P, cross)
        f = self._objective(R, c, cross)
        if self._objective(P, cp, cross) < f:
            R, c, f = P, cp, self._objective(P, cp, cross)
        alpha = float(linalg.eigvalsh(cross.aa, subset_by_index=[cross.aa.shape[0] - 1, cross.aa.shape[0] - 1])[0])
        total = max(float(np.trace(cross.bb)), np.finfo(float).tiny)
        self.converged_ = False
        for it in range(1, self.max_iter + 1):
            R_new = _polar(cross.ab + c * (alpha * R - cross.aa @ R))
            c_new = self._best_scale(R_new, cross)
            f_new = self._objective(R_new, c_new, cross)
            self.n_iter_ = it
            if f_new > f:  # rounding only: majorization cannot increase the objective
                self.converged_ = True
                break
            R, c, decrease, f = R_new, c_new, f - f_new, f_new
            if decrease <= self.tol * total:
                self.converged_ = True
                break
        if not self.converged_:
            LOG.info(
                "rigid map (Da > Db): majorization stopped after %d steps before reaching tol %g",
                self.max_iter,
                self.tol,
            )
        return R, c


class LinearMap(AffineMap):
    """Least squares with intercept: ``W = argmin ||A_c W - B_c||^2 + ridge ||W||^2``.

    Solved in float64 from the training cross-products (``scipy.linalg.lstsq`` on the normal
    equations, which returns the minimum-norm solution if ``A_c^T A_c`` is singular). Equal to
    scikit-learn's ``LinearRegression`` (ridge 0) and ``Ridge(alpha=ridge)`` up to rounding.
    """

    def __init__(self, ridge: float = 0.0) -> None:
        self.ridge = ridge

    def fit(self, A: Any, B: Any) -> "LinearMap":
        """Fit on training rows ``A``, ``B``."""
        return self.fit_cross(CrossProducts.of(*check_embedding_pair(A, B)))

    def fit_cross(self, cross: CrossProducts) -> "LinearMap":
        """Fit from the training cross-products."""
        if not (self.ridge >= 0 and math.isfinite(self.ridge)):
            raise ValueError(f"LinearMap: ridge must be a finite number >= 0, got {self.ridge}")
        gram = cross.aa + self.ridge * np.eye(cross.aa.shape[0])
        coef, *_ = linalg.lstsq(gram, cross.ab)
        self._finish(coef, cross)
        return self


def _numerical_rank(scatter: np.ndarray) -> int:
    """Eigenvalues of a scatter matrix above 1e-10 of the largest (at least 1)."""
    ev = linalg.eigvalsh(scatter)
    return max(1, int((ev > ev[-1] * 1e-10).sum())) if ev[-1] > 0 else 1


class ICAMap(AffineMap):
    """ICA on each model separately, then a signed permutation of sources, back in B's space.

    ``fit`` whitens A and B separately (:class:`~phenoica.transforms.PCAWhitener` with
    ``n_components``) and learns an ICA rotation on each
    (:class:`~phenoica.transforms.ICARotation`, ``method``/``max_iter``/``tol``/
    ``max_samples``) - neither sees the pairing. The pairing is used only to match the two
    source sets: Hungarian on the absolute correlation of A's and B's training sources, with
    signs. The composed map is affine: ``a -> sources_A -> signed permutation -> B's sources ->
    B's un-rotation and un-whitening (components * sqrt(eigenvalue + eps))``.

    ``n_components``: None = every component up to the numerical rank of the training data
    (at most n_train - 1), per model; an integer (capped likewise per model), a fraction of
    explained variance, or ``"parallel"`` as in :class:`~phenoica.transforms.PCAWhitener`.
    Attributes: ``whitener_a_``, ``whitener_b_``, ``rotation_a_``, ``rotation_b_``,
    ``a_sources_``, ``b_sources_``, ``signs_``, ``source_correlation_`` (|corr| of each
    matched pair), ``converged_`` (both ICA fits).
    """

    def __init__(
        self,
        n_components: int | float | str | None = None,
        method: str = "picard",
        max_iter: int = 500,
        tol: float = 1e-7,
        max_samples: int | None = None,
        eps: float = 1e-6,
        seed: int = 0,
    ) -> None:
        self.n_components = n_components
        self.method = method
        self.max_iter = max_iter
        self.tol = tol
        self.max_samples = max_samples
        self.eps = eps
        self.seed = seed

    def _components(self, X: np.ndarray, scatter: np.ndarray) -> int | float | str:
        """The whitener's ``n_components`` for one model."""
        limit = min(X.shape[0] - 1, X.shape[1])
        if self.n_components is None:
            return min(_numerical_rank(scatter), limit)
        if isinstance(self.n_components, (int, np.integer)) and not isinstance(self.n_components, bool):
            if self.n_components < 1:
                raise ValueError(f"ICAMap: n_components must be >= 1, got {self.n_components}")
            return min(int(self.n_components), limit)
        return self.n_components

    def _sources(self, X: np.ndarray, scatter: np.ndarray, which: str) -> tuple[PCAWhitener, ICARotation, np.ndarray]:
        """Whitener, ICA rotation and training sources of one model."""
        whitener = PCAWhitener(
            self._components(X, scatter), self.eps, derive_seed(self.seed, "align", f"whiten_{which}")
        ).fit(X)
        Z = whitener.transform(X)
        rotation = ICARotation(
            self.method, self.max_iter, self.tol, derive_seed(self.seed, "align", f"ica_{which}"), self.max_samples
        ).fit(Z)
        return whitener, rotation, np.asarray(rotation.transform(Z), dtype=np.float64)

    def fit(self, A: Any, B: Any, cross: CrossProducts | None = None) -> "ICAMap":
        """Fit ICA on training rows of each model separately, then match sources.

        ``cross``: the cross-products of these rows, if already computed (saves a pass).
        """
        A, B = check_embedding_pair(A, B)
        if A.shape[0] < 3:
            raise ValueError(f"ICAMap: needs at least 3 training rows, got {A.shape[0]}")
        if cross is None:
            cross = CrossProducts.of(A, B)
        elif cross.n != A.shape[0] or cross.ab.shape != (A.shape[1], B.shape[1]):
            raise ValueError(
                f"ICAMap: cross-products of {cross.n} rows x {cross.ab.shape} do not match A {A.shape} and B {B.shape}"
            )
        wa, ra, Sa = self._sources(A, cross.aa, "a")
        wb, rb, Sb = self._sources(B, cross.bb, "b")
        ka, kb = Sa.shape[1], Sb.shape[1]
        sa, sb = Sa - Sa.mean(axis=0), Sb - Sb.mean(axis=0)
        denom = np.outer(np.linalg.norm(sa, axis=0), np.linalg.norm(sb, axis=0))
        corr = np.divide(sa.T @ sb, denom, out=np.zeros((ka, kb)), where=denom > 0)
        rows, cols, signs = _signed_assignment(np.abs(corr), corr, maximize=True)
        P = np.zeros((ka, kb))
        P[rows, cols] = signs
        unwhiten_b = wb.components_ * np.sqrt(wb.explained_variance_ + wb.eps)[:, None]
        coef = wa.whitening_.T @ ra.rotation_.T @ P @ rb.rotation_ @ unwhiten_b
        self.whitener_a_, self.whitener_b_, self.rotation_a_, self.rotation_b_ = wa, wb, ra, rb
        self.a_sources_, self.b_sources_, self.signs_ = rows, cols, signs
        self.source_correlation_ = np.abs(corr[rows, cols])
        self.converged_ = bool(ra.converged_ and rb.converged_)
        self.coef_ = coef
        # Sources have mean 0 over the training rows, so the map sends mean_a to B's whitening mean.
        self.intercept_ = wb.mean_ - wa.mean_ @ coef
        self.n_features_in_, self.n_features_out_ = coef.shape
        return self
