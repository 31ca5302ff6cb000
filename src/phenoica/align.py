"""Model-to-model alignment: statistical identifiability between two embeddings (Nelson et al. 2026 Table 1).

Two models embed the same N images: ``A`` (N x Da) and ``B`` (N x Db); the dimensions may
differ. A map A -> B is estimated on a seeded training split of the images and scored on the
held-out images as

    error = mean over held-out rows i of ||f(a_i) - b_i||_2  /  diameter(B)

Every map is affine, ``f(a) = a @ coef_ + intercept_``, fitted on the training rows, with the
intercept chosen so that the map sends A's training mean to B's training mean:

- ``permutation`` (:class:`PermutationMap`): a signed matching of dimensions. The matching is
  the Hungarian assignment (scipy ``linear_sum_assignment``) on the absolute correlation of
  A's and B's training dimensions (``match="correlation"``, the default) or on the
  least-squares cost (``match="least_squares"``, the least-squares optimum of the class). No
  per-dimension scaling. When Da != Db, min(Da, Db) dimensions are matched; a B dimension left
  unmatched (Da < Db) is predicted by its training mean, an unmatched A dimension is unused.
- ``rigid`` (:class:`RigidMap`): orthogonal Procrustes after centering, ``R = U V^T`` from the
  thin SVD ``A_c^T B_c = U S V^T`` (as scipy ``orthogonal_procrustes`` does in the square
  case). For Da != Db, ``R`` is semi-orthogonal (Da x Db, rank min(Da, Db)): for Da <= Db it
  embeds A isometrically into B's space and the SVD solution is the least-squares optimum; for
  Da > Db (orthonormal columns: a projection then a rotation) the SVD solution is not the
  least-squares optimum, so it is refined by majorization (Kiers 1990), started from the better
  of the SVD solution and the least-squares signed permutation, which never increases the
  training error. ``scale=True`` adds one isotropic scale factor (least squares).
- ``linear`` (:class:`LinearMap`): least squares with intercept; ``ridge > 0`` adds
  ``ridge * ||W||_F^2`` (scikit-learn's ``Ridge(alpha=ridge)`` convention). Solved from the
  training cross-products in float64 (one pass over the data).
- ``ica`` (:class:`ICAMap`): ICA is fitted on A and on B separately, without the pairing
  (:class:`phenoica.variants.PCAWhitener` + :class:`phenoica.variants.ICARotation`);
  then only a signed permutation, matched on the training split by the absolute correlation
  of the two source sets, maps A's sources to B's sources, and the error is measured back in
  B's space through the inverse of B's ICA rotation and whitening. If B's whitening keeps
  k_B < Db components, the prediction lies in B's top-k_B principal subspace: the best that
  B's kept components can reconstruct, so the discarded variance counts as error. (Fewer
  components also drop A's noise directions, so on noisy data ICA can then beat the rigid
  map and its efficiency exceed 1.) Unmatched B sources (k_A < k_B) are predicted by their
  training mean, 0.

``ICA efficiency = (perm - ica) / (perm - rigid)``: the share of the permutation-to-rigid gap
that unsupervised ICA closes (NaN when perm == rigid).

Choices this module makes (the paper does not state them):

- The diameter is that of ALL of B's rows, not only the held-out ones: a property of model B,
  the same for every map and every training split. Exact (max pairwise distance) up to
  :data:`EXACT_DIAMETER_MAX_ROWS` rows, otherwise :func:`diameter_estimate`, a lower bound
  (a realized pairwise distance) within a few percent in our tests. A lower-bound diameter
  scales every error of a pair by the same factor, so ICA efficiency is unaffected.
- The training-split RMS errors ``rms_train_*`` are sqrt(mean over training rows of the
  squared l2 error) / diameter for the least-squares optimum of each nested class: the
  least-squares signed permutation (whatever ``permutation_match`` is), the fitted rigid map
  (exact optimum for Da <= Db; for Da > Db a majorized refinement that starts no worse than
  the permutation), and least squares with ridge 0. So ``linear <= rigid <= permutation``
  holds exactly (up to float rounding) on every input; on held-out data with the mean l2
  score that ordering is expected but not guaranteed.
- CKA and mutual kNN are symmetric similarities, not fitted maps: both use all rows; mutual
  kNN on a seeded subsample of at most ``knn_max_samples`` rows (neighbours found within the
  subsample) because it costs O(N^2).
- The same ``seed`` gives the same image split for every pair of models with the same N.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import linalg
from scipy.optimize import linear_sum_assignment
from sklearn.base import BaseEstimator
from sklearn.neighbors import NearestNeighbors
from sklearn.utils.validation import check_is_fitted

from phenoica.arrays import check_matrix, row_chunks
from phenoica.seeding import derive_seed
from phenoica.variants import ICARotation, PCAWhitener

LOG = logging.getLogger(__name__)

MAPS: tuple[str, ...] = ("permutation", "rigid", "linear", "ica")
PERMUTATION_MATCHES: tuple[str, ...] = ("correlation", "least_squares")
DIAMETER_METHODS: tuple[str, ...] = ("auto", "exact", "estimate")
#: Up to this many rows ``diameter="auto"`` computes the exact diameter (O(N^2 D) BLAS work).
EXACT_DIAMETER_MAX_ROWS = 10_000
#: Columns of :func:`alignment_table`, in order (Table 1 first, then supporting numbers).
TABLE_COLUMNS: tuple[str, ...] = (
    "model_a",
    "model_b",
    "perm",
    "rigid",
    "linear",
    "ica",
    "ica_efficiency",
    "cka",
    "mutual_knn",
    "n_train",
    "n_test",
    "diameter",
    "rms_train_permutation",
    "rms_train_rigid",
    "rms_train_linear",
    "ica_converged",
)


# --------------------------------------------------------------------------- helpers


def _check_pair(A: Any, B: Any) -> tuple[np.ndarray, np.ndarray]:
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


# --------------------------------------------------------------------------- cross-products


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


# --------------------------------------------------------------------------- maps


class _AffineMap(BaseEstimator):
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
        A, B = _check_pair(A, B)
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


class PermutationMap(_AffineMap):
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
        return self.fit_cross(CrossProducts.of(*_check_pair(A, B)))

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


class RigidMap(_AffineMap):
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
        return self.fit_cross(CrossProducts.of(*_check_pair(A, B)))

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


class LinearMap(_AffineMap):
    """Least squares with intercept: ``W = argmin ||A_c W - B_c||^2 + ridge ||W||^2``.

    Solved in float64 from the training cross-products (``scipy.linalg.lstsq`` on the normal
    equations, which returns the minimum-norm solution if ``A_c^T A_c`` is singular). Equal to
    scikit-learn's ``LinearRegression`` (ridge 0) and ``Ridge(alpha=ridge)`` up to rounding.
    """

    def __init__(self, ridge: float = 0.0) -> None:
        self.ridge = ridge

    def fit(self, A: Any, B: Any) -> "LinearMap":
        """Fit on training rows ``A``, ``B``."""
        return self.fit_cross(CrossProducts.of(*_check_pair(A, B)))

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


class ICAMap(_AffineMap):
    """ICA on each model separately, then a signed permutation of sources, back in B's space.

    ``fit`` whitens A and B separately (:class:`~phenoica.variants.PCAWhitener` with
    ``n_components``) and learns an ICA rotation on each
    (:class:`~phenoica.variants.ICARotation`, ``method``/``max_iter``/``tol``/
    ``max_samples``) - neither sees the pairing. The pairing is used only to match the two
    source sets: Hungarian on the absolute correlation of A's and B's training sources, with
    signs. The composed map is affine: ``a -> sources_A -> signed permutation -> B's sources ->
    B's un-rotation and un-whitening (components * sqrt(eigenvalue + eps))``.

    ``n_components``: None = every component up to the numerical rank of the training data
    (at most n_train - 1), per model; an integer (capped likewise per model), a fraction of
    explained variance, or ``"parallel"`` as in :class:`~phenoica.variants.PCAWhitener`.
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
        A, B = _check_pair(A, B)
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


