"""The held-out distance of a guide from the controls, in control SDs: an effect size that does not saturate.

A classifier's held-out AUROC stops at 1.0 once a guide's held-out rows all rank above the
controls', so a strong phenotype and a very strong one score the same. The distance keeps going: per
(guide, fold), the guide's direction from the controls is learnt on the fold's training rows alone
(the difference of the guide's mean from the training controls' mean, each feature in SDs of the
training controls: the diagonal linear discriminant), and the fold's held-out rows are projected on
it. The distance is the held-out guide rows' mean minus the held-out controls' mean along that
direction, in SDs of the held-out controls along it:

    d = (mean(s(guide, held out)) - mean(s(controls, held out))) / sd(s(controls, held out)),
    s(x) = ((x - m) / sd) . u,  u = unit vector of (mean(guide, train) - m) / sd

with ``m``, ``sd`` the training controls' per-feature mean and SD. The held-out rows never choose
the direction, so a guide like the controls (a pseudo-guide) scores about 0 whatever the number
of features, and a guide shifted by k control SDs scores about k times the cosine between the
learnt and the true direction (growing with the shift, never capped). The held-out controls are the
fold's own (under leave-one-batch-out: the held-out batch's), so a batch offset along the direction
is taken out with them. Rows are what the table holds (images or wells): the SD is that of a row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: The held-out distance and its 95% interval, as the guide and gene summaries and the hit table
#: carry them (:mod:`phenoica.hits._effects` computes them from the score table).
DISTANCE_COLUMNS: tuple[str, ...] = ("distance_sd", "distance_sd_low", "distance_sd_high")


@dataclass(frozen=True)
class ControlMoments:
    """The count, per-feature sum and sum of squares of a set of control rows (float64), so that a
    few rows can be taken out again exactly (a pseudo-guide's own wells leave its controls)."""

    n: int
    total: np.ndarray
    total_sq: np.ndarray

    @classmethod
    def of(cls, X: np.ndarray) -> ControlMoments:
        """The moments of the rows of ``X``."""
        X = np.asarray(X, dtype=np.float64)
        return cls(len(X), X.sum(axis=0), np.square(X).sum(axis=0))

    def without(self, X: np.ndarray) -> ControlMoments:
        """These moments with the rows ``X`` (rows of the same set) taken out."""
        if not len(X):
            return self
        X = np.asarray(X, dtype=np.float64)
        return ControlMoments(self.n - len(X), self.total - X.sum(axis=0), self.total_sq - np.square(X).sum(axis=0))

    def mean_sd(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-feature mean and SD (ddof 1; 0 where fewer than 2 rows or no spread)."""
        if self.n < 1:
            nan = np.full(self.total.shape, math.nan)
            return nan, np.zeros(self.total.shape)
        mean = self.total / self.n
        if self.n < 2:
            return mean, np.zeros_like(mean)
        var = (self.total_sq - self.n * np.square(mean)) / (self.n - 1)
        return mean, np.sqrt(np.maximum(var, 0.0))


def heldout_distance(
    controls: ControlMoments, X_train: np.ndarray, X_test: np.ndarray, X_test_controls: np.ndarray
) -> float:
    """The held-out distance (module docstring) of a guide: ``controls`` are its training controls'
    moments, ``X_train`` its training rows, ``X_test`` and ``X_test_controls`` the fold's held-out
    rows of the guide and of the controls. NaN where it is undefined: no training or held-out
    guide row, fewer than 2 held-out controls, no feature with spread among the training controls,
    a guide mean equal to the controls' mean, or held-out controls without spread along the direction."""
    return heldout_distance_se(controls, X_train, X_test, X_test_controls)[0]


def heldout_distance_se(
    controls: ControlMoments, X_train: np.ndarray, X_test: np.ndarray, X_test_controls: np.ndarray
) -> tuple[float, float]:
    """:func:`heldout_distance` and its standard error over the fold's held-out rows, taken as
    independent draws (replicate wells, on a per-well table), the direction as learnt:
    ``se^2 = (var(guide) / n_guide + var(controls) / n_controls) / sd^2 + d^2 / (2 (n_controls - 1))``
    along the direction (the last term: the held-out controls' SD, by the delta method; a guide of
    one held-out row takes the controls' variance). NaN where the distance is."""
    if not len(X_train) or not len(X_test) or len(X_test_controls) < 2:
        return math.nan, math.nan
    mean, sd = controls.mean_sd()
    keep = sd > 0
    if not keep.any():
        return math.nan, math.nan
    shift = np.zeros_like(mean)
    shift[keep] = (np.asarray(X_train, dtype=np.float64)[:, keep].mean(axis=0) - mean[keep]) / sd[keep]
    norm = float(np.linalg.norm(shift))
    if not np.isfinite(norm) or norm == 0:
        return math.nan, math.nan
    u = np.zeros_like(mean)
    u[keep] = shift[keep] / (norm * sd[keep])  # ((x - mean) / sd) . (shift / norm) = x . u - mean . u
    guide = np.asarray(X_test) @ u
    ctrl = np.asarray(X_test_controls) @ u  # the common offset mean . u cancels in the difference
    spread = float(ctrl.std(ddof=1))
    if not spread > 0:
        return math.nan, math.nan
    d = float((guide.mean() - ctrl.mean()) / spread)
    var_guide = float(guide.var(ddof=1)) if guide.size > 1 else spread**2
    se2 = (var_guide / guide.size + spread**2 / ctrl.size) / spread**2 + d**2 / (2.0 * (ctrl.size - 1))
    return d, math.sqrt(se2)
