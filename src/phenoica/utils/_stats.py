"""Small statistics shared by the report and the hit calls: BH q-values, p-value combination,
bootstrap intervals.

Each wraps a maintained implementation where one exists (scipy's Benjamini-Hochberg and
bootstrap); the Cauchy combination (ACAT) is a two-line formula scipy does not offer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from phenoica.utils._seeding import derive_seed

#: p-values are clipped into [P_FLOOR, 1 - P_FLOOR] before the Cauchy transform (tan is infinite at 0 and 1).
P_FLOOR = 1e-15


def bh_qvalues(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg q-values of ``p`` (scipy's ``false_discovery_control``); NaN stays NaN
    and does not count as a test."""
    p = np.asarray(p, dtype=float)
    q = np.full(p.shape, math.nan)
    ok = np.isfinite(p)
    if ok.any():
        bad = (p[ok] < 0) | (p[ok] > 1)
        if bad.any():
            raise ValueError(f"bh_qvalues: p-values must lie in [0, 1], got {p[ok][bad][:5].tolist()}")
        q[ok] = stats.false_discovery_control(p[ok], method="bh")
    return q


def acat(p: np.ndarray) -> float:
    """Cauchy combination (ACAT, Liu & Xie 2020) of p-values with equal weights; NaNs ignored.

    T = mean(tan((0.5 - p) * pi)) is standard Cauchy under the null whatever the dependence
    between the p-values, so the combined p = 0.5 - arctan(T) / pi stays valid when the tests
    share data (guides of a screen share one control set). NaN when no p-value is finite.
    """
    p = np.asarray(p, dtype=float)
    p = p[np.isfinite(p)]
    if not p.size:
        return math.nan
    if p.size == 1:
        return float(p[0])
    t = np.mean(np.tan((0.5 - np.clip(p, P_FLOOR, 1 - P_FLOOR)) * math.pi))
    return float(np.clip(0.5 - math.atan(t) / math.pi, 0.0, 1.0))


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval."""

    estimate: float
    low: float
    high: float


def bootstrap_mean(
    values: np.ndarray, seed: int, *keys: str | int, n_resamples: int = 2000, confidence: float = 0.95
) -> Interval:
    """Mean of ``values`` (NaNs dropped) with a percentile bootstrap interval (scipy.stats.bootstrap).

    The resampling seed is ``derive_seed(seed, "bootstrap", *keys)``. Fewer than 2 values give
    NaN bounds (and a NaN estimate when there is none); identical values give a zero-width
    interval.
    """
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if not x.size:
        return Interval(math.nan, math.nan, math.nan)
    est = float(x.mean())
    if x.size < 2:
        return Interval(est, math.nan, math.nan)
    if np.ptp(x) == 0:
        return Interval(est, est, est)
    res = stats.bootstrap(
        (x,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        random_state=np.random.default_rng(derive_seed(seed, "bootstrap", *keys)),
    )
    return Interval(est, float(res.confidence_interval.low), float(res.confidence_interval.high))