# --------------------------------------------------------------------------- similarity measures


def _cka(cross: CrossProducts) -> float:
    """Linear CKA from centered scatters: ``||A^T B||_F^2 / (||A^T A||_F ||B^T B||_F)``."""
    denom = float(np.linalg.norm(cross.aa) * np.linalg.norm(cross.bb))
    if denom <= 0:
        raise ValueError("linear CKA is undefined: A or B is constant over the rows given")
    return float(np.sum(cross.ab * cross.ab) / denom)


def linear_cka(A: Any, B: Any) -> float:
    """Linear centered kernel alignment of two embeddings of the same rows (Kornblith et al. 2019).

    Invariant to orthogonal transforms and isotropic scaling of either side; 1 for identical
    inputs; for one dimension each it is the squared Pearson correlation.
    """
    A, B = _check_pair(A, B)
    if A.shape[0] < 2:
        raise ValueError(f"linear CKA needs at least 2 rows, got {A.shape[0]}")
    return _cka(CrossProducts.of(A, B))


def mutual_knn(A: Any, B: Any, k: int = 10) -> float:
    """Mean overlap of each row's k nearest neighbours in A and in B (Euclidean; self excluded).

    ``mean_i |N_A(i) & N_B(i)| / k``, in [0, 1]; 1 for identical inputs. Exact neighbours
    (scikit-learn ``NearestNeighbors``), O(N^2 D): subsample large inputs first.
    """
    A, B = _check_pair(A, B)
    n = A.shape[0]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n - 1:
        raise ValueError(f"mutual_knn: k must be an integer in [1, n_rows - 1] = [1, {n - 1}], got {k!r}")
    na = NearestNeighbors(n_neighbors=k).fit(A).kneighbors(return_distance=False)
    nb = NearestNeighbors(n_neighbors=k).fit(B).kneighbors(return_distance=False)
    both = np.sort(np.concatenate([na, nb], axis=1), axis=1)
    shared = (np.diff(both, axis=1) == 0).sum(axis=1)
    return float(shared.mean() / k)


