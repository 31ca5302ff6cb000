"""Bi-Lipschitz control and identifiability (Nelson et al. 2026 Figure 2, A.3-A.6).

Claim reproduced: the closer an encoder is to an isometry (bi-Lipschitz constant L -> 1),
the more identifiable its representation across training runs (seeds).

Choices this module makes (the paper does not state them):

- **Activation parametrization.** Every hidden layer of the MLP autoencoder uses a leaky
  ReLU whose negative-side slope is ``1 - alpha`` (:func:`negative_slope`). ``alpha = 0``
  gives slope 1, the identity: the whole network is exactly linear (one constant Jacobian,
  so B(z) is the same for every sample). ``alpha = 1`` gives slope 0, a plain ReLU: the
  strongly nonlinear end. Figures are drawn against the measured constant, not only alpha.
- **Per-sample bi-Lipschitz estimate.** ``B(z) = s_max / s_min`` of the singular values of
  the encoder's Jacobian at a sample (``torch.func.vmap`` over ``torch.func.jacrev``; exact,
  not finite differences). The encoder maps R^D -> R^d with d < D, so the d singular values
  are those of the Jacobian restricted to its row space. For the isometric data-generating
  process the Jacobian is that of ``z -> encoder(g(z))`` (d x d), i.e. the encoder restricted
  to the data manifold's tangent space, since ``g`` is an isometry onto the manifold and the
  encoder's behaviour off the manifold is irrelevant. A singular Jacobian gives B = inf.
- **Identifiability error.** For every pair of seeds of one (dataset, alpha, group) the
  latents of the same samples are aligned with :func:`phenoica.align.align_errors` (rigid and
  linear maps, fitted on a seeded training split, held-out mean l2 error / diameter, as in
  Table 1). Each pair is summarised with the mean of its two models' mean B and the larger
  of their max B.
- **Isometric data-generating process** (:func:`isometric_embed`): independent uniform
  latents z in [-1, 1]^d; each coordinate is bent onto a circular arc of radius
  ``1 / curvature`` parametrized by arc length, ``z_k -> (r sin(z_k / r), r (1 - cos(z_k / r)))``;
  the d arcs span orthogonal planes of R^{2d}, and a seeded matrix with orthonormal columns
  embeds R^{2d} in R^D. Its Jacobian has orthonormal columns at every z (a local isometry),
  chordal distances are ``sqrt(sum_k (2 r sin(|dz_k| / 2r))^2)`` and the geodesic distance
  on the manifold (a product of arcs) equals ``||z - z'||`` as long as every arc spans less
  than a full turn (``2 * curvature < 2 pi``).
- **Digit-specific models**: one model per digit class (group ``digit{k}``), trained and
  aligned on that class's images only; group ``all`` uses every class.
"""

from __future__ import annotations

import gzip
import itertools
import logging
import math
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from scipy import stats
from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import orthogonal

from phenoica import render
from phenoica.align import align_errors
from phenoica.models.device import resolve_device
from phenoica.studies.plan import ALL_GROUP, DATASETS, dataset_groups, parse_group

LOG = logging.getLogger(__name__)

TITLE = "Bi-Lipschitz control and identifiability (Nelson et al. 2026 Figure 2)"
PARAMETRIZATIONS: tuple[str, ...] = ("orthogonal", "none")
ALIGN_MAPS: tuple[str, ...] = ("rigid", "linear")
MNIST_NPZ_KEYS: tuple[str, ...] = ("x_train", "y_train")
MNIST_IDX_FILES: tuple[str, ...] = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")


# ----------------------------------------------------------------------------- activations


def negative_slope(alpha: float) -> float:
    """Negative-side slope ``1 - alpha`` of the leaky ReLU for nonlinearity strength alpha in [0, 1]."""
    if not (0.0 <= float(alpha) <= 1.0) or math.isnan(float(alpha)):
        raise ValueError(f"alpha must lie in [0, 1] (0 = linear, 1 = ReLU), got {alpha!r}")
    return 1.0 - float(alpha)


def mlp(sizes: Sequence[int], alpha: float, parametrization: str = "orthogonal") -> nn.Sequential:
    """Linear layers through ``sizes`` with the alpha leaky ReLU between them (none after the last).

    ``parametrization="orthogonal"`` makes every weight matrix semi-orthogonal during training
    (``torch.nn.utils.parametrizations.orthogonal`` with the Cayley map: orthonormal rows when
    the layer narrows, orthonormal columns when it widens); ``"none"`` leaves the layers
    unconstrained.
    """
    if len(sizes) < 2 or any(int(s) < 1 for s in sizes):
        raise ValueError(f"an MLP needs two or more positive layer sizes, got {list(sizes)}")
    if parametrization not in PARAMETRIZATIONS:
        raise ValueError(f"parametrization must be one of {PARAMETRIZATIONS}, got {parametrization!r}")
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        linear = nn.Linear(int(a), int(b))
        if parametrization == "orthogonal":
            linear = orthogonal(linear, orthogonal_map="cayley")
        layers.append(linear)
        if i < len(sizes) - 2:
            layers.append(nn.LeakyReLU(negative_slope(alpha)))
    return nn.Sequential(*layers)


