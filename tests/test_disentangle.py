"""Study "disentangle" (PAPER.md Table 2): loaders, procedural data, models, scores, report."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from scipy.stats import chi2_contingency, ortho_group

from phenoica.studies import disentangle as dis
from phenoica.studies import factor_data as fd

torch.set_num_threads(1)

SETTINGS = {
    "device": "cpu", "latent_dim": 6, "steps": 40, "batch_size": 32, "lr": 1e-3, "n_eval": 200, "eval_seed": 0,
    "beta_vae_beta": 4.0, "beta_tcvae_beta": 6.0, "bioae_nonneg": 1.0, "bioae_activity": 0.01, "bioae_weight": 1e-4,
    "ica": {"method": "picard", "n_components": None},
    "metrics": {"n_neighbors": 10, "n_bins": 20, "infoe_max_iter": 300},
}


@pytest.fixture(scope="module")
def tiny() -> fd.FactorDataset:
    return fd.procedural_dataset(n_images=600, image_size=16, seed=3)


# --------------------------------------------------------------------------- procedural data


def test_procedural_is_seeded_and_rendered_from_its_factors():
    a = fd.procedural_dataset(300, 32, seed=1)
    b = fd.procedural_dataset(300, 32, seed=1)
    c = fd.procedural_dataset(300, 32, seed=2)
    assert np.array_equal(a.images, b.images) and np.array_equal(a.factors, b.factors)
    assert not np.array_equal(a.factors, c.factors)
    assert np.array_equal(fd.render_shapes(a.factors, 32), a.images)
    assert a.images.shape == (300, 32, 32, 3) and a.sizes == tuple(fd.PROCEDURAL_FACTORS.values())


def test_procedural_factors_are_recoverable_from_the_image():
    # every distinct factor combination (hue fixed) renders to a distinct image
    sizes = list(fd.PROCEDURAL_FACTORS.values())
    combos = np.array(list(itertools.product(*[range(k) for k in sizes[:-2]], [2], [1])))
    images = fd.render_shapes(combos, 32).reshape(len(combos), -1)
    assert np.unique(images, axis=0).shape[0] == len(combos)
    # and each hue changes the image too
    other = combos.copy()
    other[:, -2:] = [4, 3]
    assert (fd.render_shapes(other[:50], 32) != fd.render_shapes(combos[:50], 32)).any(axis=(1, 2, 3)).all()


def test_procedural_factors_are_independent():
    ds = fd.procedural_dataset(4000, 16, seed=0)
    for i, j in itertools.combinations(range(ds.factors.shape[1]), 2):
        table = pd.crosstab(ds.factors[:, i], ds.factors[:, j]).to_numpy()
        assert chi2_contingency(table).pvalue > 1e-4, (ds.factor_names[i], ds.factor_names[j])
    for k, size in enumerate(ds.sizes):
        assert set(np.unique(ds.factors[:, k])) == set(range(size))


def test_render_rejects_out_of_range_codes():
    with pytest.raises(ValueError, match="codes must lie"):
        fd.render_shapes(np.array([[3, 0, 0, 0, 0, 0, 0]]))


# --------------------------------------------------------------------------- loaders


def _labels_shapes3d(n: int, rng: np.random.Generator) -> np.ndarray:
    grids = [np.linspace(0, 0.9, 10), np.linspace(0, 0.9, 10), np.linspace(0, 0.9, 10),
             np.linspace(0.75, 1.25, 8), np.arange(4.0), np.linspace(-30, 30, 15)]
    return np.stack([g[rng.integers(0, g.size, n)] for g in grids], axis=1)


def test_shapes3d_round_trip_and_errors(tmp_path):
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (20, 64, 64, 3), dtype=np.uint8)
    labels = _labels_shapes3d(20, rng)
    path = tmp_path / "3dshapes.h5"
    with h5py.File(path, "w") as h5:
        h5["images"], h5["labels"] = images, labels
    ds = fd.load_shapes3d(path)
    assert len(ds) == 20 and ds.sizes == fd.SHAPES3D_SIZES
    for k in range(6):  # codes keep the order of the label values
        assert np.array_equal(np.unique(labels[:, k], return_inverse=True)[1].ravel(), ds.factors[:, k])
    assert np.allclose(ds.batch(np.array([5, 1, 5])), images[[5, 1, 5]].transpose(0, 3, 1, 2) / 255.0)
    sub = fd.load_shapes3d(path, max_images=7, seed=1)
    assert len(sub) == 7 and isinstance(sub.images, np.ndarray)

    bad = tmp_path / "bad.h5"
    with h5py.File(bad, "w") as h5:
        h5["images"] = images
    with pytest.raises(ValueError, match="missing dataset 'labels'"):
        fd.load_shapes3d(bad)
    wrong = tmp_path / "wrong.h5"
    with h5py.File(wrong, "w") as h5:
        h5["images"], h5["labels"] = images[:, :32, :32], labels
    with pytest.raises(ValueError, match=r"\(N, 64, 64, 3\)"):
        fd.load_shapes3d(wrong)
    with pytest.raises(FileNotFoundError, match="3dshapes.h5"):
        fd.load_shapes3d(tmp_path / "absent.h5")


def test_mpi3d_round_trip_and_errors(tmp_path):
    sizes = [1, 2, 1, 1, 1, 2, 3]
    images = np.random.default_rng(0).integers(0, 256, (12, 64, 64, 3), dtype=np.uint8)
    path = tmp_path / "mpi3d.npz"
    np.savez(path, images=images)
    ds = fd.load_mpi3d(path, sizes)
    assert ds.factors.shape == (12, 7)
    assert ds.factors[7].tolist() == list(np.unravel_index(7, sizes))  # row-major index
    assert np.array_equal(ds.images, images)
    with pytest.raises(ValueError, match="imply 460800"):
        fd.load_mpi3d(path)
    np.savez(tmp_path / "nokey.npz", imgs=images)
    with pytest.raises(ValueError, match="key 'images'"):
        fd.load_mpi3d(tmp_path / "nokey.npz", sizes)


@pytest.mark.parametrize("label_format", ["npy", "csv"])
def test_image_folder_round_trip_and_errors(tmp_path, label_format):
    rng = np.random.default_rng(0)
    folder = tmp_path / "images"
    folder.mkdir()
    pixels = []
    for i in range(6):
        colour = rng.integers(0, 256, 3, dtype=np.uint8)
        pixels.append(colour)
        Image.fromarray(np.broadcast_to(colour, (80, 80, 3)).copy()).save(folder / f"{i:06d}.png")
    labels = rng.integers(0, 3, (6, 7)).astype(float) / 2
    label_path = tmp_path / ("train-rec.labels" if label_format == "npy" else "labels.csv")
    if label_format == "npy":
        with open(label_path, "wb") as fh:
            np.save(fh, labels)
    else:
        pd.DataFrame(labels).to_csv(label_path, header=False, index=False)
    ds = fd.load_image_folder("falcor3d", folder, label_path, image_size=64)
    assert ds.images.shape == (6, 64, 64, 3)
    assert all((ds.images[i] == pixels[i]).all() for i in range(6))  # order follows file names
    assert np.array_equal(ds.factors, fd.codes_from_labels(labels, "x"))
    with pytest.raises(ValueError, match=r"\(n_images=6, 9\) for isaac3d"):
        fd.load_image_folder("isaac3d", folder, label_path)


# --------------------------------------------------------------------------- scores


def _discrete_factors(n: int = 500, k: int = 3, levels: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, levels, (n, k)).astype(float)


def test_scores_of_the_factors_are_near_one():
    f = _discrete_factors()
    z = f + np.random.default_rng(1).normal(0, 0.01, f.shape)
    s = dis.score_latents(z, f, SETTINGS, seed=0)
    assert s["infom"] > 0.9 and s["infoc"] > 0.9 and s["infoe"] > 0.9
    assert s["mcc"] > 0.99 and s["r2"] > 0.99 and s["nmi"].shape == (3, 3)


def test_noise_latents_score_near_zero_on_infoe():
    f = _discrete_factors()
    s = dis.score_latents(np.random.default_rng(2).normal(size=(500, 3)), f, SETTINGS, seed=0)
    assert s["infoe"] < 0.05 and s["mcc"] < 0.15


def test_rotation_lowers_infom_and_ica_restores_it():
    f = _discrete_factors()
    noisy = f + np.random.default_rng(5).normal(0, 0.05, f.shape)  # latents are never exactly tied
    rotated = (noisy - noisy.mean(0)) @ ortho_group.rvs(3, random_state=4)
    mixed = dis.score_latents(rotated, f, SETTINGS, seed=0)
    unmixed = dis.score_latents(dis.ica_latents(rotated, None, "picard", seed=0), f, SETTINGS, seed=0)
    assert mixed["infom"] < 0.7
    assert unmixed["infom"] > 0.9 and unmixed["mcc"] > 0.98


# --------------------------------------------------------------------------- models


@pytest.mark.parametrize("model", dis.MODELS)
def test_training_lowers_the_loss(tiny, model):
    net, summary = dis.train_model(model, tiny, SETTINGS, seed=0, device="cpu")
    loss = np.array(summary["loss"])
    assert loss.size == SETTINGS["steps"] and np.isfinite(loss).all()
    assert loss[-5:].mean() < loss[:5].mean()
    assert summary["images_per_s"] > 0
    z = dis.encode(net, tiny, np.arange(10))
    assert z.shape == (10, SETTINGS["latent_dim"])


def test_tc_decomposition_sums_to_the_minibatch_kl():
    torch.manual_seed(0)
    mu, logvar = torch.randn(64, 4), torch.randn(64, 4) * 0.3
    z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
    d = dis.tc_decomposition(z, mu, logvar, dataset_size=1000)
    lq = dis._gaussian_log_density(z, mu, logvar).sum(1)
    lp = dis._gaussian_log_density(z, torch.zeros_like(z), torch.zeros_like(z)).sum(1)
    assert torch.isclose(d["mi"] + d["tc"] + d["dwkl"], (lq - lp).mean(), atol=1e-4)


def test_unknown_model_is_rejected():
    with pytest.raises(ValueError, match="model must be one of"):
        dis.build_model("vqvae", 32, 10)


# --------------------------------------------------------------------------- pipeline + report


def test_summary_table_known_answer():
    rows = []
    for d, shift in (("a", 0.0), ("b", 0.2)):
        for seed, v in zip(range(3), (0.1, 0.2, 0.3)):
            rows.append({"dataset": d, "model": "ae", "seed": seed, **{c: v + shift for c in dis.SCORE_COLUMNS}})
    t = dis.summary_table(pd.DataFrame(rows))
    assert list(t["dataset"]) == ["a", "b", "all"]
    assert np.allclose(t["infom_mean"], [0.2, 0.4, 0.3]) and np.allclose(t["infom_sd"], 0.1)
    assert (t["n_seeds"] == 3).all()


def test_tiny_end_to_end(tiny, tmp_path):
    summary = dis.train_and_encode(tiny, "ae", SETTINGS, 0, tmp_path / "ae" / "latents.npz", tmp_path / "ae" / "model.safetensors")
    assert summary["images_per_s"] > 0
    frames = [dis.evaluate(tmp_path / "ae" / "latents.npz", m, SETTINGS, 0, "procedural", tmp_path / f"{m}.parquet")
              for m in ("ae", "ae_ica")]
    scores = pd.concat(frames, ignore_index=True)
    assert scores[list(dis.SCORE_COLUMNS)].notna().all().all()
    assert np.array(json.loads(scores["nmi"][0])).shape == (7, SETTINGS["latent_dim"])
    written = dis.write_report(scores, tmp_path / "report", SETTINGS)
    for key in ("report_md", "index_html", "table2.csv", "nmi_procedural"):
        assert written[key].exists() and written[key].stat().st_size > 0
    assert "AE + ICA" in written["report_md"].read_text()
    from safetensors.torch import load_file

    weights = load_file(str(tmp_path / "ae" / "model.safetensors"))
    net = dis.build_model("ae", 16, SETTINGS["latent_dim"])
    net.load_state_dict(weights)
    z = dis.read_latents(tmp_path / "ae" / "latents.npz")
    assert np.allclose(dis.encode(net.eval(), tiny, z["index"]), z["latents"], atol=1e-5)
