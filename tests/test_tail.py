"""The classifier null's Pareto tail: the fit, its goodness-of-fit fallback, and calls at genome depth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from phenoica.contract import GUIDE
from phenoica.hits import _calls as H
from phenoica.hits import _tail as T
from tests.test_hits import _expit, guide_table


@pytest.mark.parametrize("shape", [0.4, 0.15])
def test_the_profile_likelihood_fit_is_scipys_maximum_likelihood_where_the_shape_is_positive(shape):
    y = stats.genpareto.rvs(shape, scale=0.5, size=400, random_state=np.random.default_rng(3))
    fitted = T.fit_exceedances(y)
    ml_shape, _, ml_scale = stats.genpareto.fit(y, floc=0)
    assert fitted[0] == pytest.approx(ml_shape, abs=0.02) and fitted[1] == pytest.approx(ml_scale, rel=0.03)


def test_a_bounded_tail_is_fitted_as_the_exponential_never_with_an_end_point():
    """Uniform exceedances (shape -1: a tail with an end point) get shape 0 and scale their mean, so
    a value far beyond every exceedance still gets a p-value above 0."""
    y = np.random.default_rng(4).uniform(0, 1, size=200)
    shape, scale = T.fit_exceedances(y)
    assert shape == 0.0 and scale == pytest.approx(y.mean())
    tail = T.TailFit(0.0, shape, scale, 25, 100, 1.0)
    assert 0 < tail.sf(np.array([5.0]))[0] < 1e-3


def test_the_goodness_of_fit_test_rejects_a_tail_of_two_clusters_and_accepts_a_pareto_sample():
    rng = np.random.default_rng(5)
    good = stats.genpareto.rvs(0.2, scale=1.0, size=40, random_state=rng)
    assert T.gof_pvalue(good, *T.fit_exceedances(good), seed=0) > 0.05
    bad = np.r_[rng.uniform(0, 0.05, 30), rng.uniform(3, 3.1, 10)]
    assert T.gof_pvalue(bad, *T.fit_exceedances(bad), seed=0) < 0.05


def test_a_null_without_a_tail_keeps_the_bounded_empirical_p_value():
    """Pseudo-guides that all score 0.5 (no model split) have no tail: the p-value of a guide above
    them all is 1 / (n + 1), as the empirical model gives it."""
    fit = H.NullFit(np.full(100, 0.5), "pareto")
    assert fit.tail is None and fit.p_floor == pytest.approx(1 / 101)
    calls = H.call_guides(guide_table([0.99, 0.5], np.full(100, 0.5)), "pareto", 0.05)
    strong = calls.set_index(GUIDE).loc["g00000"]
    assert strong["p_value"] == pytest.approx(1 / 101)
    summary = H.null_summary(calls, "pareto", 0.05).iloc[0]
    assert not summary["tail"] and summary["p_reach"] == pytest.approx(1 / 101)


@pytest.mark.parametrize("m", [10_000, 100_000])
def test_a_lone_strong_guide_among_a_genome_of_guides_is_called_with_the_default_null_of_100(m):
    """BH calls a lone guide among m at q < 0.05 only with p < 0.05 / m (5e-7 among 100,000); 100
    pseudo-guides observe 1/101, and the tail fitted to their exceedances reads beyond: the guide
    at AUROC 0.99 (23 null SDs out) is called, and the guides without effect are not. (At AUROC 0.9,
    11 SDs out, this null's predictive tail gives 1.3e-5: the fitted shape, 0.1, and the scale's
    uncertainty leave it uncalled among 10,000.)"""
    rng = np.random.default_rng(11)
    real = _expit(rng.normal(0.0, 0.2, size=m))
    real[0] = 0.99
    calls = H.call_guides(guide_table(real, _expit(rng.normal(0.0, 0.2, size=100))), "pareto", 0.05, seed=0)
    real_calls = calls[~calls["is_null_guide"]].set_index(GUIDE)
    strong = real_calls.loc["g00000"]
    assert strong["hit"] and strong["p_value"] < 0.05 / m and not strong["p_beyond_null"]
    assert real_calls["hit"].sum() == 1
    summary = H.null_summary(calls, "pareto", 0.05).iloc[0]
    assert summary["tail"] and summary["p_reach"] < 0.05 / m and summary["n_tail_only_calls"] == 0


def _share_at(tail_sf, alpha: float, true_sf, lo: float) -> float:
    """The true probability that a fresh draw gets a p-value at or below ``alpha`` from the
    decreasing ``tail_sf``: the truth's survival at the point where the tail reads ``alpha``."""
    hi = lo + 1.0
    while tail_sf(np.array([hi]))[0] > alpha:
        hi = lo + 2 * (hi - lo)
    x = optimize.brentq(lambda v: np.log(tail_sf(np.array([v]))[0] / alpha), lo, hi)
    return float(true_sf(x))


