"""The numerical solvers the rotations' fits call from other libraries: ICA unmixing (python-picard's
Picard-O, scikit-learn's FastICA) and the seeded Haar-random rotation (scipy's ``ortho_group``).

The one module of the variants that imports picard, scikit-learn and ``scipy.stats``: the rotations
(:mod:`phenoica.transforms._rotations`) import it inside their fits, so loading and applying a saved
transform never loads these libraries.
"""

from __future__ import annotations

import warnings

import numpy as np
from picard import picard
from scipy.stats import ortho_group
from sklearn.decomposition import FastICA
from sklearn.exceptions import ConvergenceWarning


def ica_unmixing(
    Z: np.ndarray, method: str, max_iter: int, tol: float, seed: int
) -> tuple[np.ndarray, int, list[warnings.WarningMessage]]:
    """(unmixing matrix, iterations, the solver's did-not-converge warnings) of ICA on whitened
    rows ``Z`` (samples x components): ``method="picard"`` is Picard-O (``ortho=True,
    extended=True``), ``"fastica"`` FastICA (parallel, logcosh, ``whiten=False``). The solver's
    other warnings are issued again as they were."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if method == "picard":
            _, W, _, n_iter = picard(
                np.ascontiguousarray(Z.T, dtype=np.float64),
                ortho=True,
                extended=True,
                whiten=False,
                centering=True,
                max_iter=max_iter,
                tol=tol,
                random_state=seed,
                return_n_iter=True,
            )
            failed = [w for w in caught if "did not converge" in str(w.message)]
        else:
            ica = FastICA(
                whiten=False,
                algorithm="parallel",
                fun="logcosh",
                max_iter=max_iter,
                tol=tol,
                random_state=seed,
            ).fit(Z.astype(np.float64))
            W, n_iter = ica.components_, ica.n_iter_
            failed = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    for w in caught:
        if w not in failed:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return np.asarray(W, dtype=np.float64), int(n_iter), failed


def haar_rotation(n_components: int, seed: int) -> np.ndarray:
    """The seeded Haar-random orthogonal matrix of dimension ``n_components`` (float64, 2-D)."""
    return np.atleast_2d(ortho_group.rvs(n_components, random_state=seed)).astype(np.float64)