# --------------------------------------------------------------------------- diameter


def _exact_pair(X: np.ndarray, block_rows: int = 2048) -> tuple[int, int, float]:
    """(i, j, distance) of the farthest pair of rows: blockwise Gram distances, the winner recomputed."""
    n = X.shape[0]
    if n < 2:
        return 0, 0, 0.0
    mean = X.mean(axis=0, dtype=np.float64)
    best, pair = -np.inf, (0, 0)
    for i0 in range(0, n, block_rows):
        Xi = X[i0 : i0 + block_rows] - mean
        ni = np.einsum("ij,ij->i", Xi, Xi)
        for j0 in range(i0, n, block_rows):
            Xj = Xi if j0 == i0 else X[j0 : j0 + block_rows] - mean
            nj = ni if j0 == i0 else np.einsum("ij,ij->i", Xj, Xj)
            d2 = ni[:, None] + nj[None, :] - 2.0 * (Xi @ Xj.T)
            flat = int(np.argmax(d2))
            if d2.flat[flat] > best:
                best = float(d2.flat[flat])
                pair = (i0 + flat // d2.shape[1], j0 + flat % d2.shape[1])
    i, j = pair
    return i, j, float(np.linalg.norm(np.asarray(X[i], dtype=np.float64) - X[j]))


def diameter_exact(X: Any, block_rows: int = 2048) -> float:
    """The largest Euclidean distance between two rows of ``X`` (exact up to float64 rounding).

    Blocks of the pairwise distance matrix from Gram products (BLAS), O(N^2 D) time and
    O(block_rows^2) memory; the distance of the winning pair is recomputed directly. 0 for one row.
    """
    X = check_matrix(X, "diameter X")
    return _exact_pair(X, block_rows)[2]


def _distances_from(X: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Euclidean distance of every row of ``X`` to the point ``x``, chunked."""
    out = np.empty(X.shape[0])
    x = np.asarray(x, dtype=np.float64)
    for part in row_chunks(X.shape[0]):
        diff = X[part] - x
        out[part] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    return out


def diameter_estimate(
    X: Any,
    *,
    n_candidates: int = 2000,
    n_extreme: int = 200,
    n_directions: int = 64,
    max_sweeps: int = 20,
    exact_rows: int = EXACT_DIAMETER_MAX_ROWS,
    seed: int = 0,
) -> float:
    """A lower bound of the diameter of ``X`` that is nearly tight in practice, in a few O(N D) passes.

    1. Candidates (``n_candidates`` rows in all): the ``n_extreme`` rows farthest from the mean
       (where diameters end), the lowest and highest row along each of ``n_directions`` seeded
       random directions (vertices of the convex hull), and a seeded random sample of the rest;
       their exact farthest pair.
    2. Farthest-point sweeps: from each end of the current pair, the farthest row of all of
       ``X``; a longer pair replaces it, until no end improves (or ``max_sweeps``).
    3. Certificate: a pair longer than the current best ``d`` needs both ends at radius
       ``r > d - r_max`` from the mean (triangle inequality). If at most ``exact_rows`` rows
       pass, their exact farthest pair makes the result exact (typical in low effective
       dimension; in high dimension distances concentrate and nearly every row passes).

    The result is the distance of a real pair of rows, so it never exceeds the exact diameter;
    a single sweep already guarantees at least half of it. Measured on 3,000 rows in 12-D with
    150 candidates (Gaussian, uniform, Laplace, Student-t, anisotropic, clustered): within a few
    percent of exact (tests/test_align.py). With at most ``n_candidates`` rows it is exact.
    """
    X = check_matrix(X, "diameter X")
    if n_candidates < 2 or min(n_extreme, n_directions, max_sweeps, exact_rows) < 0:
        raise ValueError(
            f"diameter_estimate: need n_candidates >= 2 and n_extreme, n_directions, max_sweeps, "
            f"exact_rows >= 0; got {n_candidates}, {n_extreme}, {n_directions}, {max_sweeps}, {exact_rows}"
        )
    n = X.shape[0]
    if n <= n_candidates:
        return _exact_pair(X)[2]
    rng = np.random.default_rng(seed)
    mean = X.mean(axis=0, dtype=np.float64)
    radius = _distances_from(X, mean)
    picked = [np.argpartition(radius, n - n_extreme)[n - n_extreme :]] if n_extreme else []
    if n_directions:
        U = rng.standard_normal((X.shape[1], n_directions))
        lo, hi = np.full(n_directions, np.inf), np.full(n_directions, -np.inf)
        arg_lo, arg_hi = np.zeros(n_directions, dtype=np.int64), np.zeros(n_directions, dtype=np.int64)
        for part in row_chunks(n):
            proj = (X[part] - mean) @ U
            offset = part.start
            i_lo, i_hi = proj.argmin(axis=0), proj.argmax(axis=0)
            v_lo, v_hi = proj[i_lo, np.arange(n_directions)], proj[i_hi, np.arange(n_directions)]
            better_lo, better_hi = v_lo < lo, v_hi > hi
            lo[better_lo], arg_lo[better_lo] = v_lo[better_lo], offset + i_lo[better_lo]
            hi[better_hi], arg_hi[better_hi] = v_hi[better_hi], offset + i_hi[better_hi]
        picked += [arg_lo, arg_hi]
    chosen = np.unique(np.concatenate(picked)) if picked else np.empty(0, dtype=np.int64)
    chosen = chosen[:n_candidates]
    rest = np.setdiff1d(np.arange(n), chosen)
    candidates = np.concatenate([chosen, rng.choice(rest, size=n_candidates - chosen.size, replace=False)])
    ci, cj, best = _exact_pair(np.asarray(X[candidates]))
    ends = [int(candidates[ci]), int(candidates[cj])]
    for _ in range(max_sweeps):
        improved = False
        for end in tuple(ends):
            dist = _distances_from(X, X[end])
            far = int(np.argmax(dist))
            if dist[far] > best:
                best, ends, improved = float(dist[far]), [end, far], True
                break
        if not improved:
            break
    r_max = float(radius.max())
    inside = np.flatnonzero(radius > best - r_max - 1e-9 * r_max)
    if 2 <= inside.size <= exact_rows:
        best = max(best, _exact_pair(np.asarray(X[inside]))[2])
        LOG.debug("diameter: exact over the %d rows that can end a longer pair", inside.size)
    return best


def latent_diameter(X: Any, method: str = "auto", seed: int = 0) -> float:
    """Diameter of a latent set: ``"exact"``, ``"estimate"``, or ``"auto"`` (exact up to
    :data:`EXACT_DIAMETER_MAX_ROWS` rows, else :func:`diameter_estimate`)."""
    if method not in DIAMETER_METHODS:
        raise ValueError(f"diameter: expected a positive number or one of {DIAMETER_METHODS}, got {method!r}")
    X = check_matrix(X, "diameter X")
    if method == "exact" or (method == "auto" and X.shape[0] <= EXACT_DIAMETER_MAX_ROWS):
        return _exact_pair(X)[2]
    return diameter_estimate(X, seed=seed)


# --------------------------------------------------------------------------- alignment


def _check_maps(maps: Sequence[str]) -> list[str]:
    """Known, unique map names, in the given order."""
    maps = [maps] if isinstance(maps, str) else list(maps)
    unknown = [m for m in maps if m not in MAPS]
    if unknown or not maps or len(set(maps)) != len(maps):
        raise ValueError(f"maps: expected distinct names among {MAPS}, got {maps}")
    return maps


def split_rows(n: int, train_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of ``range(n)`` into sorted training and held-out row indices.

    ``round(train_fraction * n)`` training rows; at least 3 training and 2 held-out rows are
    required (an error says how many the fraction gives).
    """
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    n_train = int(round(train_fraction * n))
    if n_train < 3 or n - n_train < 2:
        raise ValueError(
            f"{n} images with train_fraction={train_fraction} give {n_train} training and {n - n_train} "
            f"held-out rows; alignment needs at least 3 training and 2 held-out rows"
        )
    order = np.random.default_rng(derive_seed(seed, "align", "split")).permutation(n)
    return np.sort(order[:n_train]), np.sort(order[n_train:])


def _resolve_diameter(B: np.ndarray, diameter: str | float, seed: int) -> float:
    """A given positive number, or the diameter of all of B by ``diameter`` method."""
    if isinstance(diameter, str):
        value = latent_diameter(B, diameter, derive_seed(seed, "align", "diameter"))
    elif isinstance(diameter, (int, float, np.number)) and not isinstance(diameter, bool):
        value = float(diameter)
    else:
        raise ValueError(f"diameter: expected a positive number or one of {DIAMETER_METHODS}, got {diameter!r}")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"diameter of B must be a positive finite number, got {value} (are all of B's rows equal?)")
    return value


def align_errors(
    A: Any,
    B: Any,
    *,
    train_fraction: float = 0.8,
    seed: int = 0,
    maps: Sequence[str] = MAPS,
    ica_method: str = "picard",
    n_components: int | float | str | None = None,
    ridge: float = 0.0,
    scale: bool = False,
    knn_k: int | None = 10,
    diameter: str | float = "auto",
    permutation_match: str = "correlation",
    ica_max_iter: int = 500,
    ica_tol: float = 1e-7,
    ica_max_samples: int | None = None,
    knn_max_samples: int | None = 5000,
) -> dict[str, Any]:
    """Table-1 alignment errors of model A's embeddings to model B's (same images, row for row).

    Maps in ``maps`` are fitted on a seeded ``train_fraction`` of the rows and scored on the
    rest as mean l2 error / diameter of all of B (see the module docstring for every choice).
    ``ridge`` applies to the linear map, ``scale`` to the rigid map, ``permutation_match`` to
    the permutation map; ``n_components``, ``ica_method``, ``ica_max_iter``, ``ica_tol`` and
    ``ica_max_samples`` to the ICA map. ``diameter``: "auto", "exact", "estimate", or a number
    (e.g. computed once per model). ``knn_k=None`` skips mutual kNN.

    Returns a dict: ``permutation``, ``rigid``, ``linear``, ``ica`` (held-out errors; NaN for
    maps not run), ``ica_efficiency``, ``cka``, ``mutual_knn``, ``diameter``, ``n_train``,
    ``n_test``, ``rms_train_permutation``, ``rms_train_rigid``, ``rms_train_linear`` (training
    RMS / diameter of each class's least-squares optimum, so linear <= rigid <= permutation),
    and ``ica_converged``, ``ica_components_a``, ``ica_components_b`` when ICA ran.
    """
    A, B = _check_pair(A, B)
    maps = _check_maps(maps)
    if permutation_match not in PERMUTATION_MATCHES:
        raise ValueError(f"permutation_match must be one of {PERMUTATION_MATCHES}, got {permutation_match!r}")
    n = A.shape[0]
    train, test = split_rows(n, train_fraction, seed)
    if train.size <= max(A.shape[1], B.shape[1]):
        LOG.warning(
            "alignment: %d training rows for %d and %d dimensions; the linear map can interpolate the training rows",
            train.size,
            A.shape[1],
            B.shape[1],
        )
    diam = _resolve_diameter(B, diameter, seed)
    cross_train = CrossProducts.of(A, B, train)
    cross_all = cross_train.pooled(CrossProducts.of(A, B, test))

    def heldout(m: _AffineMap) -> float:
        return float(m.row_errors(A, B, test).mean() / diam)

    def rms_train(m: _AffineMap) -> float:
        e = m.row_errors(A, B, train)
        return float(np.sqrt(np.mean(e * e)) / diam)

    nan = float("nan")
    out: dict[str, Any] = {m: nan for m in MAPS}
    out.update(
        ica_efficiency=nan,
        cka=nan,
        mutual_knn=nan,
        diameter=diam,
        n_train=int(train.size),
        n_test=int(test.size),
        rms_train_permutation=nan,
        rms_train_rigid=nan,
        rms_train_linear=nan,
    )
    if "permutation" in maps:
        perm = PermutationMap(permutation_match).fit_cross(cross_train)
        out["permutation"] = heldout(perm)
        if permutation_match != "least_squares":
            perm = PermutationMap("least_squares").fit_cross(cross_train)
        out["rms_train_permutation"] = rms_train(perm)
    if "rigid" in maps:
        rigid = RigidMap(scale=scale).fit_cross(cross_train)
        out["rigid"] = heldout(rigid)
        out["rms_train_rigid"] = rms_train(rigid)
    if "linear" in maps:
        linear = LinearMap(ridge).fit_cross(cross_train)
        out["linear"] = heldout(linear)
        if ridge != 0:
            linear = LinearMap(0.0).fit_cross(cross_train)
        out["rms_train_linear"] = rms_train(linear)
    if "ica" in maps:
        ica = ICAMap(
            n_components, ica_method, ica_max_iter, ica_tol, ica_max_samples, seed=derive_seed(seed, "align", "ica")
        ).fit(A[train], B[train], cross_train)
        out["ica"] = heldout(ica)
        out["ica_converged"] = ica.converged_
        out["ica_components_a"] = int(ica.whitener_a_.n_components_)
        out["ica_components_b"] = int(ica.whitener_b_.n_components_)
        gap = out["permutation"] - out["rigid"]
        if math.isfinite(gap) and gap > 1e-12:
            out["ica_efficiency"] = float((out["permutation"] - out["ica"]) / gap)
    out["cka"] = _cka(cross_all)
    if knn_k is not None:
        rows = np.arange(n)
        if knn_max_samples is not None and n > knn_max_samples:
            rows = np.sort(
                np.random.default_rng(derive_seed(seed, "align", "knn")).choice(n, knn_max_samples, replace=False)
            )
        out["mutual_knn"] = mutual_knn(A[rows], B[rows], knn_k)
    return out


def alignment_table(
    embeddings: Mapping[str, Any],
    pairs: Sequence[tuple[str, str]] | None = None,
    **kw: Any,
) -> pd.DataFrame:
    """Table 1 for several models' embeddings of the same images: one row per ORDERED pair.

    ``embeddings``: model name -> (N x D_model) array, rows the same images in the same order.
    ``pairs``: (model_a, model_b) tuples, the map going a -> b; default every ordered pair of
    distinct models (maps are directional and scored on B's diameter, so a -> b and b -> a
    differ). ``kw`` go to :func:`align_errors`; the same seed gives every pair the same split.
    Each model's diameter is computed once. Columns: :data:`TABLE_COLUMNS` (``perm`` is the
    permutation error; ``diameter`` is model_b's; ``ica_converged`` is None when ICA did not run).
    """
    names = list(embeddings)
    if pairs is None:
        if len(names) < 2:
            raise ValueError(f"alignment_table: needs at least two models, got {names}")
        pairs = list(itertools.permutations(names, 2))
    pairs = [tuple(p) for p in pairs]
    for p in pairs:
        if len(p) != 2 or any(m not in embeddings for m in p):
            raise ValueError(f"alignment_table: pair {p!r} must name two models among {names}")
    arrays = {m: check_matrix(embeddings[m], f"embeddings of model {m!r}") for m in {m for p in pairs for m in p}}
    sizes = {m: a.shape[0] for m, a in arrays.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"alignment_table: every model must embed the same images; rows per model: {sizes}")
    method = kw.pop("diameter", "auto")
    seed = kw.get("seed", 0)
    diameters: dict[str, float] = {}
    rows = []
    for a, b in pairs:
        if b not in diameters:
            diameters[b] = _resolve_diameter(arrays[b], method, seed)
        LOG.info("alignment %s -> %s", a, b)
        res = align_errors(arrays[a], arrays[b], diameter=diameters[b], **kw)
        rows.append(
            {"model_a": a, "model_b": b, "perm": res["permutation"], **{k: res.get(k) for k in TABLE_COLUMNS[3:]}}
        )
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
