"""The tvn variant: control-fitted whitening, then per-batch CORAL of the controls'
covariance onto the pooled controls', fitted once, saved, re-applied (frozen) like the others."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from phenoica.contract import BATCH, PERT_TYPE, ScreenError
from phenoica.transforms import apply_transform, fit_transforms, load_transform
from phenoica.transforms._accumulators import Moments
from phenoica.transforms._scaling import CoralAlignment
from tests.test_transforms import transform_options

D = 6


def screen_table(n_batches: int = 4, seed: int = 0) -> pd.DataFrame:
    """Batches that differ in control mean and covariance; perturbations shift feature 0."""
    rng = np.random.default_rng(seed)
    parts = []
    for b in range(n_batches):
        mix = np.eye(D) + 0.6 * rng.normal(size=(D, D))
        X = rng.normal(size=(300, D)) @ mix + rng.normal(size=D) * 3
        control = np.arange(300) < 150
        X[~control, 0] += 2.0
        df = pd.DataFrame(X, columns=[f"emb_{i:04d}" for i in range(D)])
        df[BATCH], df[PERT_TYPE] = f"B{b}", np.where(control, "control", "perturbation")
        parts.append(df)
    return pd.concat(parts, ignore_index=True)


def control_covs(out: pd.DataFrame) -> dict[str, np.ndarray]:
    comp = [c for c in out.columns if c.startswith("comp_")]
    ctrl = out[out[PERT_TYPE] == "control"]
    return {b: np.cov(g[comp].to_numpy(np.float64), rowvar=False) for b, g in ctrl.groupby(BATCH)}


def test_tvn_aligns_every_batch_and_a_frozen_transform_aligns_an_unseen_batch(tmp_path):
    table = screen_table()
    train = table[table[BATCH] != "B3"]
    paths = fit_transforms(
        train, transform_options(variants=["pca", "tvn"], n_components=D, tvn_coral_eps=0.0), tmp_path
    )
    out = apply_transform(table, paths["tvn"])
    covs = control_covs(out)
    for b in ("B0", "B1", "B2", "B3"):  # B3 was never seen: aligned on its own controls
        np.testing.assert_allclose(covs[b], np.eye(D), atol=1e-4)  # whiten_eps 1e-6 on the eigenvalues
    pca = control_covs(apply_transform(table, paths["pca"]))
    assert max(np.abs(c - np.eye(D)).max() for c in pca.values()) > 0.1  # without CORAL they differ
    # the saved transform re-applies to the same numbers, and its report says how it was fitted
    reloaded = load_transform(paths["tvn"])
    assert reloaded.alignment is not None and reloaded.fit_report["fit_on"] == "controls"
    assert reloaded.fit_report["coral"]["batches"] == ["B0", "B1", "B2"]
    again = apply_transform(table, paths["tvn"])
    pd.testing.assert_frame_equal(out, again)
    # the perturbation shift survives (biology kept)
    ctrl = out[out[PERT_TYPE] == "control"].iloc[:, -D:].mean()
    pert = out[out[PERT_TYPE] == "perturbation"].iloc[:, -D:].mean()
    assert np.linalg.norm(pert - ctrl) > 1.0


def test_tvn_with_regularization_matches_the_formula():
    rng = np.random.default_rng(1)
    moments = {b: Moments(3).update(rng.normal(size=(200, 3)) * s) for b, s in (("a", 1.0), ("b", 3.0))}
    coral = CoralAlignment(eps=0.5).fit_moments(moments)
    C_b = moments["b"].covariance() + 0.5 * np.eye(3)
    C_t = coral.target_cov_ + 0.5 * np.eye(3)
    w, v = np.linalg.eigh(C_b)
    inv_half = (v / np.sqrt(w)) @ v.T
    w, v = np.linalg.eigh(C_t)
    half = (v * np.sqrt(w)) @ v.T
    np.testing.assert_allclose(coral.alignment_[1], inv_half @ half, atol=1e-10)
    z = rng.normal(size=(5, 3))
    expected = (z - moments["b"].mean) @ inv_half @ half + coral.target_mean_
    np.testing.assert_allclose(coral.transform(z, np.array(["b"] * 5)), expected, atol=1e-10)


def test_tvn_needs_controls_in_every_batch(tmp_path):
    table = screen_table(3)
    table = table[~((table[BATCH] == "B1") & (table[PERT_TYPE] == "control"))]
    with pytest.raises(ScreenError, match="batch 'B1': 0 control row"):
        fit_transforms(table, transform_options(variants=["tvn"], n_components=D, center_scale=False), tmp_path)
