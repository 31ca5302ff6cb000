"""InfoMEC and DCI inputs for discrete factors (Nelson et al. 2026; Hsu et al. 2023): label-encoded with all their
values, never quantile-binned, also when a factor has more values than the binning default (MPI3D's
two 40-valued factors)."""

from __future__ import annotations

import numpy as np
import pytest

from phenoica.identifiability import infomec
from phenoica.identifiability._metrics import discretize, infoe, infoe_sources


def test_none_label_encodes_every_value_of_a_40_valued_factor():
    rng = np.random.default_rng(0)
    f = np.stack([rng.integers(0, 40, 2000), rng.integers(0, 4, 2000)], axis=1).astype(float)
    codes = discretize(f, n_bins=None)
    assert [np.unique(codes[:, k]).size for k in range(2)] == [40, 4]
    np.testing.assert_array_equal(codes, f.astype(int))
    # the quantile default would merge the 40 values into 20 classes
    assert np.unique(discretize(f, n_bins=20)[:, 0]).size == 20
    with pytest.raises(ValueError, match="None"):
        discretize(f, n_bins=1)


def test_infomec_scores_all_40_classes_of_a_discrete_factor():
    # a latent that separates all 40 values perfectly is fully explicit only if all 40 classes are kept:
    # the classes of a 40-valued factor are then predicted exactly from a one-hot-like latent code
    rng = np.random.default_rng(1)
    n = 4000
    factor = rng.integers(0, 40, n)
    other = rng.integers(0, 3, n)
    latents = np.column_stack(
        [np.eye(40)[factor] * 5 + 0.01 * rng.standard_normal((n, 40)), other + 0.01 * rng.standard_normal(n)]
    )
    sources = np.column_stack([factor, other]).astype(float)
    per = infoe_sources(sources, latents, n_bins=None, max_iter=300)
    assert per.shape == (2,) and per[0] > 0.95
    assert infoe(sources, latents, n_bins=None, max_iter=300) == pytest.approx(per.mean())
    info = infomec(sources, latents, n_bins=None, infoe_max_iter=300)
    assert info["infoe_sources"].shape == (2,) and info["infoe"] == pytest.approx(info["infoe_sources"].mean())
    assert info["nmi"].shape == (2, 41)
    # NMI is normalized by the entropy of the 40 classes (log 40), not of 20 merged bins
    binned = infomec(sources, latents, n_bins=20, infoe_max_iter=300)
    assert not np.allclose(binned["nmi"][0], info["nmi"][0])


@pytest.mark.filterwarnings("ignore:InfoC undefined")  # one active latent: InfoC is 0/0 by definition
def test_infoe_on_all_latents_counts_an_inactive_informative_latent():
    # latent 1 has a tiny range (inactive: below 1/20 of the largest) but carries the second factor
    rng = np.random.default_rng(2)
    n = 1500
    sources = np.column_stack([rng.integers(0, 4, n), rng.integers(0, 3, n)]).astype(float)
    latents = np.column_stack(
        [sources[:, 0] * 10 + rng.normal(0, 0.1, n), sources[:, 1] * 0.01 + rng.normal(0, 1e-4, n)]
    )
    active = infomec(sources, latents, n_bins=None, infoe_max_iter=300)
    everything = infomec(sources, latents, n_bins=None, infoe_max_iter=300, infoe_all_latents=True)
    assert active["active"].tolist() == [True, False]
    assert active["infoe_sources"][1] < 0.05 < 0.9 < everything["infoe_sources"][1]
    assert everything["infoe_sources"][0] == pytest.approx(active["infoe_sources"][0], abs=1e-3)
    assert everything["infom"] == active["infom"] and everything["nmi"].shape == (2, 1)  # InfoM/C: active only
