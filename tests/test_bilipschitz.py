"""Study bilipschitz (Figure 2): B(z) from Jacobians, the alpha parametrization, the isometric
data-generating process, MNIST loading, cross-seed alignment and a tiny end-to-end sweep."""

import gzip
import itertools

import numpy as np
import pandas as pd
import pytest
import torch

from phenoica.contract import validate_config
from phenoica.studies import _plan as plan
from phenoica.studies.bilipschitz import BilipschitzTrainOptions
from phenoica.studies.bilipschitz import _cross_seed as bl_gather
from phenoica.studies.bilipschitz import _data as bl_data
from phenoica.studies.bilipschitz import _measure as bl_measure
from phenoica.studies.bilipschitz import _model as bl_model
from phenoica.studies.bilipschitz import _report as bl_report

torch.set_num_threads(1)


def _linear(W: np.ndarray):
    Wt = torch.tensor(W, dtype=torch.float32)
    return lambda x: Wt @ x


def test_bilipschitz_of_orthogonal_map_is_one():
    Q = bl_data.orthonormal_columns(5, 5, seed=3)
    x = np.random.default_rng(0).standard_normal((7, 5))
    b = bl_measure.bilipschitz(_linear(Q.T), x)
    np.testing.assert_allclose(b, 1.0, atol=1e-5)


def test_bilipschitz_of_diagonal_map_is_ratio_of_extremes():
    x = np.random.default_rng(1).standard_normal((6, 3))
    np.testing.assert_allclose(bl_measure.bilipschitz(_linear(np.diag([1.0, 2.0, 4.0])), x), 4.0, rtol=1e-5)
    # a rectangular (encoder-shaped) map: singular values of the 2 x 3 Jacobian are 3 and 0.5
    W = np.array([[3.0, 0.0, 0.0], [0.0, 0.5, 0.0]])
    np.testing.assert_allclose(bl_measure.bilipschitz(_linear(W), x), 6.0, rtol=1e-5)


def test_bilipschitz_singular_jacobian_is_infinite_and_nonlinear_varies():
    x = np.random.default_rng(2).standard_normal((4, 2))
    assert np.all(np.isinf(bl_measure.bilipschitz(_linear(np.array([[1.0, 0.0], [2.0, 0.0]])), x)))
    # f(x) = (x0, x1^3 + x1): B depends on x1 as (3 x1^2 + 1) for |.| >= 1
    f = lambda v: torch.stack([v[0], v[1] ** 3 + v[1]])
    pts = np.array([[0.0, 0.0], [0.0, 1.0], [5.0, 2.0]])
    np.testing.assert_allclose(bl_measure.bilipschitz(f, pts), [1.0, 4.0, 13.0], rtol=1e-5)


def test_negative_slope_parametrization():
    assert bl_model.negative_slope(0.0) == 1.0 and bl_model.negative_slope(1.0) == 0.0
    assert bl_model.negative_slope(0.25) == pytest.approx(0.75)
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="alpha"):
            bl_model.negative_slope(bad)


def test_alpha_zero_network_is_exactly_linear():
    torch.manual_seed(0)
    ae = bl_model.Autoencoder(6, 3, [16, 16], alpha=0.0, parametrization="none")
    x = np.random.default_rng(0).standard_normal((50, 6)).astype(np.float32)
    b = bl_measure.bilipschitz(ae.encoder, x)
    assert np.all(np.isfinite(b)) and b.max() > 1.0
    np.testing.assert_allclose(b, b[0], rtol=1e-5)  # one constant Jacobian
    xt = torch.from_numpy(x)
    with torch.no_grad():  # affine: f(a + b) - f(0) = (f(a) - f(0)) + (f(b) - f(0))
        f0 = ae(torch.zeros(1, 6))
        lhs = ae(xt[:25] + xt[25:]) - f0
        rhs = (ae(xt[:25]) - f0) + (ae(xt[25:]) - f0)
    torch.testing.assert_close(lhs, rhs, atol=1e-5, rtol=1e-5)
    # a nonlinear alpha gives sample-dependent B(z)
    torch.manual_seed(0)
    b_nl = bl_measure.bilipschitz(bl_model.Autoencoder(6, 3, [16, 16], alpha=0.9, parametrization="none").encoder, x)
    assert np.ptp(b_nl) > 1e-2