class Autoencoder(nn.Module):
    """MLP encoder R^D -> R^d and mirrored decoder, leaky-ReLU slope ``1 - alpha``, layers as ``parametrization``."""

    def __init__(
        self, in_dim: int, latent_dim: int, hidden: Sequence[int], alpha: float, parametrization: str = "orthogonal"
    ) -> None:
        super().__init__()
        if latent_dim < 1 or in_dim < 1:
            raise ValueError(f"in_dim and latent_dim must be positive, got {in_dim}, {latent_dim}")
        self.alpha = float(alpha)
        self.parametrization = parametrization
        self.encoder = mlp([in_dim, *hidden, latent_dim], alpha, parametrization)
        self.decoder = mlp([latent_dim, *reversed(list(hidden)), in_dim], alpha, parametrization)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))

    def freeze(self) -> "Autoencoder":
        """Replace each parametrized weight by its current (orthogonal) value: plain linear
        layers computing the same function, cheaper to differentiate through."""
        for module in self.modules():
            if parametrize.is_parametrized(module):
                for name in list(module.parametrizations.keys()):
                    parametrize.remove_parametrizations(module, name, leave_parametrized=True)
        return self


# ----------------------------------------------------------------------------- data


def orthonormal_columns(rows: int, cols: int, seed: int) -> np.ndarray:
    """A seeded ``rows x cols`` matrix with orthonormal columns (QR of a Gaussian, signs fixed)."""
    if cols > rows:
        raise ValueError(f"cannot have {cols} orthonormal columns in R^{rows}")
    g = np.random.default_rng(seed).standard_normal((rows, cols))
    q, r = np.linalg.qr(g)
    return q * np.sign(np.diag(r))


def isometric_embed(z: torch.Tensor, curvature: float, embedding: torch.Tensor) -> torch.Tensor:
    """Map latents (n x d) onto the product of arc-length arcs, embedded by ``embedding`` (D x 2d).

    ``curvature = 0`` keeps each coordinate on a straight line (a linear isometry).
    """
    if curvature < 0:
        raise ValueError(f"curvature must be >= 0, got {curvature}")
    if curvature == 0:
        flat = torch.stack([z, torch.zeros_like(z)], dim=-1)
    else:
        r = 1.0 / curvature
        flat = torch.stack([r * torch.sin(z / r), r * (1.0 - torch.cos(z / r))], dim=-1)
    return flat.reshape(*z.shape[:-1], 2 * z.shape[-1]) @ embedding.T


def isometric_data(n: int, latent_dim: int, ambient_dim: int, curvature: float, seed: int) -> dict[str, np.ndarray]:
    """Samples of the isometric data-generating process (see the module docstring).

    Returns ``x`` (n x ambient_dim, float32), ``z`` (n x latent_dim, the true latents),
    ``embedding`` (ambient_dim x 2 latent_dim).
    """
    if ambient_dim < 2 * latent_dim:
        raise ValueError(f"isometric: ambient_dim must be >= 2 * latent_dim = {2 * latent_dim}, got {ambient_dim}")
    if 2.0 * curvature >= 2.0 * math.pi:
        raise ValueError(
            f"isometric: curvature {curvature} bends an arc of length 2 past a full turn "
            f"(needs curvature < pi) and the map stops being injective"
        )
    rng = np.random.default_rng(seed)
    z = rng.uniform(-1.0, 1.0, size=(n, latent_dim))
    emb = orthonormal_columns(ambient_dim, 2 * latent_dim, seed + 1)
    x = isometric_embed(torch.from_numpy(z), curvature, torch.from_numpy(emb)).numpy()
    return {"x": x.astype(np.float32), "z": z.astype(np.float32), "embedding": emb}


def load_digits_data() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled 8x8 handwritten digits: pixels scaled to [0, 1] (n x 64), labels."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)


def _read_idx(path: Path, ndim: int) -> np.ndarray:
    """One IDX file (optionally gzipped) of unsigned bytes with ``ndim`` dimensions."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    if len(raw) < 4 + 4 * ndim or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08 or raw[3] != ndim:
        raise ValueError(
            f"{path}: not an IDX file of unsigned bytes with {ndim} dimensions (expected magic 0x0000080{ndim})"
        )
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says shape {shape} but holds {data.size} values")
    return data.reshape(shape)


def _find_idx(folder: Path, stem: str) -> Path:
    for name in (stem, f"{stem}.gz"):
        if (folder / name).exists():
            return folder / name
    raise ValueError(
        f"{folder}: MNIST folder lacks {stem} (or {stem}.gz); expected the IDX files {', '.join(MNIST_IDX_FILES)}"
    )


def load_mnist(path: Path | str) -> tuple[np.ndarray, np.ndarray]:
    """MNIST training images (n x 784, scaled to [0, 1]) and labels from a user-provided file.

    ``path`` is an ``.npz`` with arrays ``x_train`` (n x 28 x 28 or n x 784, 0-255) and
    ``y_train`` (n,), or a folder holding the IDX files ``train-images-idx3-ubyte`` and
    ``train-labels-idx1-ubyte`` (each optionally ``.gz``). Nothing is downloaded.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: MNIST file or folder not found (nothing is downloaded; give "
            f"an .npz with {MNIST_NPZ_KEYS} or a folder with {MNIST_IDX_FILES})"
        )
    if path.is_dir():
        x = _read_idx(_find_idx(path, MNIST_IDX_FILES[0]), 3)
        y = _read_idx(_find_idx(path, MNIST_IDX_FILES[1]), 1)
    else:
        try:
            with np.load(path, allow_pickle=False) as f:
                missing = [k for k in MNIST_NPZ_KEYS if k not in f.files]
                if missing:
                    raise ValueError(
                        f"{path}: MNIST .npz lacks {missing}; expected keys {list(MNIST_NPZ_KEYS)}, "
                        f"found {sorted(f.files)}"
                    )
                x, y = f["x_train"], f["y_train"]
        except (OSError, EOFError) as exc:
            raise ValueError(f"{path}: not a readable .npz ({exc})") from exc
    x = np.asarray(x)
    y = np.asarray(y)
    if x.ndim not in (2, 3) or x.shape[0] != y.shape[0] or y.ndim != 1:
        raise ValueError(
            f"{path}: x_train must be (n, 28, 28) or (n, 784) with y_train (n,), got {x.shape} and {y.shape}"
        )
    x = x.reshape(x.shape[0], -1).astype(np.float32)
    if x.size and (x.min() < 0 or x.max() > 255):
        raise ValueError(f"{path}: x_train values must lie in 0..255, got {x.min()}..{x.max()}")
    return x / 255.0, y.astype(np.int64)


