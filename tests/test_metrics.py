"""Known answers for the classification metrics of Nelson et al. 2026 Tables 3 and 4."""

from __future__ import annotations

import math

import lightgbm as lgb
import numpy as np
import pytest

from phenoica.utils import _classifier_scores as metrics


def test_auroc_known_values():
    y = np.array([0, 0, 1, 1])
    assert metrics.auroc(y, np.array([0.1, 0.2, 0.8, 0.9])) == 1.0
    assert metrics.auroc(y, np.array([0.9, 0.8, 0.2, 0.1])) == 0.0
    # one of the four (pos, neg) pairs is misordered: 3/4
    assert metrics.auroc(y, np.array([0.1, 0.5, 0.4, 0.9])) == pytest.approx(0.75)
    # ties count half
    assert metrics.auroc(y, np.zeros(4)) == pytest.approx(0.5)


def test_auroc_is_scikit_learns_to_one_unit_in_the_last_place():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    for i in range(300):
        n = int(rng.integers(4, 400))
        y = (rng.random(n) < rng.uniform(0.05, 0.5)).astype(int)
        y[:2] = (0, 1)
        score = rng.random(n) if i % 2 else np.round(rng.random(n), 1)  # half of them with ties
        assert metrics.auroc(y, score) == pytest.approx(roc_auc_score(y, score), rel=0, abs=4e-16)


def test_auroc_one_class_is_nan_with_reason():
    with pytest.warns(RuntimeWarning, match="0 positive and 3 negative"):
        assert math.isnan(metrics.auroc(np.zeros(3), np.array([0.1, 0.2, 0.3])))


def test_auroc_rejects_bad_input():
    with pytest.raises(ValueError, match="3 values but score has 2"):
        metrics.auroc(np.array([0, 1, 1]), np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match="non-finite"):
        metrics.auroc(np.array([0, 1]), np.array([0.1, np.nan]))
    with pytest.raises(ValueError, match="0/1 labels"):
        metrics.auroc(np.array([0, 2]), np.array([0.1, 0.2]))


def test_sparsity_uniform_is_zero_and_one_hot_is_one():
    for d in (2, 8, 384):
        assert metrics.sparsity(np.full(d, 1.0 / d)) == pytest.approx(0.0, abs=1e-12)
        one_hot = np.zeros(d)
        one_hot[d // 2] = 1.0
        assert metrics.sparsity(one_hot) == pytest.approx(1.0)


def test_sparsity_hand_computed_value():
    # D = 4, c = (1/2, 1/2, 0, 0): ||c|| = 1/sqrt(2); (2 - sqrt(2)) / (2 - 1) = 0.585786...
    assert metrics.sparsity(np.array([0.5, 0.5, 0.0, 0.0])) == pytest.approx(2 - math.sqrt(2))
    # D = 9, c = (0.5, 0.5/8 x 8): ||c||^2 = 0.25 + 8 * (1/16)^2 = 0.28125
    c = np.r_[0.5, np.full(8, 0.5 / 8)]
    expected = (3 - 1 / math.sqrt(0.28125)) / 2
    assert metrics.sparsity(c) == pytest.approx(expected)
    # more concentrated use is sparser
    assert metrics.sparsity(np.array([0.7, 0.1, 0.1, 0.1])) > metrics.sparsity(np.array([0.4, 0.2, 0.2, 0.2]))


def test_sparsity_rejects_bad_fractions():
    with pytest.raises(ValueError, match="sum to 1"):
        metrics.sparsity(np.array([0.5, 0.2]))
    with pytest.raises(ValueError, match="at least 2"):
        metrics.sparsity(np.array([1.0]))
    with pytest.raises(ValueError, match="non-negative"):
        metrics.sparsity(np.array([1.5, -0.5]))


def test_concentration_hand_value():
    assert metrics.concentration(0.9, 0.6) == pytest.approx(0.5)
    assert metrics.concentration(0.6, 0.75) == pytest.approx(-0.2)
    assert math.isnan(metrics.concentration(float("nan"), 0.7))
    assert metrics.concentration(0.5, 0.0) == math.inf
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        metrics.concentration(1.2, 0.5)


def test_top_features_sizes_order_and_ties():
    imp = np.array([5, 0, 9, 1, 9, 3, 0, 2])
    top, rest = metrics.top_features(imp, 0.25)  # ceil(2) = 2
    assert top.tolist() == [2, 4]
    assert rest.tolist() == [0, 1, 3, 5, 6, 7]
    top, rest = metrics.top_features(imp, 0.3)  # ceil(2.4) = 3: 9, 9, then 5
    assert top.tolist() == [0, 2, 4]
    # tie at the cut goes to the lower index
    top, _ = metrics.top_features(np.array([1, 1, 1, 1]), 0.25)
    assert top.tolist() == [0]
    # at least one, never all
    assert len(metrics.top_features(np.arange(10), 0.01)[0]) == 1
    top, rest = metrics.top_features(np.arange(3), 0.99)
    assert len(top) == 2 and rest.tolist() == [0]
    # k * D that is an integer up to float rounding does not round up
    assert len(metrics.top_features(np.arange(30), 0.1)[0]) == 3
    with pytest.raises(ValueError, match="k must lie"):
        metrics.top_features(imp, 1.0)


def _tiny_booster(seed: int = 0) -> tuple[lgb.Booster, int]:
    rng = np.random.default_rng(seed)
    n, d = 300, 6
    X = rng.standard_normal((n, d))
    X[:, 4] = 1.0  # constant: never split on
    y = (X[:, 1] + 0.5 * X[:, 3] > 0).astype(float)
    params = dict(objective="binary", num_leaves=4, min_data_in_leaf=5, verbosity=-1, num_threads=1, seed=seed)
    return lgb.train(params, lgb.Dataset(X, y), num_boost_round=10), d


def test_split_fractions_from_real_booster():
    booster, d = _tiny_booster()
    c = metrics.split_fractions(booster, d)
    counts = booster.feature_importance(importance_type="split")
    assert c.shape == (d,)
    assert c.sum() == pytest.approx(1.0)
    assert c[4] == 0.0  # the constant feature is never used
    np.testing.assert_allclose(c, counts / counts.sum())
    assert set(np.flatnonzero(c)) == set(np.flatnonzero(counts))
    assert c[1] == c.max()  # the feature that decides the label takes most splits
    np.testing.assert_allclose(metrics.split_fractions(counts, d), c)
    assert 0.0 < metrics.sparsity(c) < 1.0


def test_split_fractions_rejects_bad_input():
    with pytest.raises(ValueError, match="cover 3 features, expected 4"):
        metrics.split_fractions(np.array([1, 2, 3]), 4)
    with pytest.raises(ValueError, match="no splits"):
        metrics.split_fractions(np.zeros(4), 4)
    with pytest.raises(ValueError, match="non-negative"):
        metrics.split_fractions(np.array([1, -1, 3]), 3)