def test_orthogonal_layers_make_the_linear_end_an_isometry():
    # a narrowing encoder of semi-orthogonal layers (64 -> 16 -> 16 -> 4): at alpha = 0 the Jacobian
    # has orthonormal rows, so every singular value is 1 and B(z) = 1 exactly, before any training
    x = np.random.default_rng(0).random((40, 64)).astype(np.float32)
    torch.manual_seed(0)
    iso = bl_model.Autoencoder(64, 4, [16, 16], alpha=0.0, parametrization="orthogonal")
    J = bl_measure.jacobians(iso.encoder, torch.from_numpy(x[:5]))
    np.testing.assert_allclose(
        (J @ J.transpose(1, 2)).detach().numpy(), np.broadcast_to(np.eye(4), (5, 4, 4)), atol=1e-5
    )
    np.testing.assert_allclose(bl_measure.bilipschitz(iso.encoder, x), 1.0, atol=1e-4)
    # unconstrained layers at alpha = 0: linear but not isometric
    torch.manual_seed(0)
    free = bl_model.Autoencoder(64, 4, [16, 16], alpha=0.0, parametrization="none")
    assert bl_measure.bilipschitz(free.encoder, x).min() > 1.5
    # with the nonlinearity, each leaky ReLU scales a direction by 1 or 1 - alpha:
    # 1 <= B(z) <= (1 / (1 - alpha))^2 for the two hidden activations, and B varies by sample
    torch.manual_seed(0)
    bent = bl_model.Autoencoder(64, 4, [16, 16], alpha=0.8, parametrization="orthogonal")
    b = bl_measure.bilipschitz(bent.encoder, x)
    assert np.all(b >= 1.0 - 1e-6) and np.all(b <= 25.0 + 1e-3) and np.ptp(b) > 1e-3


def test_freeze_keeps_the_function_and_removes_the_parametrization():
    torch.manual_seed(1)
    ae = bl_model.Autoencoder(10, 3, [8], alpha=0.5, parametrization="orthogonal")
    x = torch.randn(7, 10)
    with torch.no_grad():
        before = ae(x)
        ae.freeze()
        after = ae(x)
    torch.testing.assert_close(before, after)
    assert not any(torch.nn.utils.parametrize.is_parametrized(m) for m in ae.modules())
    w = ae.encoder[0].weight.detach()
    torch.testing.assert_close(w @ w.T, torch.eye(8), atol=1e-5, rtol=0)  # 10 -> 8: orthonormal rows
    with pytest.raises(ValueError, match="parametrization"):
        bl_model.mlp([3, 2], 0.5, parametrization="spectral")


def test_convergence_rule_and_early_stop():
    assert not bl_model.converged([1.0] * 9, window=5, tol=0.01)  # fewer than two windows
    assert bl_model.converged([2.0] * 5 + [1.999] * 5, window=5, tol=0.01)  # 0.05% fall < 1%
    assert not bl_model.converged([2.0] * 5 + [1.5] * 5, window=5, tol=0.01)
    assert bl_model.late_improvement([4.0, 3.0, 2.0, 1.0], fraction=0.25) == pytest.approx(1.0)
    x = np.random.default_rng(0).random((64, 6)).astype(np.float32)
    kw = dict(latent_dim=2, hidden=[8], batch_size=16, lr=1e-2, device="cpu", parametrization="orthogonal")
    full_run = bl_model.TrainSettings(epochs=400, converge_tol=0.0, converge_window=40, **kw)  # 4 steps per epoch
    _, full = bl_model.train_autoencoder(x, 0.0, 0, full_run)
    early_stop = bl_model.TrainSettings(epochs=400, converge_tol=0.01, converge_window=40, **kw)
    _, early = bl_model.train_autoencoder(x, 0.0, 0, early_stop)
    assert len(full) == 400 and 20 <= len(early) < 400 and len(early) % 10 == 0  # checks every 40 steps = 10 epochs
    assert early == full[: len(early)]  # the same run, stopped once converged


