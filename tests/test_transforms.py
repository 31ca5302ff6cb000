"""Known answers for the embedding variants: whitening, ICA, random rotation, center-scale, I/O,
and the streaming fit / apply over row batches of a profile parquet."""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy.optimize import linear_sum_assignment
from scipy.stats import ortho_group

from phenoica.contract import (
    BATCH,
    PERT_TYPE,
    ConfigError,
    ScreenError,
    feature_name,
    load_schema,
    settings_of,
    validate_config,
)
from phenoica.transforms import (
    ICARotation,
    PCAWhitener,
    RandomRotation,
    TransformOptions,
    apply_transform,
    apply_transform_file,
    apply_transform_files,
    fit_transforms,
    fit_variants,
    load_transform,
    parallel_analysis,
)
from phenoica.transforms._accumulators import Moments, RowSample
from phenoica.transforms._fit import variant_seeds
from phenoica.transforms._scaling import CenterScale
from phenoica.transforms._variant import VariantTransform
from phenoica.utils import derive_seed


def independent_sources(n: int, rng: np.random.Generator) -> np.ndarray:
    """Six standardized non-Gaussian sources: Laplace (super-) and uniform (sub-Gaussian)."""
    S = np.column_stack(
        [
            rng.laplace(size=n),
            rng.uniform(-1, 1, n),
            rng.laplace(size=n),
            rng.uniform(-1, 1, n),
            rng.laplace(size=n),
            rng.uniform(-1, 1, n),
        ]
    )
    return (S - S.mean(axis=0)) / S.std(axis=0)


def planted(n: int, d: int, strong: int, rng: np.random.Generator, strength: float = 3.0) -> np.ndarray:
    """``strong`` independent sources of SD ``strength`` mixed into ``d`` dims + unit Gaussian noise."""
    S = rng.laplace(size=(n, strong)) / np.sqrt(2)
    A = ortho_group.rvs(d, random_state=1)[:strong]
    return strength * S @ A + rng.normal(size=(n, d))


def make_profiles(n_batches: int = 3, per_batch: int = 240, d: int = 12, seed: int = 0) -> pd.DataFrame:
    """A profile table: batches with their own offset/scale, 1/3 controls, 4 planted sources."""
    rng = np.random.default_rng(seed)
    frames = []
    for b in range(n_batches):
        X = planted(per_batch, d, 4, rng) * rng.uniform(0.5, 2.0, d) + rng.normal(0, 3, d)
        ctrl = np.arange(per_batch) % 3 == 0
        meta = pd.DataFrame(
            {
                BATCH: f"B{b + 1}",
                "Metadata_Plate": f"B{b + 1}P1",
                "Metadata_Guide": np.where(ctrl, "NTC", [f"g{i % 5}" for i in range(per_batch)]),
                PERT_TYPE: np.where(ctrl, "control", "perturbation"),
                "Metadata_Extra": np.arange(per_batch),
            }
        )
        feats = pd.DataFrame(X.astype(np.float32), columns=[feature_name(i) for i in range(d)])
        frames.append(pd.concat([meta, feats], axis=1))
    return pd.concat(frames, ignore_index=True)


