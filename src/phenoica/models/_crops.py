"""The random crops of MAE pretraining: :class:`CropSampler`.

Each training step takes ``batch_size`` random ``crop`` x ``crop`` crops of randomly chosen
training images, every image scaled (:func:`phenoica.screen.scale_intensity`) and
normalized per channel over the whole image (:func:`phenoica.screen._preprocess.normalize_per_channel`,
``(x - mean) / (sd + eps)``) before it is cut. Once an image's per-channel mean and SD are known
that normalization is elementwise, so :class:`CropSampler` computes them once per image (one
pass over the training images) and each step scales and normalizes only the pixels of its
crops: the same float32 numbers, bit for bit, as normalizing every chosen image whole at every
step, for a small part of the work.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view

from phenoica.contract import ScreenError
from phenoica.screen import EPS, scale_intensity

STATS_CHUNK_BYTES = 64 * 2**20
"""Float32 bytes of images scaled at a time while the per-channel statistics are computed."""


def channel_stats(
    images: np.ndarray, intensity_max: float | None = None, source: str = "tiles"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per image and channel, the mean and ``sd + EPS`` over H x W of the scaled images (n, C, H, W):
    two float32 tensors (n, C, 1, 1), the terms of :func:`phenoica.screen._preprocess.normalize_per_channel`,
    computed as it computes them, a bounded number of images at a time."""
    per_image = 4 * int(np.prod(images.shape[1:], dtype=np.int64))
    step = max(1, STATS_CHUNK_BYTES // max(per_image, 1))
    means, scales = [], []
    for start in range(0, len(images), step):
        x = scale_intensity(images[start : start + step], intensity_max, source)
        means.append(x.mean(dim=(-2, -1), keepdim=True))
        scales.append(x.std(dim=(-2, -1), keepdim=True, unbiased=False) + EPS)
    return torch.cat(means), torch.cat(scales)


class CropSampler:
    """Random normalized crops of training images, one batch per call of :meth:`batch`.

    ``images``: one integer array (n_p, C, H, W) per plate store (their images are drawn
    together, uniformly); ``crop``: the crop side; ``intensity_max``: the intensity that scales
    to 1 (None = the dtype's maximum). Images smaller than the crop raise ScreenError.
    """

    def __init__(self, images: Sequence[np.ndarray], crop: int, intensity_max: float | None = None) -> None:
        self.images = list(images)
        self.crop = int(crop)
        self.intensity_max = intensity_max
        for array in self.images:
            h, w = array.shape[-2:]
            if h < crop or w < crop:
                raise ScreenError(f"training images are {h}x{w}, smaller than the model's img_size {crop}")
        self.sizes = torch.tensor([len(a) for a in self.images])
        self.owner = torch.repeat_interleave(torch.arange(len(self.images)), self.sizes)
        self.offsets = torch.cumsum(self.sizes, 0) - self.sizes
        self.stats = [channel_stats(a, intensity_max, self._source(p)) for p, a in enumerate(self.images)]

    @staticmethod
    def _source(store: int) -> str:
        return f"training images of store {store}"

    def batch(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        """(batch_size, C, crop, crop) float32 crops (CPU), grouped by store in store order.

        Draws from ``generator``: the images, then per store the crops' top and left offsets.
        """
        pick = torch.randint(0, int(self.sizes.sum()), (batch_size,), generator=generator)
        owners = self.owner[pick]
        parts = [
            self._store_crops(p, (pick[owners == p] - self.offsets[p]).numpy(), generator)
            for p in owners.unique().tolist()
        ]
        return torch.cat(parts)

    def _store_crops(self, store: int, rows: np.ndarray, generator: torch.Generator) -> torch.Tensor:
        """Random crops of images ``rows`` of one store, scaled and normalized by their image's statistics."""
        array = self.images[store]
        h, w = array.shape[-2:]
        tops = torch.randint(0, h - self.crop + 1, (len(rows),), generator=generator).numpy()
        lefts = torch.randint(0, w - self.crop + 1, (len(rows),), generator=generator).numpy()
        windows = sliding_window_view(array, (self.crop, self.crop), axis=(2, 3))  # (n, C, h', w', crop, crop)
        raw = windows[rows, :, tops, lefts]  # (k, C, crop, crop): the indexed axes come first
        mean, scale = self.stats[store]
        return (scale_intensity(raw, self.intensity_max, self._source(store)) - mean[rows]) / scale[rows]