def test_isometric_dgp_preserves_distances():
    r, curv = 2.0, 0.5
    data = bl_data.isometric_data(200, latent_dim=3, ambient_dim=9, curvature=curv, seed=4)
    x, z, emb = data["x"].astype(np.float64), data["z"].astype(np.float64), data["embedding"]
    np.testing.assert_allclose(emb.T @ emb, np.eye(6), atol=1e-12)
    # chordal distances follow the arc formula exactly: each coordinate moves along a circle of radius r
    i, j = np.triu_indices(200, 1)
    dz = np.abs(z[i] - z[j])
    chord = np.sqrt(np.sum((2 * r * np.sin(dz / (2 * r))) ** 2, axis=1))
    np.testing.assert_allclose(np.linalg.norm(x[i] - x[j], axis=1), chord, rtol=1e-4, atol=1e-5)
    # local isometry: the generator's Jacobian has orthonormal columns everywhere (B = 1, all s = 1)
    e = torch.from_numpy(emb)
    J = bl_measure.jacobians(lambda v: bl_data.isometric_embed(v, curv, e), torch.from_numpy(z[:20]))
    np.testing.assert_allclose(torch.linalg.svdvals(J).numpy(), 1.0, atol=1e-10)
    # so the length of the image of a straight latent path (the geodesic) equals ||z - z'||
    t = torch.linspace(0, 1, 2001, dtype=torch.float64)[:, None]
    za, zb = torch.from_numpy(z[0]), torch.from_numpy(z[1])
    path = bl_data.isometric_embed(za + t * (zb - za), curv, e)
    length = torch.linalg.norm(path[1:] - path[:-1], dim=1).sum().item()
    assert length == pytest.approx(float(np.linalg.norm(z[0] - z[1])), rel=1e-5)
    # curvature 0 is a global linear isometry
    flat = bl_data.isometric_data(50, 2, 5, 0.0, seed=1)
    d_x = np.linalg.norm(flat["x"][:, None] - flat["x"][None], axis=-1)
    d_z = np.linalg.norm(flat["z"][:, None] - flat["z"][None], axis=-1)
    np.testing.assert_allclose(d_x, d_z, atol=1e-5)


def test_isometric_dgp_rejects_bad_parameters():
    with pytest.raises(ValueError, match="ambient_dim"):
        bl_data.isometric_data(10, 3, 5, 0.5, seed=0)
    with pytest.raises(ValueError, match="curvature"):
        bl_data.isometric_data(10, 2, 4, 3.5, seed=0)


