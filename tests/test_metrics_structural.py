"""Structural identifiability metrics: MCC, linear R^2, InfoMEC, DCI (Nelson et al. 2026 "Table 2").

Known answers on a small generative process: 3 independent discrete factors (4, 6 and 10
equally likely values), 2,000 samples, as in the reference measurements with Hsu et al.'s code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import ortho_group
from sklearn.feature_selection import mutual_info_classif
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.utils.class_weight import compute_class_weight

from phenoica.identifiability import dci, infomec, linear_r2, mcc
from phenoica.identifiability._metrics import active_latents, discretize, infoc, infoe, infom, nmi_matrix
from phenoica.identifiability._mutual_information import jittered_columns, mutual_info_columns, sort_columns
from phenoica.transforms import ICARotation, PCAWhitener

N = 2000
LEVELS = (4, 6, 10)


@pytest.fixture(scope="module")
def world() -> dict[str, np.ndarray]:
    """Factors and four representations of them: factors + small noise, noise, rotation, ICA."""
    rng = np.random.default_rng(7)
    factors = np.stack([rng.integers(0, k, N) for k in LEVELS], axis=1).astype(float)
    standardized = (factors - factors.mean(axis=0)) / factors.std(axis=0)
    close = standardized + 0.05 * rng.standard_normal(standardized.shape)
    rotated = close @ ortho_group.rvs(3, random_state=3).T
    white = PCAWhitener(n_components=3).fit(rotated).transform(rotated)
    unmixed = ICARotation(seed=0).fit(white).transform(white)
    return {
        "factors": factors,
        "close": close,
        "noise": rng.standard_normal((N, 3)),
        "rotated": rotated,
        "ica": unmixed,
    }


@pytest.fixture(scope="module")
def scores(world) -> dict[str, dict]:
    return {name: infomec(world["factors"], world[name], seed=0) for name in ("close", "noise", "rotated", "ica")}


# --------------------------------------------------------------------------- discretize


def test_discretize_label_encodes_discrete_columns():
    f = np.array([[5.0, 0.5], [-1.0, 0.5], [5.0, 2.0], [3.0, 0.5]])
    np.testing.assert_array_equal(discretize(f), [[2, 0], [0, 0], [2, 1], [1, 0]])
    assert discretize(f).dtype == np.int64


def test_discretize_quantile_bins_continuous_columns(rng):
    x = rng.standard_normal(1000)
    codes = discretize(x, n_bins=20)
    assert codes.shape == (1000, 1)
    np.testing.assert_array_equal(np.bincount(codes[:, 0]), np.full(20, 50))
    # bins follow the order of the values
    order = np.argsort(x)
    assert (np.diff(codes[order, 0]) >= 0).all()


def test_discretize_merges_tied_bins_into_consecutive_codes(rng):
    x = np.concatenate([np.zeros(600), rng.standard_normal(400) + 5])  # 60% ties at 0
    codes = discretize(x, n_bins=10)[:, 0]
    assert np.unique(codes).tolist() == list(range(codes.max() + 1))
    assert (codes[:600] == 0).all() and (codes[600:] > 0).all()


def test_discretize_rejects_bad_input():
    with pytest.raises(ValueError, match="n_bins"):
        discretize(np.arange(5.0), n_bins=1)
    with pytest.raises(ValueError, match="row 2, column 1"):
        discretize([[0, 1], [1, 2], [2, np.nan]])


# --------------------------------------------------------------------------- MCC and R^2


def test_mcc_is_one_for_a_signed_permutation(world):
    f = world["factors"]
    latents = np.column_stack([-2.0 * f[:, 2], f[:, 0] + 3.0, -f[:, 1]])
    assert mcc(latents, f) == pytest.approx(1.0, abs=1e-12)


def test_mcc_matches_min_of_the_counts(world):
    f = world["factors"]
    assert mcc(f[:, [2, 0]], f) == pytest.approx(1.0, abs=1e-12)  # 2 latents, 3 factors
    extra = np.column_stack([world["noise"], f[:, 1], f[:, 0], f[:, 2]])
    assert mcc(extra, f) == pytest.approx(1.0, abs=1e-12)  # 6 latents, 3 factors


def test_mcc_is_low_for_noise_and_between_for_a_rotation(world):
    assert mcc(world["noise"], world["factors"]) < 0.1
    assert 0.3 < mcc(world["rotated"], world["factors"]) < 0.95


def test_mcc_rejects_constant_factor_and_mismatched_rows(world):
    f = world["factors"].copy()
    f[:, 1] = 2.0
    with pytest.raises(ValueError, match="factor column 1 is constant"):
        mcc(world["close"], f)
    with pytest.raises(ValueError, match="rows"):
        mcc(world["close"][:10], world["factors"])


def test_linear_r2_is_one_for_an_invertible_mix(world, rng):
    f = world["factors"]
    mix = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    latents = f @ mix.T + 4.0
    np.testing.assert_allclose(linear_r2(latents, f), 1.0, atol=1e-10)
    np.testing.assert_allclose(linear_r2(latents, f, train_fraction=0.5, seed=1), 1.0, atol=1e-10)


def test_linear_r2_known_half_and_noise(rng):
    signal = rng.standard_normal(N)
    factor = signal + rng.standard_normal(N)  # R^2 of factor on signal is 1/2
    assert linear_r2(signal, factor)[0] == pytest.approx(0.5, abs=0.05)
    noise = rng.standard_normal((N, 3))
    r2 = linear_r2(noise, rng.standard_normal((N, 2)))
    assert r2.shape == (2,) and (r2 >= 0).all() and (r2 < 0.01).all()
    held_out = linear_r2(noise, rng.standard_normal((N, 2)), train_fraction=0.5, seed=0)
    assert (held_out < 0.01).all()


def test_linear_r2_rejects_bad_fraction(world):
    with pytest.raises(ValueError, match="train_fraction"):
        linear_r2(world["close"], world["factors"], train_fraction=1.0)


# --------------------------------------------------------------------------- InfoM / InfoC by hand


def test_active_latents_uses_a_twentieth_of_the_largest_range():
    latents = np.array([[0.0, 0.0, 0.0, 3.0], [10.0, 1.0, 0.4, 3.0]])
    np.testing.assert_array_equal(active_latents(latents), [True, True, False, False])
    assert not active_latents(np.ones((4, 2))).any()


@pytest.mark.parametrize(
    ("nmi", "expected_m", "expected_c"),
    [
        (np.eye(2), 1.0, 1.0),
        (np.full((2, 2), 0.3), 0.0, 0.0),
        (np.array([[0.6, 0.2], [0.2, 0.6]]), 0.5, 0.5),
        # 3 sources x 2 latents: latent shares 9/11 and 2/3 -> mean 49/66 -> (49/66 - 1/3) / (2/3)
        # source shares 1, 1, 1/2 -> mean 5/6 -> (5/6 - 1/2) / (1/2)
        (np.array([[0.9, 0.0], [0.0, 0.4], [0.2, 0.2]]), 27 / 44, 2 / 3),
        # a latent and a source with no information at all: share 1/K and 1/L (0/0 rule)
        (np.array([[1.0, 0.0], [0.0, 0.0]]), 0.5, 0.5),
        (np.zeros((3, 3)), 0.0, 0.0),
    ],
)
def test_infom_infoc_by_hand(nmi, expected_m, expected_c):
    assert infom(nmi) == pytest.approx(expected_m, abs=1e-12)
    assert infoc(nmi) == pytest.approx(expected_c, abs=1e-12)


def test_infom_infoc_restrict_to_active_latents():
    nmi = np.array([[0.8, 0.0, 0.3], [0.0, 0.7, 0.3]])
    active = np.array([True, True, False])
    assert infom(nmi, active) == pytest.approx(1.0)
    assert infoc(nmi, active) == pytest.approx(1.0)
    assert infom(nmi) < 1.0 and infoc(nmi) < 1.0


def test_infom_infoc_undefined_and_bad_input():
    with pytest.warns(RuntimeWarning, match="InfoM undefined"):
        assert math.isnan(infom(np.array([[0.5, 0.2]])))
    with pytest.warns(RuntimeWarning, match="InfoC undefined"):
        assert math.isnan(infoc(np.array([[0.5], [0.2]])))
    with pytest.raises(ValueError, match="non-negative"):
        infom(np.array([[0.5, -0.1], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="no latent is active"):
        infoc(np.eye(2), active=[False, False])
    with pytest.raises(ValueError, match="mask has 3 entries"):
        infoc(np.eye(2), active=[True, True, False])


# --------------------------------------------------------------------------- NMI and InfoE


def test_nmi_matrix_of_close_latents_is_near_identity(world):
    nmi = nmi_matrix(world["factors"], world["close"][:, [0, 1, 2, 0]])
    assert nmi.shape == (3, 4)
    np.testing.assert_allclose(np.diag(nmi[:, :3]), 1.0, atol=0.02)
    np.testing.assert_allclose(nmi[:, 3], nmi[:, 0])  # duplicated latent, same estimate
    off = nmi[:, :3][~np.eye(3, dtype=bool)]
    assert (off < 0.03).all()


def test_nmi_matrix_is_invariant_to_affine_rescaling_of_latents(world):
    f, z = world["factors"], world["close"]
    np.testing.assert_allclose(nmi_matrix(f, 7.0 * z - 3.0), nmi_matrix(f, z), atol=1e-6)


def test_mutual_info_columns_equals_scikit_learns_estimate(world):
    """The sorted 1-D estimator gives scikit-learn's numbers, column by column: continuous
    latents, a latent with tied values, an informative one, labels of unequal sizes and one
    label held by a single row (left out by both). Classes hold at least 2 x n_neighbors rows,
    where scikit-learn's neighbour search is its KD-tree, whose distances are exact; below that
    it computes them by a dot-product expansion that rounds, and a count at the boundary may
    move by one."""
    rng = np.random.default_rng(11)
    n = 1500
    labels = rng.choice(7, size=n, p=[0.3, 0.2, 0.15, 0.15, 0.1, 0.05, 0.05])
    labels[17] = 9  # a label of one row
    z = rng.standard_normal((n, 6))
    z[:, 1] = np.round(z[:, 1], 1)  # ties, broken by the jitter
    z[:, 2] += 0.8 * labels  # informative
    z[:, 3] = np.exp(z[:, 3])  # skewed
    expected = mutual_info_classif(z, labels, discrete_features=False, n_neighbors=10, random_state=3)
    got = mutual_info_columns(jittered_columns(z, 3), labels, n_neighbors=10)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert got[2] > 0.5 and got[0] < 0.05


def test_kth_gap_is_the_distance_to_the_kth_nearest_other_entry():
    from phenoica.identifiability._mutual_information import _kth_gap

    # 0, 1, 3, 6, 10 with k = 2: the 2nd smallest distance to the other four entries
    np.testing.assert_array_equal(_kth_gap(np.array([[0.0, 1.0, 3.0, 6.0, 10.0]]), 2), [[3.0, 2.0, 3.0, 4.0, 7.0]])
    rng = np.random.default_rng(2)
    values = np.sort(np.round(rng.standard_normal((3, 40)), 1), axis=1)  # ties included
    for k in (1, 4, 10):
        distances = np.abs(values[:, :, None] - values[:, None, :])
        distances[:, np.arange(40), np.arange(40)] = np.inf  # not its own neighbour
        np.testing.assert_array_equal(_kth_gap(values, k), np.partition(distances, k - 1, axis=2)[:, :, k - 1])


def test_mutual_info_columns_with_shared_sort_is_the_same_estimate():
    """Columns sorted once (``sort_columns``) and scored for several label sets give each set's
    own estimate to the bit, raw ties and a label of one row (then sorted again) included."""
    rng = np.random.default_rng(5)
    z = rng.standard_normal((400, 5))
    z[:, 1] = np.round(z[:, 1], 1)  # ties, not jittered here
    z[:, 2] += rng.integers(0, 4, 400)
    shared = sort_columns(z)
    for labels in (rng.integers(0, 4, 400), rng.integers(0, 9, 400), np.r_[7, rng.integers(0, 3, 399)]):
        alone = mutual_info_columns(z, labels, n_neighbors=5)
        np.testing.assert_array_equal(mutual_info_columns(z, labels, n_neighbors=5, sorted_columns=shared), alone)
        assert np.isfinite(alone).all() and (alone >= 0).all()


def test_nmi_matrix_equals_per_source_scikit_learn_estimates(world):
    f, z = world["factors"], world["rotated"]
    codes = discretize(f)
    zs = (z - z.mean(axis=0)) / z.std(axis=0)
    for i in range(codes.shape[1]):
        y = codes[:, i]
        mi = mutual_info_classif(zs, y, discrete_features=False, n_neighbors=10, random_state=0)
        h = -np.sum(np.bincount(y) / y.size * np.log(np.bincount(y) / y.size))
        np.testing.assert_allclose(nmi_matrix(f, z)[i], mi / h, rtol=0, atol=1e-12)


def test_nmi_matrix_rejects_constant_source(world):
    f = world["factors"].copy()
    f[:, 2] = 1.0
    with pytest.raises(ValueError, match="sources column 2 is constant"):
        nmi_matrix(f, world["close"])


def test_null_model_loss_is_log_n_classes_under_balanced_weights(rng):
    """The documented H0: an intercept-only model fitted and scored with balanced weights."""
    y = rng.choice(4, size=600, p=[0.55, 0.25, 0.15, 0.05])
    null = LogisticRegression(C=np.inf, class_weight="balanced", max_iter=10_000).fit(np.zeros((600, 1)), y)
    weight = compute_class_weight("balanced", classes=np.arange(4), y=y)[y]
    assert log_loss(y, null.predict_proba(np.zeros((600, 1))), sample_weight=weight) == pytest.approx(
        math.log(4), abs=1e-6
    )


def test_infoe_is_one_for_close_latents_and_zero_for_noise(world):
    f = world["factors"]
    assert infoe(f, world["close"]) > 0.99
    assert abs(infoe(f, world["noise"])) < 0.02


def test_infoe_half_information_source(rng):
    """A binary source seen through a latent that reveals it half of the time: InfoE ~ 1/2."""
    source = rng.integers(0, 2, N)
    seen = rng.random(N) < 0.5
    latent = np.where(seen, np.where(source == 1, 1.0, -1.0), 0.0) + 1e-3 * rng.standard_normal(N)
    # the best probabilistic model is exact when seen and 1/2-1/2 otherwise: CE = log(2) / 2
    assert infoe(source, latent) == pytest.approx(0.5, abs=0.03)


# --------------------------------------------------------------------------- InfoMEC (reference values measured with Hsu et al.'s code)


def test_infomec_close_latents_match_reference(scores):
    s = scores["close"]
    assert s["infom"] > 0.98 and s["infoc"] > 0.98 and s["infoe"] > 0.99  # reference (0.995, 1.0, 0.995)
    assert s["nmi"].shape == (3, 3) and s["active"].all()


def test_infomec_noise_has_no_explicitness(scores):
    s = scores["noise"]
    assert abs(s["infoe"]) < 0.02  # reference 0.00; InfoM / InfoC are not meaningful here
    assert (s["nmi"] < 0.02).all()


def test_infomec_rotation_lowers_modularity_and_compactness_not_explicitness(scores):
    close, rot = scores["close"], scores["rotated"]
    assert rot["infoe"] > 0.99  # a rotation loses no information
    assert rot["infom"] < 0.7 and rot["infom"] < close["infom"] - 0.3
    assert rot["infoc"] < 0.7 and rot["infoc"] < close["infoc"] - 0.3


def test_infomec_ica_restores_modularity_after_rotation(scores):
    ica, rot = scores["ica"], scores["rotated"]
    assert ica["infom"] > 0.85 and ica["infom"] > rot["infom"] + 0.3
    assert ica["infoc"] > 0.85 and ica["infoe"] > 0.99


def test_infomec_ignores_inactive_latents(world, scores, rng):
    tiny = 1e-3 * rng.standard_normal((N, 1))  # range far below 1/20 of the others
    s = infomec(world["factors"], np.column_stack([world["close"], tiny]), seed=0)
    np.testing.assert_array_equal(s["active"], [True, True, True, False])
    for key in ("infom", "infoe", "infoc"):
        assert s[key] == pytest.approx(scores["close"][key], abs=1e-9)
    with pytest.raises(ValueError, match="no active latents"):
        infomec(world["factors"], np.ones((N, 2)))


def test_infomec_discretizes_continuous_factors(rng):
    factors = rng.uniform(size=(N, 2))
    s = infomec(factors, factors + 0.001 * rng.standard_normal((N, 2)), n_bins=8)
    assert s["infom"] > 0.9 and s["infoc"] > 0.9 and s["infoe"] > 0.9


# --------------------------------------------------------------------------- DCI


@pytest.fixture(scope="module")
def dci_small(world) -> dict[str, dict]:
    rows = slice(0, 500)
    f = world["factors"][rows]
    return {name: dci(world[name][rows], f, seed=0) for name in ("close", "rotated", "noise")}


def test_dci_factors_plus_noise_is_disentangled(dci_small):
    d = dci_small["close"]
    assert d["disentanglement"] > 0.9 and d["completeness"] > 0.9 and d["informativeness"] > 0.95
    np.testing.assert_allclose(d["importance"].sum(axis=0), 1.0, atol=1e-9)
    assert (d["importance"].argmax(axis=0) == [0, 1, 2]).all()


def test_dci_rotation_lowers_disentanglement_not_informativeness(dci_small):
    close, rot = dci_small["close"], dci_small["rotated"]
    assert rot["disentanglement"] < 0.6 and rot["disentanglement"] < close["disentanglement"] - 0.3
    assert rot["completeness"] < close["completeness"] - 0.3
    assert rot["informativeness"] > 0.8


def test_dci_noise_is_uninformative(dci_small):
    chance = np.mean([1 / k for k in LEVELS])
    assert dci_small["noise"]["informativeness"] < chance + 0.1


def test_dci_is_seeded(rng):
    f = np.stack([rng.integers(0, 3, 200), rng.integers(0, 4, 200)], axis=1)
    z = f + 0.3 * rng.standard_normal((200, 2))
    a, b = dci(z, f, seed=5), dci(z, f, seed=5)
    for key in ("disentanglement", "completeness", "informativeness"):
        assert a[key] == b[key]
    np.testing.assert_array_equal(a["importance"], b["importance"])
    assert 0.0 <= a["disentanglement"] <= 1.0
    with pytest.warns(RuntimeWarning, match="completeness undefined"):
        one = dci(z[:, :1], f, seed=0)
    assert math.isnan(one["completeness"]) and 0.0 <= one["disentanglement"] <= 1.0


def test_probe_r2_known_answers():
    from phenoica.identifiability import _metrics as metrics

    rng = np.random.default_rng(0)
    factors = rng.standard_normal((600, 3))
    mix = rng.standard_normal((3, 12))
    latents = factors @ mix + 0.01 * rng.standard_normal((600, 12))
    r2 = metrics.probe_r2(latents, factors)
    assert r2.shape == (3,) and (r2 > 0.99).all()
    # Latent scale does not matter (z-scored in each fold); a factor with half its variance seen:
    half = np.column_stack([1e4 * factors[:, 0] + 1e4 * rng.standard_normal(600), rng.standard_normal(600)])
    assert metrics.probe_r2(half, factors[:, 0]) == pytest.approx([0.5], abs=0.08)
    noise = metrics.probe_r2(rng.standard_normal((600, 20)), factors)
    assert (np.abs(noise) < 0.05).all()  # held out: no optimism from 20 noise latents
    np.testing.assert_array_equal(
        metrics.probe_r2(latents, factors, seed=3), metrics.probe_r2(latents, factors, seed=3)
    )
    with pytest.raises(ValueError, match="constant"):
        metrics.probe_r2(latents, np.ones(600))
    with pytest.raises(ValueError, match="rows"):
        metrics.probe_r2(latents[:50], factors)
