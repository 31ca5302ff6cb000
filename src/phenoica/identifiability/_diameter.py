"""The diameter of a latent set: exact up to a size, else a certified lower-bound estimate."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from phenoica.contract import check_matrix
from phenoica.utils import row_chunks

DIAMETER_METHODS: tuple[str, ...] = ("auto", "exact", "estimate")

LOG = logging.getLogger(__name__)


#: Up to this many rows ``diameter="auto"`` computes the exact diameter (O(N^2 D) BLAS work).
EXACT_DIAMETER_MAX_ROWS = 10_000


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