def test_the_predictive_of_an_exponential_tail_is_exact_and_the_plug_in_is_not():
    """Exponential exceedances (N = 25 of n = 100): a fresh exceedance is at or below the tail's
    alpha exactly as often as stated by the predictive (the pivot is F-distributed), 2 to 3 times
    as often by the plug-in at 1e-4 (averaged over 400 samples: exact to a few percent). The grid
    that serves positive shapes gives the closed form as the shape goes to 0."""
    rng = np.random.default_rng(21)
    rate = 25 / 100
    shares: dict[str, list[float]] = {"predictive": [], "plug-in": []}
    for _ in range(400):
        y = rng.exponential(1.0, 25)
        tail = T.TailFit(0.0, 0.0, float(y.mean()), 25, 100, 1.0, tuple(y))
        for name, sf in (("predictive", tail.sf), ("plug-in", tail.plugin_sf)):
            shares[name].append(_share_at(sf, 1e-4, lambda x: rate * np.exp(-x), 1e-9))
    assert np.mean(shares["predictive"]) / 1e-4 == pytest.approx(1.0, abs=0.12)
    assert 2.0 < np.mean(shares["plug-in"]) / 1e-4 < 3.5
    near_zero = T.TailFit(0.0, 1e-7, float(y.mean()), 25, 100, 1.0, tuple(y))
    z = np.array([0.1, 3.0, 12.0])
    assert near_zero.sf(z) == pytest.approx(tail.sf(z), rel=1e-4)


def test_tail_p_values_are_calibrated_beyond_the_null_on_a_heavier_than_normal_null():
    """Nulls of 100 from a logistic distribution (heavier tail than a normal: an exponential tail
    in the logit), the whole rule (threshold, goodness of fit, shape floored at 0): the share of
    fresh draws at or below 1e-3 and 1e-4 (computed from the logistic's survival), averaged over
    60 nulls, within [0.5, 2] x nominal; and a fresh draw under 10 pseudo-guides never gets a p
    below the empirical rank's reach (10/101)."""
    rng = np.random.default_rng(12)
    truth = stats.logistic(0.0, 0.3)
    shares: dict[float, list[float]] = {1e-3: [], 1e-4: []}
    for seed in range(60):
        null = truth.rvs(size=100, random_state=rng)
        fit = H.NullFit(_expit(null), "pareto", seed=seed)
        tail = fit.tail
        assert tail is not None
        for alpha in shares:
            shares[alpha].append(_share_at(tail.sf, alpha, truth.sf, tail.threshold + 1e-9))
        fresh = truth.rvs(size=2_000, random_state=rng)
        p = np.maximum(fit.p_values(_expit(fresh)), fit.p_floor)
        inside = np.sort(null)[::-1][9] <= fresh
        assert (p[~inside] >= 10 / 101 - 1e-12).all()
    for alpha, values in shares.items():
        assert 0.5 <= np.mean(values) / alpha <= 2.0


def test_the_leave_one_out_p_values_of_a_pareto_null_are_uniform():
    rng = np.random.default_rng(13)
    fit = H.NullFit(_expit(rng.logistic(0.0, 0.3, size=200)), "pareto", seed=0)
    loo = fit.leave_one_out_p()
    assert fit.tail is not None and stats.kstest(loo, "uniform").pvalue > 0.05
    assert pd.Series(loo).between(0, 1).all()


def test_the_gpd_log_survival_and_density_of_any_shape_are_scipys():
    y = np.array([0.0, 0.4, 1.5, 3.0, 4.0])
    for shape in (-0.3, 0.0, 0.25):
        assert np.exp(T.gpd_logsf(y, shape, 1.2)) == pytest.approx(stats.genpareto.sf(y, shape, scale=1.2))
        assert np.exp(T.gpd_logpdf(y, shape, 1.2)) == pytest.approx(stats.genpareto.pdf(y, shape, scale=1.2))
    assert T.gpd_logsf(np.array([4.0]), -0.3, 1.2)[0] == -np.inf  # beyond the end point 1.2 / 0.3