def split(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    feats = [c for c in table.columns if c.startswith("emb_")]
    return table[feats].to_numpy(), table[BATCH].to_numpy(), (table[PERT_TYPE] == "control").to_numpy(), feats


CFG = {"n_components": 4, "center_scale": True, "fit_on": "all", "ica": "picard"}


def transform_options(seed: int = 0, **transforms: Any) -> TransformOptions:
    """The fit's options of a validated config whose ``transforms`` section holds ``transforms``."""
    return TransformOptions.from_config(validate_config({"transforms": transforms, "seed": seed}))


# ---------------------------------------------------------------- whitening


def test_whitening_gives_identity_covariance(rng):
    X = rng.normal(size=(3000, 8)) @ rng.normal(size=(8, 8)) + 5.0
    w = PCAWhitener(n_components=8, eps=1e-6).fit(X)
    Z = w.transform(X)
    lam = w.explained_variance_
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(np.cov(Z.T), np.diag(lam / (lam + 1e-6)), atol=1e-9)
    Z0 = PCAWhitener(n_components=8, eps=0.0).fit(X).transform(X)
    np.testing.assert_allclose(np.cov(Z0.T), np.eye(8), atol=1e-9)
    assert np.all(np.diff(lam) <= 0)


def test_float32_in_float32_out(rng):
    X = rng.normal(size=(500, 6)).astype(np.float32)
    w = PCAWhitener(n_components=3).fit(X)
    assert w.transform(X).dtype == np.float32
    assert w.transform(X.astype(np.float64)).dtype == np.float64


def test_component_count_by_integer_and_fraction(rng):
    sd = np.sqrt([10, 8, 6, 4] + [0.02] * 16)  # top 3 explain 0.85, top 4 explain 0.99
    X = (rng.normal(size=(6000, 20)) * sd) @ ortho_group.rvs(20, random_state=3)
    assert PCAWhitener(n_components=7).fit(X).n_components_ == 7
    fit = PCAWhitener(n_components=0.9).fit(X)
    assert fit.n_components_ == 4
    assert fit.explained_variance_ratio_.sum() >= 0.9
    assert PCAWhitener(n_components=0.8).fit(X).n_components_ == 3
    assert PCAWhitener(n_components="parallel", seed=0).fit(X).n_components_ == 4


def test_parallel_analysis_finds_planted_components(rng):
    X = planted(3000, 30, 6, rng)
    k, observed, threshold = parallel_analysis(X, seed=0)
    assert k == 6
    assert np.all(observed[:6] > threshold[:6]) and observed[6] <= threshold[6]
    assert parallel_analysis(X, seed=0)[0] == k  # seeded
    # a smaller subsample than the data still finds them
    assert parallel_analysis(X, seed=1, max_samples=1500)[0] == 6
    noise = rng.normal(size=(2000, 15))
    assert parallel_analysis(noise, seed=0)[0] == 1  # nothing above the floor: at least one


def test_too_few_samples_or_features_for_components(rng):
    with pytest.raises(ValueError, match="at most min"):
        PCAWhitener(n_components=8).fit(rng.normal(size=(100, 5)))
    with pytest.raises(ValueError, match="5 samples"):
        PCAWhitener(n_components=6).fit(rng.normal(size=(5, 20)))
    with pytest.raises(ValueError, match="fraction"):
        PCAWhitener(n_components=1.5).fit(rng.normal(size=(50, 5)))
    with pytest.raises(ValueError, match="parallel"):
        PCAWhitener(n_components="all").fit(rng.normal(size=(50, 5)))


def test_non_finite_features_are_named(rng):
    X = rng.normal(size=(50, 5))
    X[7, 3] = np.nan
    with pytest.raises(ScreenError, match=r"feature 3"):
        PCAWhitener(n_components=2).fit(X)


# ---------------------------------------------------------------- rotations


@pytest.mark.parametrize("method", ["picard", "fastica"])
def test_ica_recovers_orthogonally_mixed_sources(method, rng):
    S = independent_sources(4000, rng)
    X = S @ ortho_group.rvs(6, random_state=7).T * 2.0 + 1.0
    Z = PCAWhitener(n_components=6).fit(X).transform(X)
    ica = ICARotation(method=method, seed=0).fit(Z)
    assert ica.converged_ and ica.n_iter_ > 0
    Y = ica.transform(Z)
    corr = np.abs(np.corrcoef(Y.T, S.T)[:6, 6:])
    rows, cols = linear_sum_assignment(-corr)
    assert corr[rows, cols].min() > 0.95
    # orthogonal: the whitened covariance stays the identity
    np.testing.assert_allclose(ica.rotation_ @ ica.rotation_.T, np.eye(6), atol=1e-12)
    np.testing.assert_allclose(np.cov(Y.T), np.eye(6), atol=1e-5)  # identity within eps


@pytest.mark.parametrize("method", ["picard", "fastica"])
def test_ica_non_convergence_is_reported(method, rng, caplog):
    Z = PCAWhitener(n_components=6).fit_transform(independent_sources(2000, rng) @ rng.normal(size=(6, 6)))
    with caplog.at_level(logging.WARNING, logger="phenoica.transforms"):
        ica = ICARotation(method=method, max_iter=1, tol=1e-12, seed=0).fit(Z)
    assert ica.converged_ is False
    assert any("did not converge" in r.getMessage() for r in caplog.records)
    np.testing.assert_allclose(ica.rotation_ @ ica.rotation_.T, np.eye(6), atol=1e-12)


def test_ica_subsample_is_seeded(rng):
    Z = PCAWhitener(n_components=6).fit_transform(independent_sources(3000, rng) @ rng.normal(size=(6, 6)))
    a = ICARotation(seed=3, max_samples=1000).fit(Z)
    b = ICARotation(seed=3, max_samples=1000).fit(Z)
    assert a.n_samples_fit_ == 1000
    np.testing.assert_array_equal(a.rotation_, b.rotation_)


def test_random_rotation_orthogonal_and_seeded(rng):
    Z = rng.normal(size=(10, 9))
    r1, r2, r3 = (RandomRotation(seed=s).fit(Z) for s in (4, 4, 5))
    np.testing.assert_allclose(r1.rotation_ @ r1.rotation_.T, np.eye(9), atol=1e-12)
    np.testing.assert_array_equal(r1.rotation_, r2.rotation_)
    assert not np.allclose(r1.rotation_, r3.rotation_)
    np.testing.assert_allclose(r1.transform(Z), Z @ r1.rotation_.T)


# ---------------------------------------------------------------- center-scale


def test_center_scale_uses_each_batch_controls(rng):
    X = np.vstack([rng.normal(3, 2, (40, 4)), rng.normal(-1, 0.5, (30, 4))])
    batches = np.array(["A"] * 40 + ["B"] * 30)
    ctrl = np.arange(70) % 2 == 0
    cs = CenterScale().fit(X, batches, ctrl)
    out = cs.transform(X, batches)
    for b in "AB":
        rows = (batches == b) & ctrl
        np.testing.assert_allclose(out[rows].mean(axis=0), 0, atol=1e-12)
        np.testing.assert_allclose(out[rows].std(axis=0, ddof=1), 1, atol=1e-12)
    assert cs.n_controls_.tolist() == [20, 15]


def test_center_scale_unseen_batch_uses_its_own_controls_without_refit(rng):
    X = rng.normal(size=(40, 3))
    batches, ctrl = np.array(["A"] * 20 + ["B"] * 20), np.arange(40) % 2 == 0
    cs = CenterScale().fit(X, batches, ctrl)
    mean_before = cs.mean_.copy()
    Xn = rng.normal(10, 4, size=(12, 3))
    cn = np.arange(12) < 6
    out = cs.transform(Xn, np.array(["C"] * 12), cn)
    expected = (Xn - Xn[cn].mean(axis=0)) / Xn[cn].std(axis=0, ddof=1)
    np.testing.assert_allclose(out, expected)
    assert cs.batches_.tolist() == ["A", "B"]
    np.testing.assert_array_equal(cs.mean_, mean_before)
    with pytest.raises(ValueError, match="'C' was not seen"):
        cs.transform(Xn, np.array(["C"] * 12))


def test_center_scale_errors_name_batch_and_columns(rng):
    X = rng.normal(size=(20, 3))
    batches = np.array(["A"] * 10 + ["B"] * 10)
    with pytest.raises(ScreenError, match=r"batch 'B': 1 control"):
        CenterScale().fit(X, batches, np.arange(20) < 11)
    with pytest.raises(ScreenError, match=r"batch 'B': 0 control"):
        CenterScale().fit(X, batches, np.arange(20) < 10)
    X[:, 1] = 2.0
    with pytest.raises(ScreenError, match=r"\['emb_0001'\] are constant"):
        CenterScale().fit(X, batches, np.arange(20) % 2 == 0, feature_names=["emb_0000", "emb_0001", "emb_0002"])


# ---------------------------------------------------------------- variants and I/O


def test_variants_share_whitening_and_round_trip(tmp_path):
    X, b, c, names = split(make_profiles())
    fitted = fit_variants(["base", "pca", "pca_ica", "pca_rand"], X, b, c, transform_options(**CFG), names)
    pca = fitted["pca"].transform(X, b, c)
    np.testing.assert_array_equal(fitted["base"].transform(X), X)
    np.testing.assert_allclose(fitted["pca_rand"].transform(X, b, c), pca @ fitted["pca_rand"].rotation.rotation_.T)
    np.testing.assert_allclose(fitted["pca_ica"].transform(X, b, c), pca @ fitted["pca_ica"].rotation.rotation_.T)
    for variant, vt in fitted.items():
        path = vt.save(tmp_path / f"{variant}.npz")
        again = VariantTransform.load(path)
        np.testing.assert_array_equal(again.transform(X, b, c), vt.transform(X, b, c))
        assert again.feature_names_out == vt.feature_names_out
        assert again.fit_report == vt.fit_report
        assert json.loads(path.with_suffix(".json").read_text())["variant"] == variant
    assert fitted["pca"].feature_names_out == ["comp_0000", "comp_0001", "comp_0002", "comp_0003"]
    assert fitted["pca_ica"].fit_report["ica"]["converged"]


def test_new_batch_is_not_refitted(tmp_path):
    table = make_profiles(n_batches=3)
    train, new = table[table[BATCH] != "B3"], table[table[BATCH] == "B3"]
    X, b, c, names = split(train)
    vt = fit_variants(["pca_ica"], X, b, c, transform_options(**CFG), names)["pca_ica"]
    steps = (vt.center_scale, vt.whitener, vt.rotation)
    before = [{k: np.copy(v) for k, v in vars(s).items() if k.endswith("_")} for s in steps]
    Xn, bn, cn, _ = split(new)
    out = vt.transform(Xn, bn, cn)
    for s, snap in zip(steps, before):
        for k, v in snap.items():
            np.testing.assert_array_equal(getattr(s, k), v)
    scaled = (Xn - Xn[cn].mean(axis=0)) / Xn[cn].std(axis=0, ddof=1)
    expected = vt.rotation.transform(vt.whitener.transform(scaled))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_fit_on_controls_and_seed(rng):
    X, b, c, names = split(make_profiles())
    on_ctrl = fit_variants(["pca_rand"], X, b, c, transform_options(**{**CFG, "fit_on": "controls"}), names)["pca_rand"]
    assert on_ctrl.fit_report["n_samples_fit"] == int(c.sum())
    other = fit_variants(["pca_rand"], X, b, c, transform_options(1, **{**CFG, "fit_on": "controls"}), names)[
        "pca_rand"
    ]
    assert not np.allclose(on_ctrl.rotation.rotation_, other.rotation.rotation_)


def test_fit_transforms_and_apply_on_tables(tmp_path):
    table = make_profiles()
    cfg = {"variants": ["base", "pca", "pca_ica", "pca_rand"], "n_components": "parallel", "ica": "fastica"}
    paths = fit_transforms(table, transform_options(**cfg), tmp_path)
    assert sorted(paths) == ["base", "pca", "pca_ica", "pca_rand"]
    report = json.loads((tmp_path / "fit_report.json").read_text())
    assert report["pca"]["n_components"] == 4  # the 4 planted sources, by parallel analysis
    assert report["pca_ica"]["ica"]["method"] == "fastica"
    new = make_profiles(n_batches=1, seed=5)  # batch "B1" of another screen: known name, fitted stats
    for variant, path in paths.items():
        out = apply_transform(table, path)
        assert list(out.columns[:5]) == list(table.columns[:5])
        pd.testing.assert_frame_equal(out.iloc[:, :5], table.iloc[:, :5])
        feats = out.columns[5:]
        assert all(out[f].dtype == np.float32 for f in feats)
        assert feats[0] == ("emb_0000" if variant == "base" else "comp_0000")
        assert len(apply_transform(new, path)) == len(new)
    pca = apply_transform(table, paths["pca"]).iloc[:, 5:].to_numpy(np.float64)
    np.testing.assert_allclose(np.cov(pca.T), np.eye(4), atol=1e-3)


def test_table_errors_name_columns(tmp_path):
    table = make_profiles()
    bad = table.copy()
    bad.loc[5, "emb_0003"] = np.inf
    with pytest.raises(ScreenError, match="emb_0003"):
        fit_transforms(bad, transform_options(**CFG), tmp_path)
    flat = table.copy()
    flat["emb_0007"] = np.float32(1.0)
    with pytest.raises(ScreenError, match=r"emb_0007.*constant"):
        fit_transforms(flat, transform_options(**CFG), tmp_path)
    paths = fit_transforms(table, transform_options(**{**CFG, "variants": ["pca"]}), tmp_path)
    with pytest.raises(ScreenError, match="missing \\['emb_0002'\\]"):
        apply_transform(table.drop(columns="emb_0002"), paths["pca"])
    no_ctrl = make_profiles(n_batches=1, seed=3).assign(**{BATCH: "B9", PERT_TYPE: "perturbation"})
    with pytest.raises(ScreenError, match="batch 'B9': 0 control"):
        apply_transform(no_ctrl, paths["pca"])


# ---------------------------------------------------------------- streaming


def saved(folder) -> dict[str, dict[str, np.ndarray]]:
    """variant -> saved arrays (the fitted matrices) of a fit_transforms output folder."""
    out = {}
    for path in sorted(folder.glob("*.npz")):
        with np.load(path) as npz:
            out[path.stem] = {k: npz[k] for k in npz.files if k != "__meta__"}
    return out


@pytest.mark.parametrize("fit_on", ["all", "controls"])
def test_fit_streamed_from_parquet_equals_the_in_memory_fit(tmp_path, fit_on):
    table = make_profiles(n_batches=3, per_batch=300)
    table.to_parquet(tmp_path / "profiles.parquet")
    # subsamples smaller than the fit rows, so both are collected across row batches
    cfg = {"n_components": "parallel", "fit_on": fit_on, "parallel_max_samples": 250, "ica_max_samples": 200}
    fit_transforms(table, transform_options(**cfg), tmp_path / "memory")
    fit_transforms(tmp_path / "profiles.parquet", transform_options(**cfg, batch_rows=97), tmp_path / "streamed")
    memory, streamed = saved(tmp_path / "memory"), saved(tmp_path / "streamed")
    assert sorted(memory) == ["base", "pca", "pca_ica", "pca_rand"]
    for variant, arrays in memory.items():
        assert sorted(arrays) == sorted(streamed[variant])
        for key, value in arrays.items():
            if value.dtype.kind == "f":
                np.testing.assert_allclose(
                    streamed[variant][key], value, rtol=1e-8, atol=1e-12, err_msg=f"{variant} {key}"
                )
            else:
                np.testing.assert_array_equal(streamed[variant][key], value)
    reports = [json.loads((tmp_path / d / "fit_report.json").read_text()) for d in ("memory", "streamed")]
    assert reports[0]["pca"]["n_components"] == reports[1]["pca"]["n_components"] == 4
    assert reports[0]["pca_ica"]["ica"]["n_samples"] == reports[1]["pca_ica"]["ica"]["n_samples"] == 200
    assert reports[1]["pca"]["n_samples_fit"] == (300 if fit_on == "controls" else 900)


def test_moments_merge_blocks_without_losing_precision(rng):
    X = rng.normal(size=(5000, 6)) @ rng.normal(size=(6, 6)) + 1e6  # far from zero
    moments = Moments(6)
    for lo, hi in [(0, 1), (1, 700), (700, 701), (701, 5000)]:  # uneven blocks
        moments.update(X[lo:hi])
    np.testing.assert_allclose(moments.mean, X.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(moments.covariance(), np.cov(X.T), rtol=1e-9)
    naive = (X.T @ X - len(X) * np.outer(X.mean(axis=0), X.mean(axis=0))) / (len(X) - 1)  # raw sums of squares
    assert not np.allclose(naive, np.cov(X.T), rtol=1e-6)  # what the pairwise merge avoids
    diagonal = Moments(6, full=False).update(X[:2500]).update(X[2500:])
    np.testing.assert_allclose(diagonal.covariance(), X.var(axis=0, ddof=1), rtol=1e-9)


def test_row_sample_collects_the_rows_drawn_up_front(rng):
    X = rng.normal(size=(1000, 3))
    sample = RowSample(1000, 120, seed=7)
    for lo in range(0, 1000, 333):
        sample.add(X[lo : lo + 333])
    expected = np.sort(np.random.default_rng(7).choice(1000, size=120, replace=False))
    np.testing.assert_array_equal(sample.rows(), X[expected])
    everything = RowSample(50, 120, seed=7)
    everything.add(X[:50])
    np.testing.assert_array_equal(everything.rows(), X[:50])
    short = RowSample(1000, 120, seed=7)
    short.add(X[:10])
    with pytest.raises(ValueError, match="saw 10 of the 1000 rows"):
        short.rows()


def test_a_models_variants_applied_in_one_call_are_the_files_of_one_call_each(tmp_path):
    """apply_transform_files (one apply_transform job per model) writes each variant's table
    byte for byte as apply_transform_file alone does."""
    table = make_profiles(n_batches=2)
    table.to_parquet(tmp_path / "profiles.parquet")
    paths = fit_transforms(table, transform_options(**{**CFG, "variants": ["base", "pca", "pca_ica"]}), tmp_path)
    together = {v: tmp_path / "together" / f"{v}.parquet" for v in paths}
    rows = apply_transform_files(tmp_path / "profiles.parquet", paths, together, batch_rows=64)
    assert rows == {v: len(table) for v in paths}
    for variant, path in paths.items():
        alone = tmp_path / "alone" / f"{variant}.parquet"
        apply_transform_file(tmp_path / "profiles.parquet", path, alone, batch_rows=64)
        assert together[variant].read_bytes() == alone.read_bytes(), variant
    with pytest.raises(ValueError, match="differ"):
        apply_transform_files(tmp_path / "profiles.parquet", paths, {"base": tmp_path / "b.parquet"})


def test_apply_streams_a_parquet_and_scales_an_unseen_batch_on_all_its_controls(tmp_path):
    table = make_profiles(n_batches=2)
    paths = fit_transforms(table, transform_options(**{**CFG, "variants": ["base", "pca_ica"]}), tmp_path)
    new = make_profiles(n_batches=1, per_batch=400, seed=8).assign(**{BATCH: "B7"})  # unseen at fit
    profiles = pd.concat([table, new], ignore_index=True)
    profiles.to_parquet(tmp_path / "profiles.parquet")
    for variant, path in paths.items():
        out = tmp_path / f"{variant}.parquet"
        assert apply_transform_file(tmp_path / "profiles.parquet", path, out, batch_rows=64) == len(profiles)
        meta = pq.ParquetFile(out).metadata
        assert max(meta.row_group(i).num_rows for i in range(meta.num_row_groups)) == 64
        got = pd.read_parquet(out)
        pd.testing.assert_frame_equal(got, apply_transform(profiles, path))
        pd.testing.assert_frame_equal(got.iloc[:, :5], profiles.iloc[:, :5])
    # B7's 134 controls span three row batches; its statistics are those of all of them
    X, b, c, _ = split(new)
    vt = load_transform(paths["pca_ica"])
    scaled = (X - X[c].mean(axis=0)) / X[c].std(axis=0, ddof=1)
    expected = vt.rotation.transform(vt.whitener.transform(scaled))
    got = pd.read_parquet(tmp_path / "pca_ica.parquet").iloc[len(table) :, 5:].to_numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    saved_state = saved(tmp_path)["pca_ica"]
    assert saved_state["center_scale.batches_"].tolist() == ["B1", "B2"]  # nothing refitted


def test_streamed_fit_errors_name_the_file_and_columns(tmp_path):
    table = make_profiles()
    bad = table.copy()
    bad.loc[650, "emb_0004"] = np.nan  # in the last row batch
    bad.to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(ScreenError, match=r"bad.parquet: non-finite.*\['emb_0004'\]"):
        fit_transforms(tmp_path / "bad.parquet", transform_options(**CFG, batch_rows=100), tmp_path / "t")
    table.drop(columns=[PERT_TYPE]).to_parquet(tmp_path / "noctrl.parquet")
    with pytest.raises(ScreenError, match=r"noctrl.parquet: missing column\(s\) \['Metadata_PertType'\]"):
        fit_transforms(tmp_path / "noctrl.parquet", transform_options(**CFG), tmp_path / "t")
    assert not (tmp_path / "t").exists()


# ---------------------------------------------------------------- public streaming API


def test_partial_fit_and_finalize_equal_fit(rng):
    X, b, c, names = split(make_profiles(n_batches=3, per_batch=300))
    blocks = [slice(lo, lo + 131) for lo in range(0, len(X), 131)]  # blocks that straddle batches
    scaler = CenterScale()
    for rows in blocks:
        scaler.partial_fit(X[rows], b[rows], c[rows], names)
    scaler.finalize(names)
    whole = CenterScale().fit(X, b, c, names)
    for attr in ("batches_", "n_controls_"):
        np.testing.assert_array_equal(getattr(scaler, attr), getattr(whole, attr))
    for attr in ("mean_", "scale_"):  # blocks merged pairwise: equal up to float64 rounding
        np.testing.assert_allclose(getattr(scaler, attr), getattr(whole, attr), rtol=1e-13, atol=1e-13)
    Xs = whole.transform(X, b)
    for rule in (3, 0.8, "parallel"):
        streamed = PCAWhitener(n_components=rule, seed=4, parallel_max_samples=400)
        for rows in blocks:
            streamed.partial_fit(Xs[rows], n_total=len(Xs))
        streamed.finalize()
        fitted = PCAWhitener(n_components=rule, seed=4, parallel_max_samples=400).fit(Xs)
        assert streamed.n_components_ == fitted.n_components_
        np.testing.assert_allclose(streamed.whitening_, fitted.whitening_, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(streamed.mean_, fitted.mean_, rtol=1e-12, atol=1e-12)
    # the fitted attributes are public; the accumulated state is dropped by finalize
    assert not any(k.startswith("_") and v is not None for k, v in vars(streamed).items())


def test_streaming_api_errors_say_what_is_missing(rng):
    X = rng.normal(size=(60, 4))
    with pytest.raises(ValueError, match="pass n_total"):
        PCAWhitener(n_components="parallel").partial_fit(X)
    w = PCAWhitener(n_components="parallel").partial_fit(X[:30], n_total=60)
    with pytest.raises(ValueError, match="saw 30 of the 60 rows|30 rows were added, n_total announced 60"):
        w.finalize()
    with pytest.raises(ValueError, match="no rows were added"):
        PCAWhitener(n_components=2).finalize()
    with pytest.raises(ValueError, match="no rows were added"):
        CenterScale().finalize()
    w = PCAWhitener(n_components=2).partial_fit(X)
    with pytest.raises(ValueError, match="has 3 features"):
        w.partial_fit(X[:, :3])


def test_unseen_batches_extend_a_copy_of_center_scale(rng):
    X = rng.normal(size=(40, 3))
    batches, ctrl = np.array(["A"] * 20 + ["B"] * 20), np.arange(40) % 2 == 0
    cs = CenterScale().fit(X, batches, ctrl)
    assert cs.unseen(np.array(["B", "C", "A", "C"])) == ["C"]
    from phenoica.transforms._accumulators import BatchMoments

    Xn = rng.normal(5, 2, size=(10, 3))
    own = BatchMoments(3).update(Xn, np.array(["C"] * 10), np.arange(10) < 5, only={"C"})
    wider = cs.with_batches(own, ["C"])
    assert wider.batches_.tolist() == ["A", "B", "C"] and cs.batches_.tolist() == ["A", "B"]
    np.testing.assert_allclose(
        wider.transform(Xn, np.array(["C"] * 10)), cs.transform(Xn, np.array(["C"] * 10), np.arange(10) < 5)
    )


def test_transform_options_hold_the_schema_defaults_and_the_door_checks_them():
    """A fit's options are the schema's defaults where the config is silent; the rows per batch
    are no part of the params, every other key is; a value the schema rejects (or an unknown
    key) is refused at the door, before any fit."""
    props = load_schema()["properties"]["transforms"]["properties"]
    options = transform_options()
    for name, setting in settings_of(TransformOptions).items():
        section, _, key = setting.key.partition(".")
        expected = props[key]["default"] if section == "transforms" else 0
        assert getattr(options, name) == expected, name
    assert transform_options(n_components=8).n_components == 8 and transform_options(7).seed == 7
    assert repr(transform_options(batch_rows=7)) == repr(options) and "batch_rows" not in repr(options)
    for change in ({"ica_max_iter": 7}, {"fit_on": "controls"}, {"variants": ["pca"]}, {"tvn_coral_eps": 0.1}):
        assert repr(transform_options(**change)) != repr(options), change
    assert repr(transform_options(1)) != repr(options)
    for bad, message in (
        ({"ica": "jade"}, r"transforms.ica: 'jade' is not one of \['picard', 'fastica'\]"),
        ({"parallel_max_samples": 2}, r"transforms.parallel_max_samples: 2 is less than the minimum of 3"),
        ({"center_scale": "yes"}, "transforms.center_scale: 'yes' is not of type 'boolean'"),
        ({"n_components": "all"}, "transforms.n_components"),
        ({"batch_rows": 0}, r"transforms.batch_rows: 0 is less than the minimum of 1"),
        ({"n_component": 3}, "'n_component' was unexpected"),
    ):
        with pytest.raises(ConfigError, match=message):
            transform_options(**bad)


def test_every_random_choice_of_a_fit_has_its_derived_seed():
    X, b, c, names = split(make_profiles())
    seeds = variant_seeds(3)
    assert seeds == {p: derive_seed(3, "variants", p) for p in ("whiten", "ica_rows", "ica", "rand", "tvn")}
    fitted = fit_variants(
        ["pca_ica", "pca_rand"], X, b, c, transform_options(3, **{**CFG, "n_components": "parallel"}), names
    )
    k = fitted["pca_rand"].whitener.n_components_
    np.testing.assert_array_equal(
        fitted["pca_rand"].rotation.rotation_, RandomRotation(seeds["rand"]).draw(k).rotation_
    )
    assert fitted["pca_ica"].whitener.seed == seeds["whiten"] and fitted["pca_ica"].rotation.seed == seeds["ica"]


# --------------------------------------------------------------------------- component rules


def test_noise_edge_is_the_marchenko_pastur_edge_for_equal_variances():
    from phenoica.transforms._components import noise_edge

    for s, aspect in ((1.0, 0.25), (2.5, 0.01), (0.3, 1.0)):
        assert noise_edge(np.full(40, s), aspect) == pytest.approx(s * (1 + np.sqrt(aspect)) ** 2, rel=1e-6)
    # unequal variances push the edge above the equal-variance edge of their mean
    assert noise_edge(np.r_[np.full(20, 0.5), np.full(20, 1.5)], 0.1) > (1 + np.sqrt(0.1)) ** 2


def _screen_rows(tmp_path, screen):
    from phenoica.screen import write_known_truth_screen

    out = write_known_truth_screen(tmp_path / screen, 0, screen)
    t = pd.concat([pd.read_parquet(f) for f in out["files"]], ignore_index=True)
    return np.stack(t["vector"]), t["Metadata_Batch"].to_numpy(), (t["Metadata_PertType"] == "control").to_numpy()


def test_deflated_rule_keeps_every_source_and_is_not_shadowed_by_cell_state(tmp_path):
    """Known answer: the positive control mixes 20 sources; 'deflated' keeps exactly 20. When
    cell-state variation holds most of the variance, parallel analysis's permutation floor
    rises over the biology and keeps far fewer; the deflated floor does not."""
    counts = {}
    for screen in ("positive_control", "cell_state"):
        X, b, c = _screen_rows(tmp_path, screen)
        for rule in ("deflated", "parallel"):
            fitted = fit_variants(["pca"], X, b, c, transform_options(n_components=rule))
            counts[screen, rule] = fitted["pca"].whitener.n_components_
            assert fitted["pca"].fit_report["n_components_rule"] == rule
    assert counts["positive_control", "deflated"] == 20
    assert counts["cell_state", "deflated"] >= 16 > counts["cell_state", "parallel"] + 5


def test_component_rules_bad_input(rng):
    """A rule keeping < 2 components names the rule and the leading eigenvalues; a count above
    the numerical rank is an error naming the rank; a count below 2 is refused by the one check
    of the value that the config and a fit share."""
    with pytest.raises(ValueError, match=r"rule 'deflated' keeps [01] component.*leading eigenvalues \[[0-9.]+, "):
        PCAWhitener("deflated").fit(rng.normal(size=(400, 8)))
    with pytest.raises(ValueError, match=r"rule 'parallel' keeps 1 component.*leading eigenvalues"):
        PCAWhitener("parallel", seed=0).fit(rng.normal(size=(400, 8)))
    low_rank = rng.normal(size=(200, 3)) @ rng.normal(size=(3, 10))
    with pytest.raises(ValueError, match=r"n_components=6.*numerical rank 3"):
        PCAWhitener(6).fit(low_rank)
    assert PCAWhitener(0.999999999).fit(low_rank).n_components_ == 3  # a rule is capped at the rank
    for bad in (-2, 0, 1, True):
        with pytest.raises(ValueError, match=rf"n_components is {bad!r}; expected an integer >= 2 \(a rule keeping"):
            PCAWhitener(bad).fit(low_rank)
    X, b, c, names = split(make_profiles())  # a count the door never sees (the sweep's, a library call's)
    with pytest.raises(ValueError, match=r"n_components is -1; expected an integer >= 2"):
        fit_variants(["pca"], X, b, c, transform_options()._replace(n_components=-1), names)
    for bad in (1, 1.0, 1.5, "all"):  # the config refuses what a fit refuses, with the same words
        with pytest.raises(ConfigError) as refused:
            validate_config({"transforms": {"n_components": bad}})
        with pytest.raises(ValueError) as failed:
            PCAWhitener(bad).fit(low_rank)
        assert str(refused.value) == f"invalid configuration: transforms.{failed.value}", bad
