"""The classifier null beyond its pseudo-guides: a generalized Pareto tail (``hits.null_model: pareto``).

A null of n pseudo-guides observes nothing below p = 1 / (n + 1); a genome-scale screen calls
at p < 0.05 / m (5e-7 among 100,000 guides). Following Knijnenburg et al. (2009), a guide that
lies beyond all but a few pseudo-guides gets its p-value from a generalized Pareto distribution
(GPD) fitted to the pseudo-guides' upper exceedances, where a goodness-of-fit test accepts it; the
rule (docs/hit-calling.md, *Calls at genome depth*), on z = logit(AUROC):

- at least :data:`MIN_EXCEEDANCES` pseudo-guides at or above the guide: the empirical p-value;
- fewer: ``(N / n)`` times the GPD's *predictive* survival at ``z - u`` (:meth:`TailFit.sf`),
  u halfway between the N-th and (N + 1)-th largest pseudo-guide, the GPD fitted by maximum
  likelihood with its shape held at 0 or above (never a lighter tail than the exponential, so no
  fitted end point gives a guide p = 0), N from n / 4 down by n / 20 until an Anderson-Darling
  test (parametric bootstrap) accepts the fit. Predictive: the survival averaged over the
  scale's posterior under the prior 1 / scale, the shape held at its estimate; with shape 0,
  ``(1 + (z - u) / (N * mean))^-N``, the exact prediction of a new exponential exceedance. The
  plug-in survival (the fitted scale taken as the truth) reads too far out, the more so the
  further it reads;
- no fit accepted: the bounded empirical p-value (at least 1 / (n + 1)).

:meth:`TailFit.joint_sf` reads the same tail from the joint posterior of (shape, scale), the shape
allowed below 0 (prior flat on [-0.5, 0.5], 1 / scale); it was measured and is not the default
(no call uses it: docs/hit-calling.md, *The joint predictive*).

Reported p-values stop at :data:`TAIL_P_FLOOR`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from phenoica.utils import rng_for

#: Where the empirical p-value hands over to the tail: a guide with fewer pseudo-guides at or above
#: it than this is read from the tail (Knijnenburg et al. 2009).
MIN_EXCEEDANCES = 10
#: The exceedances of the first fit, as a share of the null (a quarter), and the step down after a
#: rejected fit (a twentieth).
START_SHARE = 0.25
STEP_SHARE = 0.05
#: The goodness-of-fit test: parametric-bootstrap samples and the level at which a fit is rejected.
GOF_SAMPLES = 199
GOF_LEVEL = 0.05
#: No p-value is reported below this (a lone guide among 10^8 guides; no screen's calls change).
TAIL_P_FLOOR = 1e-10


#: The scales the predictive averages over where the shape is above 0: the fitted scale times
#: ``exp`` of this grid (uniform in log scale, where the prior 1 / scale is flat; the posterior of
#: the log scale has a standard deviation near 1 / sqrt(N), a third at the fewest exceedances).
LOG_SCALE_GRID = np.linspace(-4.0, 4.0, 321)
#: Values read from the grid at once (bounds the memory of values x grid).
SF_CHUNK = 4096


@dataclass(frozen=True)
class TailFit:
    """The fitted tail of one null: threshold ``u`` (on logit AUROC), the GPD's ``shape`` (>= 0)
    and ``scale``, ``n_exceed`` exceedances of ``n`` pseudo-guides, the goodness-of-fit p-value,
    and the ``exceedances`` themselves (the predictive needs them where the shape is above 0)."""

    threshold: float
    shape: float
    scale: float
    n_exceed: int
    n: int
    gof_p: float
    exceedances: tuple[float, ...] = ()

    def sf(self, z: np.ndarray) -> np.ndarray:
        """The tail's p-value of values ``z`` beyond the threshold: (N / n) times the predictive
        survival at z - u (module doc): the GPD's survival averaged over the scale's posterior
        (prior 1 / scale) given the exceedances, the shape held at its estimate. With shape 0 in
        closed form, ``(1 + y / (N * scale))^-N`` (the scale is then the mean exceedance)."""
        y = np.maximum(np.asarray(z, dtype=float) - self.threshold, 0.0)
        rate = self.n_exceed / self.n
        if self.shape == 0.0:
            return rate * np.exp(-self.n_exceed * np.log1p(y / (self.n_exceed * self.scale)))
        if not self.exceedances:
            raise ValueError("TailFit.sf: a tail with a positive shape needs its exceedances for the predictive")
        ex = np.asarray(self.exceedances, dtype=float)
        scales = self.scale * np.exp(LOG_SCALE_GRID)
        loglik = -ex.size * np.log(scales) - (1.0 / self.shape + 1.0) * np.log1p(
            self.shape * ex[None, :] / scales[:, None]
        ).sum(axis=1)
        weight = np.exp(loglik - loglik.max())
        weight /= weight.sum()
        flat = y.ravel()
        out = np.empty(flat.size)
        for start in range(0, flat.size, SF_CHUNK):
            part = flat[start : start + SF_CHUNK, None]
            out[start : start + SF_CHUNK] = np.exp(-np.log1p(self.shape * part / scales) / self.shape) @ weight
        return rate * out.reshape(y.shape)

    @functools.cached_property
    def joint_posterior(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The joint posterior of (shape, scale) given the exceedances on the grid of
        :data:`JOINT_SHAPE_GRID` x (mean exceedance x ``exp`` :data:`JOINT_LOG_SCALE_GRID`),
        prior flat in the shape and in log scale: the shapes, scales and normalized weights of the
        grid points whose weight is above :data:`JOINT_WEIGHT_CUTOFF` (flat arrays)."""
        if not self.exceedances:
            raise ValueError("TailFit.joint_sf: the joint predictive needs the tail's exceedances")
        ex = np.asarray(self.exceedances, dtype=float)
        shapes = np.repeat(JOINT_SHAPE_GRID, JOINT_LOG_SCALE_GRID.size)
        scales = np.tile(float(ex.mean()) * np.exp(JOINT_LOG_SCALE_GRID), JOINT_SHAPE_GRID.size)
        loglik = gpd_logpdf(ex[None, :], shapes[:, None], scales[:, None]).sum(axis=1)
        weight = np.exp(loglik - loglik.max())
        weight /= weight.sum()
        keep = weight > JOINT_WEIGHT_CUTOFF
        return shapes[keep], scales[keep], weight[keep] / weight[keep].sum()

    def joint_sf(self, z: np.ndarray) -> np.ndarray:
        """The tail's p-value of values ``z`` beyond the threshold read from the joint predictive:
        (N / n) times the GPD's survival at z - u averaged over the joint posterior of (shape,
        scale) (:attr:`joint_posterior`; the shape may be below 0, a grid point with an end point
        below the value contributing 0)."""
        y = np.maximum(np.asarray(z, dtype=float) - self.threshold, 0.0)
        flat = y.ravel()
        if flat.size <= JOINT_EXACT_MAX:
            out = self._joint_survival(flat)
        else:  # many values: read at nodes even in log(1 + y), log survival interpolated between
            s = np.log1p(flat)
            nodes = np.linspace(s.min(), s.max(), JOINT_NODES)
            log_at = np.log(np.maximum(self._joint_survival(np.expm1(nodes)), np.finfo(float).tiny))
            out = np.exp(np.interp(s, nodes, log_at))
        return self.n_exceed / self.n * out.reshape(y.shape)

    def _joint_survival(self, y: np.ndarray) -> np.ndarray:
        """The joint posterior's predictive survival at exceedances ``y`` (1-d), exactly."""
        shapes, scales, weight = self.joint_posterior
        out = np.empty(y.size)
        for start in range(0, y.size, JOINT_SF_CHUNK):
            part = y[start : start + JOINT_SF_CHUNK, None]
            out[start : start + JOINT_SF_CHUNK] = np.exp(gpd_logsf(part, shapes, scales)) @ weight
        return out

    def plugin_sf(self, z: np.ndarray) -> np.ndarray:
        """The plug-in p-value, (N / n) * GPD.sf(z - u) at the fitted shape and scale: what the
        rule read before the predictive (kept for the benchmark's comparison; no call uses it)."""
        y = np.maximum(np.asarray(z, dtype=float) - self.threshold, 0.0)
        return self.n_exceed / self.n * stats.genpareto.sf(y, self.shape, scale=self.scale)