def _idx_bytes(arr: np.ndarray) -> bytes:
    head = bytes([0, 0, 8, arr.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    return head + arr.astype(np.uint8).tobytes()


def test_load_mnist_npz_and_idx(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(5, 28, 28), dtype=np.uint8)
    y = np.array([0, 1, 2, 3, 4], dtype=np.uint8)
    np.savez(tmp_path / "mnist.npz", x_train=x, y_train=y)
    xs, ys = bl_data.load_mnist(tmp_path / "mnist.npz")
    assert xs.shape == (5, 784) and xs.max() <= 1.0
    np.testing.assert_allclose(xs[2], x[2].reshape(-1) / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(ys, y)
    idx = tmp_path / "idx"
    idx.mkdir()
    (idx / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx_bytes(x)))
    (idx / "train-labels-idx1-ubyte").write_bytes(_idx_bytes(y))
    xi, yi = bl_data.load_mnist(idx)
    np.testing.assert_array_equal(xi, xs)
    np.testing.assert_array_equal(yi, ys)


def test_load_mnist_malformed(tmp_path):
    np.savez(tmp_path / "bad.npz", images=np.zeros((2, 28, 28)))
    with pytest.raises(ValueError, match="x_train"):
        bl_data.load_mnist(tmp_path / "bad.npz")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="train-images-idx3-ubyte"):
        bl_data.load_mnist(tmp_path / "empty")
    folder = tmp_path / "corrupt"
    folder.mkdir()
    (folder / "train-images-idx3-ubyte").write_bytes(b"\x00\x00\x09\x03" + bytes(12))
    (folder / "train-labels-idx1-ubyte").write_bytes(_idx_bytes(np.zeros(2)))
    with pytest.raises(ValueError, match="train-images-idx3-ubyte.*IDX"):
        bl_data.load_mnist(folder)
    with pytest.raises(FileNotFoundError, match="nothing is downloaded"):
        bl_data.load_mnist(tmp_path / "missing.npz")


def test_groups_and_labels():
    assert plan.dataset_groups("isometric", [3]) == ["all"]
    assert plan.dataset_groups("digits", [3, 8]) == ["all", "digit3", "digit8"]
    assert plan.parse_group("digit7") == 7 and plan.parse_group("all") is None
    with pytest.raises(ValueError, match="group"):
        plan.parse_group("seven")
    for a in (0.0, 0.3, 0.6, 0.9, 1.0, 0.125):
        assert float(plan.alpha_label(a)) == a


def _runs(latents: dict[int, np.ndarray]) -> pd.DataFrame:
    tables = []
    for seed, lat in latents.items():
        t = pd.DataFrame(
            {
                "dataset": "isometric",
                "group": "all",
                "alpha": 0.5,
                "slope": 0.5,
                "seed": seed,
                "final_loss": 0.1,
                "sample": np.arange(len(lat)),
                "recon_error": 0.1,
                "bilipschitz": np.linspace(1, 2, len(lat)),
            }
        )
        for j in range(lat.shape[1]):
            t[f"z_{j}"] = lat[:, j]
        tables.append(t)
    return pd.concat(tables, ignore_index=True)


def test_pair_alignment_known_answers():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((200, 3))
    rotated = a @ bl_data.orthonormal_columns(3, 3, seed=5) + 2.0
    sheared = a @ np.array([[3.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.2]])
    pairs = bl_gather.pair_alignment(_runs({0: a, 1: rotated, 2: sheared}), train_fraction=0.8, seed=0)
    assert list(zip(pairs["seed_a"], pairs["seed_b"])) == [(0, 1), (0, 2), (1, 2)]
    first = pairs.iloc[0]
    assert first["rigid"] < 1e-10 and first["linear"] < 1e-10
    assert first["b_mean"] == pytest.approx(1.5) and first["b_max"] == pytest.approx(2.0)
    second = pairs.iloc[1]  # a linear but not rigid map: linear exact, rigid not
    assert second["linear"] < 1e-10 and second["rigid"] > 0.01


def _pairs(b_of_alpha, err_of_alpha, seeds=(0, 1, 2, 3), noise=0.0, rng=None):
    rows = []
    for alpha, (b, e) in enumerate(zip(b_of_alpha, err_of_alpha)):
        for sa, sb in itertools.combinations(seeds, 2):
            jitter = rng.normal(0, noise, 2) if rng is not None else (0.0, 0.0)
            rows.append(
                {
                    "dataset": "digits",
                    "group": "all",
                    "alpha": float(alpha),
                    "seed_a": sa,
                    "seed_b": sb,
                    "b_mean": b + jitter[0],
                    "b_max": 10 - b,
                    "rigid": e + jitter[1],
                    "linear": e + jitter[1],
                }
            )
    return pd.DataFrame(rows)


def test_spearman_table_reports_measured_sign_with_intervals():
    pairs = _pairs([1.0, 2.0, 3.0, 4.0], [0.1, 0.2, 0.3, 0.4])
    t = bl_gather.spearman_table(pairs, n_boot=200, seed=0).set_index(["map", "statistic"])
    assert t.loc[("rigid", "b_mean"), "spearman_rho"] == pytest.approx(1.0)
    assert t.loc[("linear", "b_max"), "spearman_rho"] == pytest.approx(-1.0)
    assert set(t["n_pairs"]) == {24}
    # a perfect monotone relation stays perfect in every replicate
    assert t.loc[("rigid", "b_mean"), "ci_low"] == pytest.approx(1.0)
    assert t.loc[("linear", "b_max"), "ci_high"] == pytest.approx(-1.0)


def test_spearman_interval_covers_zero_without_a_relation_and_resamples_models():
    rng = np.random.default_rng(3)
    null = _pairs([1.0] * 5, [0.2] * 5, noise=0.1, rng=rng)
    lo, hi = bl_gather.spearman_interval(null, "b_mean", "rigid", n_boot=300, seed=1)
    assert lo < 0 < hi
    # the same seeds give the same interval; pairs sharing models widen it beyond a pair bootstrap
    assert bl_gather.spearman_interval(null, "b_mean", "rigid", n_boot=300, seed=1) == (lo, hi)
    trend = _pairs([1.0, 1.1, 1.2, 1.3, 1.4], [0.1, 0.12, 0.14, 0.16, 0.18], noise=0.05, rng=rng)
    lo_t, hi_t = bl_gather.spearman_interval(trend, "b_mean", "rigid", n_boot=300, seed=1)
    assert lo_t > 0 and hi_t <= 1.0


def test_training_is_seeded():
    x = np.random.default_rng(0).random((40, 6)).astype(np.float32)
    train = bl_model.TrainSettings(
        latent_dim=2,
        hidden=[8],
        epochs=3,
        batch_size=16,
        lr=1e-2,
        parametrization="orthogonal",
        converge_tol=0.0,
        converge_window=200,
        device="cpu",
    )
    m1, h1 = bl_model.train_autoencoder(x, 0.5, 7, train)
    m2, h2 = bl_model.train_autoencoder(x, 0.5, 7, train)
    m3, _ = bl_model.train_autoencoder(x, 0.5, 8, train)
    assert h1 == h2 and h1[-1] < h1[0]
    xt = torch.from_numpy(x)
    with torch.no_grad():
        torch.testing.assert_close(m1.encoder(xt), m2.encoder(xt))
        assert not torch.allclose(m1.encoder(xt), m3.encoder(xt))


TINY_STUDY = dict(
    datasets=["isometric", "digits"],
    alphas=[0.0, 0.9],
    seeds=[0, 1],
    per_digit=[0],
    n_samples=60,
    latent_dim=3,
    hidden=[8],
    epochs=3,
    converge_tol=0.0,
    converge_window=200,
    batch_size=32,
    lr=1e-2,
    max_jacobian_samples=20,
    train_fraction=0.8,
    device="cpu",
    mnist_path=None,
    parametrization="orthogonal",
    n_bootstrap=50,
    isometric=dict(latent_dim=2, ambient_dim=6, curvature=0.5),
)
CONFIG = validate_config({"bilipschitz": TINY_STUDY, "seed": 0})
TINY = BilipschitzTrainOptions.from_config(CONFIG)


def test_training_settings_of_a_dataset():
    """The isometric dataset's autoencoders take its own latent size; the others take ``latent_dim``."""
    assert bl_model.TrainSettings.from_options(TINY, "isometric").latent_dim == 2
    digits = bl_model.TrainSettings.from_options(TINY, "digits")
    assert (digits.latent_dim, tuple(digits.hidden), digits.epochs, digits.device) == (3, (8,), 3, "cpu")


def test_tiny_sweep_end_to_end(tmp_path):
    files = bl_measure.run_sweep(CONFIG, tmp_path / "study")
    for key in ("report.md", "index.html", "distributions", "identifiability", "reconstruction", "per_digit"):
        assert files[key].exists() and files[key].stat().st_size > 0, key
    pairs = pd.read_csv(tmp_path / "study/tables/pairs.csv")
    # one pair of seeds per (dataset, group, alpha): isometric/all, digits/all, digits/digit0 x 2 alphas
    assert len(pairs) == 6
    assert set(pairs["group"]) == {"all", "digit0"}
    assert np.all((pairs[["rigid", "linear"]].to_numpy() >= 0) & (pairs[["rigid", "linear"]].to_numpy() < 2))
    models = pd.read_csv(tmp_path / "study/tables/models.csv")
    assert len(models) == 12 and np.all(models["b_mean"] >= 1.0)
    assert set(models["n_jacobians"]) == {20}
    # alpha = 0 digits models: orthogonal linear encoders with orthonormal rows (64 -> 8 -> 3), B(z) = 1
    lin = models[(models["alpha"] == 0.0) & (models["dataset"] == "digits")]
    np.testing.assert_allclose(lin["b_max"], 1.0, atol=1e-4)
    np.testing.assert_allclose(lin["b_mean"], 1.0, atol=1e-4)
    assert set(models["epochs_run"]) == {3} and set(models["parametrization"]) == {"orthogonal"}
    rho = pd.read_csv(tmp_path / "study/tables/spearman.csv")
    assert {"ci_low", "ci_high"} <= set(rho.columns)
    text = files["report.md"].read_text()
    assert "Spearman" in text and "figures/identifiability_vs_bilipschitz.png" in text
    # the verdict is computed from the results: it quotes the measured alpha = 0 B of each dataset
    verdict = text.split("## Verdict (measured)", 1)[1].split("##", 1)[0]
    b0 = models[(models["alpha"] == 0.0) & (models["group"] == "all")].groupby("dataset")["b_mean"].mean()
    for ds, value in b0.items():
        assert f"{ds}: mean B(z) {value:.3f} at alpha = 0" in verdict
    assert "<h2>Verdict (measured)</h2>" in files["index.html"].read_text()
    from phenoica.report import _render as render

    linked = render.read_verdict(tmp_path / "study")
    assert linked["title"] == bl_report.TITLE and linked["page"] == str(files["index.html"])
    assert (
        linked["verdict"].startswith("digits: Spearman rho(mean B, rigid error) ")
        and "over 2 seed pairs" in linked["verdict"]
    )


def test_run_model_requires_mnist_path():
    with pytest.raises(ValueError, match="mnist_path"):
        bl_measure.run_model("mnist", "all", 0.5, 0, TINY)
    with pytest.raises(ValueError, match="isometric"):
        bl_data.load_group_data("isometric", "digit3", TINY)


def test_groups_and_labels_the_dag_plans_without_torch():
    import subprocess
    import sys

    from phenoica.studies import _plan as plan

    assert plan.dataset_groups("isometric", [3]) == ["all"]
    assert plan.dataset_groups("digits", [3, 8]) == ["all", "digit3", "digit8"]
    assert plan.parse_group("digit7") == 7 and plan.parse_group("all") is None
    with pytest.raises(ValueError, match="group"):
        plan.parse_group("seven")
    for a in (0.0, 0.3, 0.6, 0.9, 1.0, 0.125):
        assert float(plan.alpha_label(a)) == a
    # building the DAG imports the plan, not the training code
    code = "import sys, phenoica.studies._plan; assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
