"""Image preprocessing shared by MAE training and embedding, as microscopy MAEs do it.

Tiles (n, C, H, W) of uint8/uint16 are scaled to [0, 1] (``intensity_max`` -> 1.0), normalized
per channel and cut into non-overlapping square crops whose embeddings the caller averages.
Two normalizations, chosen by the model (``normalize``):

* ``"image"`` (phenoica's encoders, stock timm models): each image's channels to zero mean and
  unit SD over the whole image, ``(x - mean) / (sd + 1e-6)``, then cropped;
* ``"crop"`` (the OpenPhenom recipe): cropped first, then each crop's channels through torch's
  instance norm (no affine), ``(x - mean) / sqrt(var + 1e-5)``: the published model normalizes
  whatever it is given, and a 512 px image is given to it as four 256 px crops.

For uint8 tiles the scaling is the recipe's ``pixels / 255``. Everything runs on the tensor's
device, so the embedding stage can ship raw integer tiles to the GPU and prepare them there.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from phenoica.contract import SUPPORTED_DTYPES, ScreenError, check_finite

EPS = 1e-6
INSTANCE_NORM_EPS = 1e-5  # torch.nn.InstanceNorm2d's default, as the OpenPhenom recipe uses it
NORMALIZE_IMAGE = "image"
NORMALIZE_CROP = "crop"
NORMALIZATIONS = (NORMALIZE_IMAGE, NORMALIZE_CROP)


def dtype_max(dtype: np.dtype | str) -> float:
    """The largest value of an integer dtype (255 for uint8, 65535 for uint16)."""
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED_DTYPES:  # as strict as the plate stores
        raise ScreenError(f"unsupported dtype {dtype}; expected uint8 or uint16")
    return float(np.iinfo(dtype).max)


def scale_intensity(
    tiles: np.ndarray | torch.Tensor, intensity_max: float | None = None, source: str = "tiles"
) -> torch.Tensor:
    """Integer tiles (n, C, H, W) -> float32 tensor in [0, 1] (values above ``intensity_max`` clip).

    A numpy array comes back on the CPU, a tensor stays on its device. Without
    ``intensity_max`` the dtype's maximum maps to 1.0. Non-finite values cannot occur in
    integer tiles; a float array is checked and rejected with the index of its first bad image.
    """
    if isinstance(tiles, torch.Tensor):
        if tiles.is_floating_point():
            if not bool(tiles.isfinite().all()):  # on the tiles' device; to the host only to name the image
                _check_pixels_finite(tiles.detach().cpu().to(_host_float(tiles.dtype)).numpy(), source)
            top = intensity_max if intensity_max is not None else 1.0
        else:
            top = intensity_max if intensity_max is not None else dtype_max(str(tiles.dtype).removeprefix("torch."))
        return (tiles.to(torch.float32) / float(top)).clamp_(0.0, 1.0)
    arr = np.asarray(tiles)
    if arr.dtype.kind != "f" and arr.dtype not in SUPPORTED_DTYPES:
        raise ScreenError(f"{source}: unsupported dtype {arr.dtype}; expected uint8 or uint16")
    if arr.dtype.kind == "f":
        _check_pixels_finite(arr, source)
        top = intensity_max if intensity_max is not None else 1.0
    else:
        top = intensity_max if intensity_max is not None else dtype_max(arr.dtype)
    x = torch.from_numpy(arr.astype(np.float32, copy=False))
    return (x / float(top)).clamp_(0.0, 1.0)


def _check_pixels_finite(tiles: np.ndarray, source: str) -> None:
    """ScreenError ``"{source}: non-finite pixels in image i"`` for the first image with NaN or inf."""
    check_finite(tiles, source, row_label=lambda i: f"non-finite pixels in image {i}")


def _host_float(dtype: torch.dtype) -> torch.dtype:
    """A float dtype numpy holds that keeps every value of ``dtype`` (bfloat16 -> float32)."""
    return torch.float32 if dtype == torch.bfloat16 else dtype


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


def normalize_crops(crops: torch.Tensor, eps: float = INSTANCE_NORM_EPS) -> torch.Tensor:
    """Crops (n, k, C, s, s) through torch's instance norm (per crop and channel, no affine)."""
    n, k = crops.shape[:2]
    flat = crops.reshape(n * k, *crops.shape[2:])
    return F.instance_norm(flat, eps=eps).reshape(crops.shape)


def prepare(
    tiles: np.ndarray | torch.Tensor,
    crop: int,
    intensity_max: float | None = None,
    source: str = "tiles",
    normalize: str = NORMALIZE_IMAGE,
) -> torch.Tensor:
    """Scale, normalize and crop: integer tiles (n, C, H, W) -> float32 crops (n, k, C, crop, crop).

    ``normalize`` is ``"image"`` (per image, then crop) or ``"crop"`` (crop, then per crop);
    see the module docstring. The result is on the tiles' device.
    """
    if normalize == NORMALIZE_IMAGE:
        return crop_grid(normalize_per_channel(scale_intensity(tiles, intensity_max, source)), crop, source)
    if normalize == NORMALIZE_CROP:
        return normalize_crops(crop_grid(scale_intensity(tiles, intensity_max, source), crop, source))
    raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {normalize!r}")