#: The joint predictive's prior (:meth:`TailFit.joint_sf`): flat in the shape on [-0.5, 0.5] (this
#: grid, step 0.01) and flat in log scale, the scale on the mean exceedance times ``exp`` of
#: :data:`JOINT_LOG_SCALE_GRID`.
JOINT_SHAPE_GRID = np.arange(-50, 51) / 100.0
JOINT_LOG_SCALE_GRID = np.linspace(-3.0, 3.0, 241)
#: Grid points of the joint posterior below this weight are dropped (they change no p-value).
JOINT_WEIGHT_CUTOFF = 1e-12
#: Values read from the joint grid at once (bounds the memory of values x grid points).
JOINT_SF_CHUNK = 256
#: Up to this many values are read exactly; more (a benchmark's held-out null) at this many nodes
#: even in log(1 + exceedance), the log survival interpolated between them (relative error under
#: 1e-3, tested).
JOINT_EXACT_MAX = 512
JOINT_NODES = 512


def gpd_logsf(y: np.ndarray, shape: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Log survival of a GPD (location 0) at ``y`` for any shape, broadcasting: ``-log1p(shape y /
    scale) / shape`` (``-y / scale`` at shape 0), ``-inf`` at or beyond the end point
    ``scale / -shape`` of a negative shape."""
    y, shape, scale = (np.asarray(v, dtype=float) for v in (y, shape, scale))
    t = shape * y / scale
    zero = shape == 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        heavy = -np.log1p(np.where(t > -1.0, t, -1.0)) / np.where(zero, 1.0, shape)
    return np.where(zero, -y / scale, np.where(t > -1.0, heavy, -np.inf))


def gpd_logpdf(y: np.ndarray, shape: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Log density of a GPD (location 0) at ``y`` for any shape, broadcasting (``-inf`` at or beyond
    a negative shape's end point)."""
    y, shape, scale = (np.asarray(v, dtype=float) for v in (y, shape, scale))
    t = shape * y / scale
    zero = shape == 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        heavy = -np.log(scale) - (1.0 / np.where(zero, 1.0, shape) + 1.0) * np.log1p(np.where(t > -1.0, t, -1.0))
    return np.where(zero, -np.log(scale) - y / scale, np.where(t > -1.0, heavy, -np.inf))


#: The grid of the profile likelihood: ``theta = shape / scale`` times the mean exceedance, from
#: 1e-4 to 1e4, log-spaced (about 5% apart).
THETA_GRID = np.logspace(-4, 4, 401)
#: Bootstrap samples refitted at once (bounds the memory of the grid evaluation).
CHUNK = 16


def fit_exceedances(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shape and scale of a GPD (location 0) fitted by maximum likelihood to each row of
    exceedances ``y`` (one sample, or samples x exceedances), the shape held at 0 or above.

    The likelihood is profiled (Grimshaw 1993): with ``theta = shape / scale``, the best shape for
    a given theta is ``mean(log(1 + theta y))`` and the profile log-likelihood is
    ``-m (log(shape / theta) + 1 + shape)``; it is maximized over :data:`THETA_GRID` and against the
    exponential (theta -> 0: shape 0, scale the mean exceedance), which wins where the likelihood
    prefers a bounded tail (shape < 0 has theta < 0, outside the grid)."""
    y2 = np.atleast_2d(np.asarray(y, dtype=float))
    mean = y2.mean(axis=1)
    shape, scale = np.zeros(len(y2)), mean.copy()
    for start in range(0, len(y2), CHUNK):
        rows = slice(start, start + CHUNK)
        theta = THETA_GRID[None, :] / mean[rows, None]  # samples x grid
        xi = np.log1p(theta[:, :, None] * y2[rows, None, :]).mean(axis=2)
        loglik = -(np.log(xi / theta) + 1.0 + xi)
        best = np.argmax(loglik, axis=1)
        k = np.arange(len(best))
        better = loglik[k, best] > -(np.log(mean[rows]) + 1.0)
        shape[rows] = np.where(better, xi[k, best], 0.0)
        scale[rows] = np.where(better, xi[k, best] / theta[k, best], mean[rows])
    return (shape, scale) if np.ndim(y) > 1 else (float(shape[0]), float(scale[0]))  # type: ignore[return-value]


def gpd_cdf(y: np.ndarray, shape: np.ndarray | float, scale: np.ndarray | float) -> np.ndarray:
    """The GPD's distribution function (shape >= 0; shape 0 is the exponential), broadcasting."""
    shape, scale = np.asarray(shape, dtype=float), np.asarray(scale, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        heavy = 1.0 - (1.0 + shape * y / scale) ** (-1.0 / np.where(shape > 0, shape, 1.0))
    return np.where(shape > 0, heavy, -np.expm1(-y / scale))


def anderson_darling(y: np.ndarray, shape: np.ndarray | float, scale: np.ndarray | float) -> np.ndarray:
    """The Anderson-Darling statistic of each row of exceedances ``y`` against GPD(``shape``,
    ``scale``) (one per row)."""
    y2 = np.atleast_2d(y)
    sh, sc = np.reshape(shape, (-1, 1)), np.reshape(scale, (-1, 1))
    f = np.clip(np.sort(gpd_cdf(y2, sh, sc), axis=1), 1e-12, 1 - 1e-12)
    m = f.shape[1]
    i = np.arange(1, m + 1)
    return -m - np.mean((2 * i - 1) * (np.log(f) + np.log1p(-f[:, ::-1])), axis=1)


def gof_pvalue(y: np.ndarray, shape: float, scale: float, seed: int) -> float:
    """Parametric-bootstrap p-value of the Anderson-Darling test of the fit: :data:`GOF_SAMPLES`
    samples of ``len(y)`` from the fitted tail, each refitted by :func:`fit_exceedances`."""
    observed = float(anderson_darling(y, shape, scale)[0])
    u = rng_for(seed, "null_tail_gof", y.size).random((GOF_SAMPLES, y.size))
    sims = -scale * np.log1p(-u) if shape == 0 else scale / shape * ((1.0 - u) ** -shape - 1.0)
    above = int((anderson_darling(sims, *fit_exceedances(sims)) >= observed).sum())
    return (1.0 + above) / (GOF_SAMPLES + 1.0)


def threshold_at(z_desc: np.ndarray, n_exceed: int) -> float:
    """Halfway between the ``n_exceed``-th and the next largest of ``z_desc`` (sorted descending)."""
    return float((z_desc[n_exceed - 1] + z_desc[n_exceed]) / 2.0)


def tail_with(z: np.ndarray, n_exceed: int, seed: int | None) -> TailFit | None:
    """The tail fitted to the ``n_exceed`` largest of ``z`` (None where fewer than
    :data:`MIN_EXCEEDANCES` distinct values exceed the threshold), with its goodness-of-fit p-value
    (NaN when ``seed`` is None: not tested)."""
    z_desc = np.sort(np.asarray(z, dtype=float))[::-1]
    u = threshold_at(z_desc, n_exceed)
    y = z_desc[z_desc > u] - u
    if np.unique(y).size < MIN_EXCEEDANCES:
        return None
    shape, scale = (float(v) for v in fit_exceedances(y))  # one sample: two numbers
    gof = math.nan if seed is None else gof_pvalue(y, shape, scale, seed)
    return TailFit(u, shape, scale, int(y.size), int(z.size), gof, tuple(float(v) for v in y))


@functools.lru_cache(maxsize=64)
def _fit_cached(values: bytes, seed: int) -> TailFit | None:
    z = np.frombuffer(values, dtype=np.float64)
    n = z.size
    start = int(START_SHARE * n)
    step = max(1, round(STEP_SHARE * n))
    for n_exceed in range(start, MIN_EXCEEDANCES - 1, -step):
        tail = tail_with(z, n_exceed, seed)
        if tail is not None and tail.gof_p >= GOF_LEVEL:
            return tail
    return None


def fit_tail(z: np.ndarray, seed: int) -> TailFit | None:
    """The tail of a null of logit AUROCs ``z`` (module doc): the first N, from n / 4 down by
    n / 20 to :data:`MIN_EXCEEDANCES`, whose fit the goodness-of-fit test accepts at
    :data:`GOF_LEVEL`; None where none is (or n < 4 x :data:`MIN_EXCEEDANCES`). Cached on the
    values and the seed (the calls and the null's summary fit the same null)."""
    z = np.sort(np.asarray(z, dtype=np.float64))
    if z.size < MIN_EXCEEDANCES / START_SHARE:
        return None
    return _fit_cached(z.tobytes(), int(seed))


def pareto_p_values(null_z: np.ndarray, z: np.ndarray, tail: TailFit | None) -> np.ndarray:
    """p-values of logit AUROCs ``z`` against the null ``null_z``: the empirical
    ``(1 + M) / (n + 1)`` where M, the pseudo-guides at or above, is at least
    :data:`MIN_EXCEEDANCES` (or there is no tail), the tail's value elsewhere."""
    srt = np.sort(np.asarray(null_z, dtype=float))
    n = srt.size
    z = np.asarray(z, dtype=float)
    m = n - np.searchsorted(srt, z, side="left")
    p = (1.0 + m) / (n + 1.0)
    if tail is None:
        return p
    beyond = m < MIN_EXCEEDANCES
    return np.where(beyond, tail.sf(z), p)


def leave_one_out_pareto(
    null_z: np.ndarray, tail: TailFit | None, rng: np.random.Generator | None = None
) -> np.ndarray:
    """Each pseudo-guide's p-value against the other n - 1 by the same rule, the tail (where
    used) refitted without it at the whole null's number of exceedances, untested.

    With ``rng``, the empirical p-values are randomized within ties, ``(#{others > x} + U x (1 +
    #{others = x})) / n`` with U uniform on (0, 1) from ``rng``: exactly uniform for exchangeable
    values, tied or not, so a uniformity test checks the null's calibration rather than its ties
    (without, ties count as exceedances: the p-value the calls use, conservative where values tie)."""
    z = np.asarray(null_z, dtype=float)
    n = z.size
    srt = np.sort(z)
    m = n - np.searchsorted(srt, z, side="left") - 1  # the others at or above
    out = (1.0 + m) / n
    if rng is not None:
        above = n - np.searchsorted(srt, z, side="right")  # the others strictly above
        out = (above + rng.random(n) * (1.0 + m - above)) / n
    if tail is None:
        return out
    for i in np.flatnonzero(m < MIN_EXCEEDANCES):
        others = np.delete(z, i)
        refit = tail_with(others, min(tail.n_exceed, others.size - 1), None)
        if refit is not None:
            out[i] = float(refit.sf(z[i : i + 1])[0])
    return out


#: What :func:`tail_summary` adds to a (model, variant)'s row of ``null.parquet``.
TAIL_COLUMNS: tuple[str, ...] = (
    "tail",
    "tail_threshold_auroc",
    "tail_shape",
    "tail_scale",
    "tail_n_exceed",
    "tail_gof_p",
    "p_reach",
)


def tail_summary(fit: Any) -> dict[str, object]:
    """The tail of a fitted null (a :class:`phenoica.hits.NullFit`) for ``null.parquet``:
    ``tail`` (an accepted Pareto tail reads p-values beyond the pseudo-guides), its threshold (as
    an AUROC), shape, scale, exceedances and goodness-of-fit p-value (NaN without a tail), and
    ``p_reach``: the reported p-value of AUROC 1 (a guide above every pseudo-guide in every fold),
    the smallest this null can give."""
    tail = fit.tail
    reach = max(float(fit.p_values(np.array([1.0]))[0]), fit.p_floor)
    if tail is None:
        return dict(zip(TAIL_COLUMNS, (False, math.nan, math.nan, math.nan, 0, math.nan, reach)))
    threshold = float(1.0 / (1.0 + math.exp(-tail.threshold)))
    values = (True, threshold, tail.shape, tail.scale, tail.n_exceed, tail.gof_p, reach)
    return dict(zip(TAIL_COLUMNS, values))
