"""The rotations of whitened embeddings: ICA (:class:`ICARotation`, Picard-O or FastICA) and a
seeded Haar-random rotation (:class:`RandomRotation`, the "any rotation" control).

Both are fitted on rows in memory: :class:`ICARotation` on a seeded subsample of at most
``max_samples`` whitened rows, :class:`RandomRotation` from the width alone. They follow the
scikit-learn idiom (:mod:`phenoica.transforms._estimator`, without scikit-learn: hyper-parameters
in ``__init__``, learned attributes end in ``_``, ``transform`` never refits). Their fits call
the solvers of :mod:`phenoica.transforms._solvers` (picard, scikit-learn, ``scipy.stats``),
imported by the fit itself: a saved rotation is applied with numpy alone.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from scipy import linalg

from phenoica.contract import check_matrix
from phenoica.transforms._accumulators import RowSample
from phenoica.transforms._estimator import Transformer, check_fitted
from phenoica.utils import centered_chunks, out_dtype

LOG = logging.getLogger(__name__)


ICA_METHODS = ("picard", "fastica")


# --------------------------------------------------------------------------- rotations


def nearest_orthogonal(W: np.ndarray) -> np.ndarray:
    """The orthogonal matrix closest to ``W`` in Frobenius norm (polar factor, via SVD)."""
    U, _, Vt = linalg.svd(W)
    return U @ Vt


class _Rotation(Transformer):
    """Shared transform of the orthogonal rotations: ``Z @ rotation_.T``."""

    def transform(self, Z: Any) -> np.ndarray:
        """Rotate whitened rows (never refits)."""
        check_fitted(self, "rotation_")
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
        from phenoica.transforms._solvers import ica_unmixing  # picard and scikit-learn: a fit's only

        W, n_iter, failed = ica_unmixing(Z, self.method, self.max_iter, self.tol, self.seed)
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
        from phenoica.transforms._solvers import haar_rotation  # scipy.stats: a fit's only

        self.rotation_ = haar_rotation(int(n_components), self.seed)
        self.n_features_in_ = int(n_components)
        return self