def test_the_joint_predictive_with_the_shape_held_at_zero_is_the_exponentials_closed_form(monkeypatch):
    """With the shape's grid reduced to 0 the joint posterior is the scale's alone, and its
    predictive is the exact exponential one, (1 + y / (N mean))^-N (to the grid's quadrature)."""
    y = np.random.default_rng(22).exponential(0.7, 25)
    monkeypatch.setattr(T, "JOINT_SHAPE_GRID", np.array([0.0]))
    tail = T.TailFit(0.0, 0.0, float(y.mean()), 25, 100, 1.0, tuple(y))
    z = np.array([0.05, 1.0, 5.0, 13.8])
    assert tail.joint_sf(z) == pytest.approx(0.25 * (1 + z / y.sum()) ** -25, rel=1e-3)
    assert tail.joint_sf(z) == pytest.approx(tail.sf(z), rel=1e-3)


def test_the_joint_predictive_of_a_long_bounded_sample_finds_its_end_point_but_never_reads_zero():
    """200 exceedances of a GPD with shape -0.3 (end point 1 / 0.3 of scale 1): the joint
    predictive reads the true survival within 15% inside the support; beyond the end point the
    p-value is small but above 0 (shapes >= 0 keep prior mass), where the scale-only predictive
    (shape floored at 0) reads an exponential tail orders of magnitude above."""
    y = stats.genpareto.rvs(-0.3, scale=1.0, size=200, random_state=np.random.default_rng(23))
    tail = T.TailFit(0.0, *(float(v) for v in T.fit_exceedances(y)), 200, 800, 1.0, tuple(y))
    inside = np.array([0.5, 1.0, 2.0])
    assert tail.joint_sf(inside) == pytest.approx(0.25 * stats.genpareto.sf(inside, -0.3), rel=0.15)
    far = tail.joint_sf(np.array([6.0]))[0]
    assert 0.0 < far < 1e-6 and tail.sf(np.array([6.0]))[0] > 1e3 * far


def test_the_joint_predictive_read_at_nodes_for_many_values_is_the_exact_one():
    rng = np.random.default_rng(24)
    y = stats.genpareto.rvs(0.1, scale=0.4, size=25, random_state=rng)
    tail = T.TailFit(0.0, *(float(v) for v in T.fit_exceedances(y)), 25, 100, 1.0, tuple(y))
    z = np.r_[rng.exponential(1.0, 3 * T.JOINT_EXACT_MAX), 13.8]
    exact = np.concatenate([tail.joint_sf(part) for part in np.array_split(z, 8)])
    assert tail.joint_sf(z) == pytest.approx(exact, rel=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("shape", [-0.3, 0.0, 0.2])
def test_the_joint_predictive_is_never_liberal_on_gpd_tails_where_the_scale_only_one_is(shape):
    """N = 25 exceedances of n = 100 from a GPD of shape -0.3 (bounded), 0 and 0.2 (heavier than
    exponential, as a t5's tail): averaged over 60 samples, the share of fresh exceedances the
    joint predictive puts at or below 1e-3 and 1e-4 is at most 2x nominal (it averages over the
    shapes the exceedances allow; the heavier ones make it conservative far out); the scale-only
    predictive, at the fitted shape, is over 2x nominal at 1e-4 on the heavier tail."""
    rng = np.random.default_rng(25)
    shares: dict[tuple[str, float], list[float]] = {}
    for _ in range(60):
        y = stats.genpareto.rvs(shape, scale=1.0, size=25, random_state=rng)
        tail = T.TailFit(0.0, *(float(v) for v in T.fit_exceedances(y)), 25, 100, 1.0, tuple(y))
        for name, sf in (("joint", tail.joint_sf), ("scale", tail.sf)):
            for alpha in (1e-3, 1e-4):
                share = _share_at(sf, alpha, lambda x: 0.25 * stats.genpareto.sf(x, shape), 1e-9)
                shares.setdefault((name, alpha), []).append(share)
    ratio = {key: np.mean(values) / key[1] for key, values in shares.items()}
    assert ratio[("joint", 1e-3)] <= 2.0 and ratio[("joint", 1e-4)] <= 2.0
    if shape > 0:
        assert ratio[("scale", 1e-4)] > 2.0