def load_group_data(dataset: str, group: str, settings: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The samples one model of (dataset, group) is trained and measured on.

    Returns ``x`` (float32 n x D), ``labels`` (or None), and for the isometric dataset
    ``z``, ``embedding``, ``curvature`` (so the Jacobian can be taken through the generator).
    At most ``settings["n_samples"]`` rows, a seeded subsample shared by every seed and alpha.
    """
    digit = parse_group(group)
    n_max = int(settings["n_samples"])
    if dataset == "isometric":
        if digit is not None:
            raise ValueError("isometric: has no digit classes; group must be 'all'")
        iso = settings["isometric"]
        out = isometric_data(n_max, int(iso["latent_dim"]), int(iso["ambient_dim"]), float(iso["curvature"]), seed)
        return {
            "x": out["x"],
            "labels": None,
            "z": out["z"],
            "embedding": out["embedding"],
            "curvature": float(iso["curvature"]),
        }
    if dataset == "digits":
        x, y = load_digits_data()
    elif dataset == "mnist":
        if not settings.get("mnist_path"):
            raise ValueError("bilipschitz: dataset mnist needs bilipschitz.mnist_path (an .npz or IDX folder)")
        x, y = load_mnist(settings["mnist_path"])
    else:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    if digit is not None:
        keep = np.flatnonzero(y == digit)
        if keep.size == 0:
            raise ValueError(f"{dataset}: no samples of digit {digit}")
        x, y = x[keep], y[keep]
    if x.shape[0] > n_max:
        rows = np.sort(np.random.default_rng(seed).choice(x.shape[0], n_max, replace=False))
        x, y = x[rows], y[rows]
    return {"x": np.ascontiguousarray(x, dtype=np.float32), "labels": y}


# ----------------------------------------------------------------------------- training


def train_autoencoder(
    x: np.ndarray,
    alpha: float,
    seed: int,
    *,
    latent_dim: int,
    hidden: Sequence[int],
    epochs: int,
    batch_size: int,
    lr: float,
    parametrization: str = "orthogonal",
    converge_tol: float = 0.0,
    converge_window: int = 200,
    device: str = "auto",
) -> tuple[Autoencoder, list[float]]:
    """Train an :class:`Autoencoder` with Adam on mean squared reconstruction error.

    ``seed`` fixes the initialization and the minibatch order. Training runs at most ``epochs``
    epochs and stops early once converged (:func:`converged` on the per-step losses, checked at
    the end of each epoch): when the mean loss of the last ``converge_window`` optimizer steps
    fell by less than ``converge_tol`` (relative) from the window before (``converge_tol=0``
    never stops early). The window counts steps, not epochs, so small datasets (few steps per
    epoch) train as many updates per check as large ones. Returns the model (on CPU, eval mode,
    parametrizations frozen into plain weights) and the mean training loss of each epoch run.
    """
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"training data must be (n >= 2, D), got {x.shape}")
    if epochs < 1 or batch_size < 1 or lr <= 0:
        raise ValueError(f"epochs and batch_size must be >= 1 and lr > 0, got {epochs}, {batch_size}, {lr}")
    if converge_tol < 0 or converge_window < 1:
        raise ValueError(f"converge_tol must be >= 0 and converge_window >= 1, got {converge_tol}, {converge_window}")
    dev = resolve_device(device)
    torch.manual_seed(seed)
    model = Autoencoder(x.shape[1], latent_dim, hidden, alpha, parametrization).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    data = torch.from_numpy(np.asarray(x, dtype=np.float32)).to(dev)
    gen = torch.Generator().manual_seed(seed)
    history: list[float] = []
    steps: list[float] = []
    next_check = 2 * converge_window
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(data.shape[0], generator=gen).to(dev)
        total = 0.0
        for start in range(0, data.shape[0], batch_size):
            xb = data[order[start : start + batch_size]]
            loss = torch.mean((model(xb) - xb) ** 2)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * xb.shape[0]
            steps.append(float(loss.detach()))
        history.append(total / data.shape[0])
        if converge_tol > 0 and len(steps) >= next_check:
            if converged(steps, converge_window, converge_tol):
                break
            next_check = len(steps) + converge_window
    model.eval()
    return model.cpu().freeze(), history


def converged(history: Sequence[float], window: int, tol: float) -> bool:
    """True when ``history`` holds two windows or more and the mean loss of its last ``window``
    entries is less than ``tol`` (relative) below the mean of the ``window`` entries before."""
    n = len(history)
    if n < 2 * window:
        return False
    last, before = float(np.mean(history[-window:])), float(np.mean(history[-2 * window : -window]))
    return (before - last) < tol * abs(before)


def late_improvement(history: Sequence[float], fraction: float = 0.1) -> float:
    """Relative fall of the epoch loss over the last ``fraction`` of training:
    ``(loss[-k-1] - loss[-1]) / loss[-1]``, ``k = max(1, round(fraction * epochs))``; NaN for one epoch.

    A converged run has a value near 0 (the study reports it per model)."""
    h = np.asarray(history, dtype=float)
    if h.size < 2:
        return math.nan
    k = min(h.size - 1, max(1, int(round(fraction * h.size))))
    return float((h[-k - 1] - h[-1]) / max(abs(h[-1]), 1e-300))


# ----------------------------------------------------------------------------- measurements


def jacobians(fn: Any, x: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """Per-sample Jacobians of ``fn`` (a map of one sample R^D -> R^d) at rows of x: (n, d, D)."""
    jac = torch.func.vmap(torch.func.jacrev(fn))
    parts = [jac(x[i : i + batch_size]) for i in range(0, x.shape[0], batch_size)]
    return torch.cat(parts) if parts else torch.empty(0)


def bilipschitz_from_jacobians(J: torch.Tensor) -> np.ndarray:
    """B = largest / smallest singular value of each Jacobian (inf where the smallest is 0)."""
    s = torch.linalg.svdvals(J.detach().double())
    smax, smin = s[..., 0], s[..., -1]
    tiny = torch.finfo(torch.float64).eps * smax * max(J.shape[-2:])
    ratio = torch.where(smin > tiny, smax / smin.clamp_min(1e-300), torch.full_like(smax, math.inf))
    return ratio.numpy()


def bilipschitz(fn: Any, x: Any, batch_size: int = 256) -> np.ndarray:
    """Per-sample bi-Lipschitz estimates B(z) of ``fn`` at the rows of ``x`` (see module docstring)."""
    xt = x if torch.is_tensor(x) else torch.from_numpy(np.asarray(x, dtype=np.float32))
    return bilipschitz_from_jacobians(jacobians(fn, xt, batch_size))


def encoder_map(model: Autoencoder, data: Mapping[str, Any]) -> tuple[Any, np.ndarray]:
    """The map whose Jacobian defines B(z), and its inputs: the encoder on x, or for the
    isometric dataset ``z -> encoder(g(z))`` on the true latents."""
    if data.get("z") is not None:
        emb = torch.from_numpy(np.asarray(data["embedding"], dtype=np.float32))
        curv = float(data["curvature"])
        return (lambda z: model.encoder(isometric_embed(z, curv, emb))), data["z"]
    return model.encoder, data["x"]


def measure_model(model: Autoencoder, data: Mapping[str, Any], max_jacobian_samples: int, seed: int) -> pd.DataFrame:
    """One row per sample: latents ``z_0..``, reconstruction error (mean squared over pixels),
    and ``bilipschitz`` (B(z); NaN for rows outside the seeded Jacobian subsample)."""
    x = torch.from_numpy(np.asarray(data["x"], dtype=np.float32))
    with torch.no_grad():
        lat = model.encoder(x)
        recon = torch.mean((model.decoder(lat) - x) ** 2, dim=1).numpy()
    lat = lat.numpy().astype(np.float64)
    n = x.shape[0]
    rows = (
        np.arange(n)
        if n <= max_jacobian_samples
        else np.sort(np.random.default_rng(seed).choice(n, max_jacobian_samples, replace=False))
    )
    fn, inputs = encoder_map(model, data)
    b = np.full(n, np.nan)
    b[rows] = bilipschitz(fn, np.asarray(inputs, dtype=np.float32)[rows])
    out = pd.DataFrame({"sample": np.arange(n), "recon_error": recon.astype(np.float64), "bilipschitz": b})
    if data.get("labels") is not None:
        out["label"] = np.asarray(data["labels"])
    for j in range(lat.shape[1]):
        out[f"z_{j}"] = lat[:, j]
    return out


def run_model(
    dataset: str,
    group: str,
    alpha: float,
    seed: int,
    settings: Mapping[str, Any],
    data_seed: int = 0,
    log: logging.Logger | None = None,
    data: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Train one autoencoder of (dataset, group, alpha, seed) and measure it.

    Returns :func:`measure_model`'s table with ``dataset``, ``group``, ``alpha``, ``slope``,
    ``seed``, ``parametrization``, ``final_loss`` and ``late_improvement`` (relative loss fall
    over the last 10% of epochs, :func:`late_improvement`) in front. ``data`` (as
    :func:`load_group_data` returns it) saves reloading when several models share it.
    """
    log = log or LOG
    data = data if data is not None else load_group_data(dataset, group, settings, data_seed)
    latent = int(settings["isometric"]["latent_dim"]) if dataset == "isometric" else int(settings["latent_dim"])
    param = str(settings.get("parametrization", "orthogonal"))
    start = time.perf_counter()
    model, hist = train_autoencoder(
        data["x"],
        alpha,
        seed,
        latent_dim=latent,
        hidden=list(settings["hidden"]),
        epochs=int(settings["epochs"]),
        batch_size=int(settings["batch_size"]),
        lr=float(settings["lr"]),
        parametrization=param,
        converge_tol=float(settings.get("converge_tol", 0.0)),
        converge_window=int(settings.get("converge_window", 200)),
        device=str(settings.get("device", "auto")),
    )
    improvement = late_improvement(hist)
    log.info(
        "%s/%s alpha=%s seed=%d (%s): %d samples, %d epochs in %.1f s, final loss %.5f, late improvement %.2g%%",
        dataset,
        group,
        alpha,
        seed,
        param,
        data["x"].shape[0],
        len(hist),
        time.perf_counter() - start,
        hist[-1],
        100 * improvement,
    )
    table = measure_model(model, data, int(settings["max_jacobian_samples"]), seed)
    head = pd.DataFrame(
        {
            "dataset": dataset,
            "group": group,
            "alpha": float(alpha),
            "slope": negative_slope(alpha),
            "seed": int(seed),
            "parametrization": param,
            "final_loss": hist[-1],
            "epochs_run": len(hist),
            "late_improvement": improvement,
        },
        index=table.index,
    )
    return pd.concat([head, table], axis=1)


def run_alpha(
    dataset: str,
    group: str,
    alpha: float,
    settings: Mapping[str, Any],
    data_seed: int = 0,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """Every seed of (dataset, group, alpha): :func:`run_model` per ``settings["seeds"]``, one table (a job of the DAG)."""
    data = load_group_data(dataset, group, settings, data_seed)
    return pd.concat(
        [run_model(dataset, group, alpha, int(s), settings, data_seed, log, data=data) for s in settings["seeds"]],
        ignore_index=True,
    )


# ----------------------------------------------------------------------------- gather


def _latents(t: pd.DataFrame) -> np.ndarray:
    cols = sorted((c for c in t.columns if c.startswith("z_")), key=lambda c: int(c[2:]))
    return t.sort_values("sample")[cols].to_numpy(dtype=np.float64)


def model_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per model: mean / median / max B over its samples, share singular, reconstruction."""
    keys = ["dataset", "group", "alpha", "slope", "seed"]
    rows = []
    for key, t in runs.groupby(keys, sort=True):
        b = t["bilipschitz"].to_numpy(dtype=float)
        b = b[~np.isnan(b)]
        fin = b[np.isfinite(b)]
        rows.append(
            dict(
                zip(keys, key),
                n_samples=len(t),
                n_jacobians=b.size,
                b_mean=float(fin.mean()) if fin.size else math.nan,
                b_median=float(np.median(fin)) if fin.size else math.nan,
                b_max=float(b.max()) if b.size else math.nan,
                frac_singular=float(np.mean(~np.isfinite(b))) if b.size else math.nan,
                recon_error=float(t["recon_error"].mean()),
                final_loss=float(t["final_loss"].iloc[0]),
                **{c: t[c].iloc[0] for c in ("parametrization", "epochs_run", "late_improvement") if c in t},
            )
        )
    return pd.DataFrame(rows)


def pair_alignment(runs: pd.DataFrame, train_fraction: float, seed: int) -> pd.DataFrame:
    """Identifiability error of every pair of seeds within each (dataset, group, alpha).

    Rigid and linear maps (:func:`phenoica.align.align_errors`), from the lower seed's latents
    to the higher seed's, plus the pair's bi-Lipschitz summaries (mean of the two models' mean
    B, max of their max B) and mean reconstruction error.
    """
    summary = model_summary(runs).set_index(["dataset", "group", "alpha", "seed"])
    rows = []
    for (dataset, group, alpha), t in runs.groupby(["dataset", "group", "alpha"], sort=True):
        seeds = sorted(t["seed"].unique())
        lat = {s: _latents(t[t["seed"] == s]) for s in seeds}
        for sa, sb in itertools.combinations(seeds, 2):
            if lat[sa].shape[0] != lat[sb].shape[0]:
                raise ValueError(f"{dataset}/{group} alpha={alpha}: seeds {sa} and {sb} embed different sample counts")
            res = align_errors(lat[sa], lat[sb], train_fraction=train_fraction, seed=seed, maps=ALIGN_MAPS, knn_k=None)
            ma, mb = summary.loc[(dataset, group, alpha, sa)], summary.loc[(dataset, group, alpha, sb)]
            rows.append(
                dict(
                    dataset=dataset,
                    group=group,
                    alpha=float(alpha),
                    slope=negative_slope(alpha),
                    seed_a=int(sa),
                    seed_b=int(sb),
                    rigid=res["rigid"],
                    linear=res["linear"],
                    b_mean=float(np.mean([ma["b_mean"], mb["b_mean"]])),
                    b_max=float(max(ma["b_max"], mb["b_max"])),
                    recon_error=float(np.mean([ma["recon_error"], mb["recon_error"]])),
                    n_samples=int(lat[sa].shape[0]),
                )
            )
    return pd.DataFrame(rows)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho, NaN with fewer than 3 points or a constant side."""
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def spearman_interval(
    t: pd.DataFrame, statistic: str, error: str, n_boot: int, seed: int, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of Spearman's rho(``statistic``, ``error``) over the pairs ``t``.

    Pairs that share a model are not independent, so the bootstrap resamples models, not pairs:
    in every (group, alpha) cell the seeds are drawn with replacement, and each drawn pair of
    distinct seeds contributes its pair row (as often as it is drawn). (NaN, NaN) when fewer
    than half of the ``n_boot`` replicates give a defined rho.
    """
    if not 0 < level < 1 or n_boot < 1:
        raise ValueError(f"level must lie in (0, 1) and n_boot >= 1, got {level}, {n_boot}")
    cells = []
    for _, u in t.groupby(["group", "alpha"], sort=True):
        seeds = np.array(sorted(set(u["seed_a"]) | set(u["seed_b"])))
        values = {
            (int(a), int(b)): (x, y)
            for a, b, x, y in zip(u["seed_a"], u["seed_b"], u[statistic].to_numpy(float), u[error].to_numpy(float))
        }
        cells.append((seeds, values))
    rng = np.random.default_rng(seed)
    rhos = []
    for _ in range(int(n_boot)):
        xs, ys = [], []
        for seeds, values in cells:
            draw = rng.choice(seeds, size=seeds.size, replace=True)
            for a, b in itertools.combinations(draw.tolist(), 2):
                pair = values.get((min(a, b), max(a, b)))
                if a != b and pair is not None:
                    xs.append(pair[0])
                    ys.append(pair[1])
        rho = _spearman(np.asarray(xs), np.asarray(ys))
        if np.isfinite(rho):
            rhos.append(rho)
    if len(rhos) < n_boot / 2:
        return math.nan, math.nan
    lo, hi = np.quantile(rhos, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def spearman_table(pairs: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Spearman rank correlation of identifiability error (rigid, linear) with the pair's mean
    and max B, per dataset and model kind (``all`` or ``per-digit``, the digits pooled), as
    measured, with a 95% model-resampling bootstrap interval (:func:`spearman_interval`). The
    p-value is scipy's, which treats pairs as independent (they are not: read the interval)."""
    columns = ["dataset", "models", "map", "statistic", "n_pairs", "spearman_rho", "ci_low", "ci_high", "p_value"]
    rows = []
    if pairs.empty:
        return pd.DataFrame(columns=columns)
    kinds = np.where(pairs["group"] == ALL_GROUP, "all", "per-digit")
    for (dataset, kind), t in pairs.assign(models=kinds).groupby(["dataset", "models"], sort=True):
        for m in ALIGN_MAPS:
            for stat in ("b_mean", "b_max"):
                ok = np.isfinite(t[m].to_numpy(float)) & np.isfinite(t[stat].to_numpy(float))
                x, y = t.loc[ok, stat].to_numpy(float), t.loc[ok, m].to_numpy(float)
                rho = _spearman(x, y)
                p = float(stats.spearmanr(x, y).pvalue) if np.isfinite(rho) else math.nan
                lo, hi = spearman_interval(t[ok], stat, m, n_boot, seed) if np.isfinite(rho) else (math.nan, math.nan)
                rows.append(
                    dict(
                        dataset=dataset,
                        models=kind,
                        map=m,
                        statistic=stat,
                        n_pairs=int(ok.sum()),
                        spearman_rho=rho,
                        ci_low=lo,
                        ci_high=hi,
                        p_value=p,
                    )
                )
    return pd.DataFrame(rows, columns=columns)


def alpha_summary(models: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, group, alpha): mean B statistics, reconstruction and identifiability errors."""
    extra = {"epochs_run": ("epochs_run", "mean"), "late_improvement": ("late_improvement", "max")}
    m = (
        models.groupby(["dataset", "group", "alpha"], sort=True)
        .agg(
            slope=("slope", "first"),
            n_models=("seed", "size"),
            b_mean=("b_mean", "mean"),
            b_max=("b_max", "max"),
            recon_error=("recon_error", "mean"),
            **{k: v for k, v in extra.items() if v[0] in models},
        )
        .reset_index()
    )
    if pairs.empty:
        return m.assign(rigid=math.nan, linear=math.nan, n_pairs=0)
    p = (
        pairs.groupby(["dataset", "group", "alpha"], sort=True)
        .agg(rigid=("rigid", "mean"), linear=("linear", "mean"), n_pairs=("rigid", "size"))
        .reset_index()
    )
    return m.merge(p, on=["dataset", "group", "alpha"], how="left")


def gather_dataset(
    run_tables: Sequence[pd.DataFrame], train_fraction: float, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(model summaries, per-pair alignment, B(z) samples) of one dataset's runs."""
    if not run_tables:
        raise ValueError("bilipschitz gather: no runs given")
    runs = pd.concat(run_tables, ignore_index=True)
    samples = runs.loc[
        runs["bilipschitz"].notna(), ["dataset", "group", "alpha", "slope", "seed", "sample", "bilipschitz"]
    ]
    return model_summary(runs), pair_alignment(runs, train_fraction, seed), samples.reset_index(drop=True)


# ----------------------------------------------------------------------------- report


def _save(fig: Figure, path: Path) -> Path:
    return render.save_figure(fig, path)


def _alpha_colors(alphas: Sequence[float]) -> dict[float, Any]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    al = sorted(set(float(a) for a in alphas))
    return {a: cmap(i / max(len(al) - 1, 1)) for i, a in enumerate(al)}


def figure_distributions(samples: pd.DataFrame, path: Path) -> Path:
    """B(z) distributions per alpha (box plots), one panel per dataset (group all)."""
    s = samples[(samples["group"] == ALL_GROUP) & np.isfinite(samples["bilipschitz"])]
    datasets = sorted(s["dataset"].unique()) or ["(none)"]
    fig = Figure(figsize=(5 * len(datasets), 4), layout="constrained")
    for i, ds in enumerate(datasets):
        ax = fig.add_subplot(1, len(datasets), i + 1)
        t = s[s["dataset"] == ds]
        alphas = sorted(t["alpha"].unique())
        if alphas:
            ax.boxplot([t.loc[t["alpha"] == a, "bilipschitz"].to_numpy() for a in alphas], showfliers=True)
            ax.set_xticks(range(1, len(alphas) + 1), [f"{a:g}" for a in alphas])
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set(
            title=f"{ds}: per-sample B(z)", xlabel="alpha (leaky-ReLU slope 1 - alpha)", ylabel="B(z) = s_max / s_min"
        )
    return _save(fig, path)


def figure_identifiability(pairs: pd.DataFrame, path: Path, per_digit: bool = False) -> Path:
    """Identifiability error (rigid, linear) vs mean and vs max B, one row per dataset."""
    p = pairs[(pairs["group"] != ALL_GROUP) if per_digit else (pairs["group"] == ALL_GROUP)]
    datasets = sorted(p["dataset"].unique()) or ["(none)"]
    colors = _alpha_colors(p["alpha"].unique()) if not p.empty else {}
    fig = Figure(figsize=(11, 4.5 * len(datasets)), layout="constrained")
    for i, ds in enumerate(datasets):
        t = p[p["dataset"] == ds]
        for j, stat in enumerate(("b_mean", "b_max")):
            ax = fig.add_subplot(len(datasets), 2, 2 * i + j + 1)
            for a, c in colors.items():
                u = t[(t["alpha"] == a) & np.isfinite(t[stat])]
                if u.empty:
                    continue
                ax.scatter(u[stat], u["rigid"], color=c, marker="o", label=f"rigid, alpha={a:g}")
                ax.scatter(u[stat], u["linear"], color=c, marker="x", label=f"linear, alpha={a:g}")
            what = "mean" if stat == "b_mean" else "max"
            kind = "digit-specific models" if per_digit else "all samples"
            ax.set(
                title=f"{ds} ({kind}): error vs {what} B",
                xlabel=f"{what} bi-Lipschitz estimate of the pair",
                ylabel="alignment error (l2 / diameter)",
            )
            if j == 1 and not t.empty:
                ax.legend(fontsize=7, loc="best")
    return _save(fig, path)


def figure_reconstruction(models: pd.DataFrame, path: Path) -> Path:
    """Reconstruction error vs alpha and vs mean B (group all), one line per dataset."""
    m = models[models["group"] == ALL_GROUP]
    fig = Figure(figsize=(10, 4), layout="constrained")
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for ds, t in m.groupby("dataset", sort=True):
        g = t.groupby("alpha").agg(recon=("recon_error", "mean"), b=("b_mean", "mean")).reset_index()
        ax1.plot(g["alpha"], g["recon"], marker="o", label=ds)
        ax2.scatter(t["b_mean"], t["recon_error"], label=ds)
    ax1.set(
        title="Reconstruction error vs alpha", xlabel="alpha (leaky-ReLU slope 1 - alpha)", ylabel="mean squared error"
    )
    ax2.set(
        title="Reconstruction error vs mean B",
        xlabel="mean bi-Lipschitz estimate of the model",
        ylabel="mean squared error",
    )
    for ax in (ax1, ax2):
        ax.set_yscale("log")
        if not m.empty:
            ax.legend()
    return _save(fig, path)


def _direction(lo: float, hi: float) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "undetermined (too few pairs)"
    if lo > 0:
        return "positive: error rises with B, as the paper claims"
    if hi < 0:
        return "negative: error falls as B rises, the opposite of the paper's claim"
    return "not distinguishable from zero: the interval includes 0"


def verdict(models: pd.DataFrame, pairs: pd.DataFrame, rho: pd.DataFrame) -> str:
    """One paragraph, computed from the results: per dataset, B at the near-linear and the
    nonlinear end, and the rank correlation of the rigid error with the pair's mean B."""
    if models.empty:
        return "No models were trained."
    parts = []
    for ds, m in models.groupby("dataset", sort=True):
        a = m[m["group"] == ALL_GROUP].groupby("alpha")
        b = a["b_mean"].mean()
        rec = a["recon_error"].mean()
        lo_a, hi_a = float(b.index.min()), float(b.index.max())
        text = (
            f"{ds}: mean B(z) {b.loc[lo_a]:.3f} at alpha = {lo_a:g} and {b.loc[hi_a]:.3f} at alpha = {hi_a:g} "
            f"(reconstruction error {rec.loc[lo_a]:.3g} -> {rec.loc[hi_a]:.3g})"
        )
        for kind in ("all", "per-digit"):
            r = rho[
                (rho["dataset"] == ds)
                & (rho["models"] == kind)
                & (rho["map"] == "rigid")
                & (rho["statistic"] == "b_mean")
            ]
            if r.empty:
                continue
            r = r.iloc[0]
            what = "models of all samples" if kind == "all" else "digit-specific models (pooled)"
            text += (
                f"; {what}: Spearman rho(mean B, rigid error) = {r['spearman_rho']:+.2f} "
                f"[95% CI {r['ci_low']:+.2f}, {r['ci_high']:+.2f}] over {int(r['n_pairs'])} seed pairs, "
                f"{_direction(r['ci_low'], r['ci_high'])}"
            )
        if "late_improvement" in m:
            late = m["late_improvement"].to_numpy(float)
            text += (
                f"; loss change over the last 10% of epochs: median {100 * np.median(np.abs(late)):.2g}%, "
                f"largest {100 * np.max(np.abs(late)):.2g}% ({int(m['epochs_run'].min())}-{int(m['epochs_run'].max())} epochs)"
            )
        parts.append(text + ".")
    near = models[(models["alpha"] == models["alpha"].min()) & (models["group"] == ALL_GROUP)]
    head = (
        f"At the near-linear end (alpha = {float(models['alpha'].min()):g}) the encoders' mean B(z) is "
        f"{near['b_mean'].min():.3f}-{near['b_mean'].max():.3f} across datasets and seeds. "
    )
    return head + " ".join(parts)


def verdict_line(rho: pd.DataFrame) -> str:
    """The verdict in one line (for pages that link to the study): per dataset, the Spearman
    correlation of the rigid error with the pair's mean B (models of all samples), its interval
    and what it means."""
    r = rho[(rho["models"] == "all") & (rho["map"] == "rigid") & (rho["statistic"] == "b_mean")]
    parts = [
        f"{row['dataset']}: Spearman rho(mean B, rigid error) {row['spearman_rho']:+.2f} "
        f"[{row['ci_low']:+.2f}, {row['ci_high']:+.2f}] over {int(row['n_pairs'])} seed pairs, "
        f"{_direction(row['ci_low'], row['ci_high'])}"
        for _, row in r.iterrows()
    ]
    return "; ".join(parts) + "." if parts else "No models were trained."


def write_report(
    out_dir: Path | str,
    models: pd.DataFrame,
    pairs: pd.DataFrame,
    samples: pd.DataFrame,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Path]:
    """Figures, CSV tables, ``report.md`` and ``index.html`` of the study under ``out_dir``
    (one page through :mod:`phenoica.render`)."""
    out = Path(out_dir)
    fig_dir, tab_dir = out / "figures", out / "tables"
    files: dict[str, Path] = {
        "distributions": figure_distributions(samples, fig_dir / "bilipschitz_distributions.png"),
        "identifiability": figure_identifiability(pairs, fig_dir / "identifiability_vs_bilipschitz.png"),
        "reconstruction": figure_reconstruction(models, fig_dir / "reconstruction.png"),
    }
    has_digits = bool((pairs["group"] != ALL_GROUP).any()) if not pairs.empty else False
    if has_digits:
        files["per_digit"] = figure_identifiability(pairs, fig_dir / "identifiability_per_digit.png", per_digit=True)
    summary = alpha_summary(models, pairs)
    rho = spearman_table(pairs, n_boot=n_boot, seed=seed)
    for name, df in (("alpha_summary", summary), ("spearman", rho), ("pairs", pairs), ("models", models)):
        files[f"table_{name}"] = render.write_csv(df, tab_dir / f"{name}.csv")
    params = sorted(set(models["parametrization"])) if "parametrization" in models else ["none"]
    intro = (
        "Leaky-ReLU MLP autoencoders with negative-side slope 1 - alpha (alpha = 0: exactly linear; "
        f"alpha = 1: ReLU); weight matrices parametrized as: {', '.join(params)} "
        "(orthogonal = torch.nn.utils.parametrizations.orthogonal, Cayley map: every layer semi-orthogonal, "
        "so at alpha = 0 the encoder is a product of semi-orthogonal maps and B(z) = 1 where the row spaces "
        "line up; each leaky ReLU scales directions by 1 or 1 - alpha). B(z) = ratio of the largest to the "
        "smallest singular value of the encoder's Jacobian at each sample (for the isometric data, through "
        "the generator). Identifiability error: held-out mean l2 error / diameter of rigid and linear maps "
        "between two seeds' latents (phenoica.align). Spearman intervals resample models (seeds), not pairs."
    )
    shown_rho = rho.rename(columns={"spearman_rho": "rho", "ci_low": "CI low", "ci_high": "CI high"})
    figure_blocks = [
        render.Figure(f"figures/{files[k].name}", cap)
        for k, cap in (
            ("distributions", "Per-sample B(z) per alpha (models of all samples)."),
            ("identifiability", "Cross-seed alignment error against the pair's mean and max B."),
            ("per_digit", "The same for digit-specific models."),
            ("reconstruction", "Reconstruction error against alpha and against mean B."),
        )
        if k in files
    ]
    page = render.Page(
        TITLE,
        lead=[intro],
        sections=[
            render.Section("Verdict (measured)", [verdict(models, pairs, rho)]),
            render.Section(
                "Spearman rank correlation: B vs identifiability error",
                [render.Table(shown_rho, float_format="{:.3g}")],
            ),
            render.Section("Per alpha", [render.Table(summary, float_format="{:.4g}")]),
            render.Section("Figures", figure_blocks),
            render.Section(
                "Tables",
                [
                    render.Links(
                        [(f"{n}.csv", f"tables/{n}.csv") for n in ("alpha_summary", "spearman", "pairs", "models")]
                    )
                ],
            ),
        ],
    )
    written = render.write_page(page, out)
    files["report.md"], files["index.html"] = written["report.md"], written["index.html"]
    files["verdict"] = render.write_verdict(out, page.title, verdict_line(rho))
    return files


def run_sweep(
    settings: Mapping[str, Any], out_dir: Path | str, data_seed: int = 0, log: logging.Logger | None = None
) -> dict[str, Path]:
    """The whole study in one process (what the DAG does job by job): train and measure every
    (dataset, group, alpha, seed), gather per dataset, write the report."""
    models, pairs, samples = [], [], []
    for ds in settings["datasets"]:
        runs = [
            run_alpha(ds, g, float(a), settings, data_seed, log)
            for g in dataset_groups(ds, settings["per_digit"])
            for a in settings["alphas"]
        ]
        m, p, smp = gather_dataset(runs, float(settings["train_fraction"]), data_seed)
        models.append(m), pairs.append(p), samples.append(smp)
    return write_report(
        out_dir,
        pd.concat(models, ignore_index=True),
        pd.concat(pairs, ignore_index=True),
        pd.concat(samples, ignore_index=True),
        n_boot=int(settings.get("n_bootstrap", 1000)),
        seed=data_seed,
    )
