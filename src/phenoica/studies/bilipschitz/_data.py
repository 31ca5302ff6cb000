"""The study's datasets: the isometric data-generating process, scikit-learn's digits and MNIST from local files."""

from __future__ import annotations

import gzip
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from phenoica.studies._plan import DATASETS, parse_group
from phenoica.studies.bilipschitz._options import BilipschitzTrainOptions

MNIST_NPZ_KEYS: tuple[str, ...] = ("x_train", "y_train")


MNIST_IDX_FILES: tuple[str, ...] = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")


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


def load_group_data(dataset: str, group: str, options: BilipschitzTrainOptions) -> dict[str, Any]:
    """The samples one model of (dataset, group) is trained and measured on.

    Returns ``x`` (float32 n x D), ``labels`` (or None), and for the isometric dataset
    ``z``, ``embedding``, ``curvature`` (so the Jacobian can be taken through the generator).
    At most ``options.n_samples`` rows, a subsample seeded by ``options.seed`` and shared by
    every training seed and alpha.
    """
    digit = parse_group(group)
    n_max, seed = int(options.n_samples), int(options.seed)
    if dataset == "isometric":
        if digit is not None:
            raise ValueError("isometric: has no digit classes; group must be 'all'")
        curvature = float(options.isometric_curvature)
        out = isometric_data(
            n_max, int(options.isometric_latent_dim), int(options.isometric_ambient_dim), curvature, seed
        )
        return {"x": out["x"], "labels": None, "z": out["z"], "embedding": out["embedding"], "curvature": curvature}
    if dataset == "digits":
        x, y = load_digits_data()
    elif dataset == "mnist":
        if not options.mnist_path:
            raise ValueError("bilipschitz: dataset mnist needs bilipschitz.mnist_path (an .npz or IDX folder)")
        x, y = load_mnist(options.mnist_path)
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
