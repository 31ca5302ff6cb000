"""Image preprocessing shared by MAE training and embedding, as microscopy MAEs do it.

Tiles (n, C, H, W) of uint8/uint16 are scaled to [0, 1] (``intensity_max`` -> 1.0), then each
image's channels are instance-normalized (zero mean, unit SD over the whole image), then cut
into non-overlapping square crops whose embeddings the caller averages.
"""

from __future__ import annotations

import numpy as np
import torch

from phenoica.screen import ScreenError

EPS = 1e-6


def dtype_max(dtype: np.dtype | str) -> float:
    """The largest value of an integer dtype (255 for uint8, 65535 for uint16)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "ui":
        raise ScreenError(f"unsupported dtype {dtype}; expected uint8 or uint16")
    return float(np.iinfo(dtype).max)


def scale_intensity(tiles: np.ndarray, intensity_max: float | None = None, source: str = "tiles") -> torch.Tensor:
    """uint tiles (n, C, H, W) -> float32 tensor in [0, 1] (values above ``intensity_max`` clip).

    Non-finite values cannot occur in integer tiles; a float array is checked and rejected
    with the index of its first bad image.
    """
    arr = np.asarray(tiles)
    if arr.dtype.kind == "f":
        finite = np.isfinite(arr).reshape(arr.shape[0], -1).all(axis=1)
        if not finite.all():
            raise ScreenError(f"{source}: non-finite pixels in image {int(np.flatnonzero(~finite)[0])}")
        top = intensity_max if intensity_max is not None else 1.0
    else:
        top = intensity_max if intensity_max is not None else dtype_max(arr.dtype)
    x = torch.from_numpy(arr.astype(np.float32, copy=False))
    return (x / float(top)).clamp_(0.0, 1.0)


def normalize_per_channel(x: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """Per-image, per-channel instance normalization over H x W: (x - mean) / (std + eps)."""
    mean = x.mean(dim=(-2, -1), keepdim=True)
    std = x.std(dim=(-2, -1), keepdim=True, unbiased=False)
    return (x - mean) / (std + eps)


def crop_grid(x: torch.Tensor, crop: int, source: str = "tiles") -> torch.Tensor:
    """Cut (n, C, H, W) into non-overlapping crops: (n, k, C, crop, crop), k = (H//crop)*(W//crop).

    Rows and columns beyond the last full crop are dropped (centred). Images smaller than the
    crop raise ScreenError.
    """
    n, c, h, w = x.shape
    if h < crop or w < crop:
        raise ScreenError(f"{source}: images are {h}x{w}, smaller than the crop size {crop}")
    gh, gw = h // crop, w // crop
    top, left = (h - gh * crop) // 2, (w - gw * crop) // 2
    x = x[:, :, top : top + gh * crop, left : left + gw * crop]
    x = x.reshape(n, c, gh, crop, gw, crop).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(n, gh * gw, c, crop, crop)


def prepare(tiles: np.ndarray, crop: int, intensity_max: float | None = None, source: str = "tiles") -> torch.Tensor:
    """Scale, normalize and crop: uint tiles (n, C, H, W) -> float32 crops (n, k, C, crop, crop)."""
    return crop_grid(normalize_per_channel(scale_intensity(tiles, intensity_max, source)), crop, source)
