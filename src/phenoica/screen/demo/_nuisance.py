"""The microscope's batch, plate and image nuisances: magnification, optics, detector, noise."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from phenoica.screen._options import DemoOptions
from phenoica.screen.demo._cells import ZOOM_RANGE, blur
from phenoica.screen.demo._design import batch_of, check_demo
from phenoica.utils import rng_from_sequence

NUISANCE_PREFIX = "nuisance_"


def nuisance_table(demo: DemoOptions, plate: str, n_images: int) -> pd.DataFrame:
    """Per-image nuisance parameters of a plate: batch level from (demo.seed, batch), plate
    level from (demo.seed, plate), small per-image jitter from (demo.seed, plate); all scaled by batch_strength.

    Columns ``nuisance_{gain,offset,gamma,crosstalk}_{channel}`` and ``nuisance_gradient_x``,
    ``nuisance_gradient_y``, ``nuisance_vignette``, ``nuisance_blur`` (px, defocus),
    ``nuisance_noise`` (multiplier of demo.noise) and ``nuisance_zoom`` (magnification relative
    to nominal: the same cells look bigger and fewer fit in the field, so apparent morphology
    shifts with the batch). With batch_strength 0 every image gets the neutral values.
    """
    check_demo(demo)
    batch = batch_of(demo, plate)
    channels = list(demo.channels)
    n_ch, s = len(channels), float(demo.batch_strength)
    px = demo.image_size / 64.0

    def level(rng: np.random.Generator, scale: float) -> dict[str, np.ndarray]:
        angle = rng.uniform(0.0, 2.0 * math.pi)
        strength = scale * s * 0.3 * rng.uniform(0.3, 1.0)
        cross = scale * s * 0.12 * rng.uniform(0.0, 1.0, n_ch)
        cross[0] = 0.0
        return {
            "log_gain": scale * s * 0.3 * rng.standard_normal(n_ch),
            "offset": scale * s * 0.03 * rng.standard_normal(n_ch),
            "log_gamma": scale * s * 0.2 * rng.standard_normal(n_ch),
            "crosstalk": cross,
            "gradient": strength * np.array([math.cos(angle), math.sin(angle)]),
            "vignette": np.array(scale * s * 0.3 * rng.uniform(0.0, 1.0)),
            "blur": np.array(scale * s * 0.9 * px * rng.uniform(0.0, 1.0)),
            "log_noise": np.array(scale * s * 0.3 * rng.standard_normal()),
            "log_zoom": np.array(scale * s * 0.08 * rng.standard_normal()),
        }

    bat = level(rng_from_sequence(demo.seed, "batch", batch), 1.0)
    pla = level(rng_from_sequence(demo.seed, "plate", plate), 0.3)
    rng = rng_from_sequence(demo.seed, "image-nuisance", plate)
    jit_gain = s * 0.05 * rng.standard_normal((n_images, n_ch))
    jit_blur = s * 0.25 * px * np.abs(rng.standard_normal(n_images))
    jit_grad = s * 0.03 * rng.standard_normal((n_images, 2))
    jit_zoom = s * 0.01 * rng.standard_normal(n_images)

    table: dict[str, Any] = {}
    for c, name in enumerate(channels):
        table[f"{NUISANCE_PREFIX}gain_{name}"] = np.exp(bat["log_gain"][c] + pla["log_gain"][c] + jit_gain[:, c])
    for c, name in enumerate(channels):
        table[f"{NUISANCE_PREFIX}offset_{name}"] = np.full(n_images, 0.04 + bat["offset"][c] + pla["offset"][c])
    for c, name in enumerate(channels):
        table[f"{NUISANCE_PREFIX}gamma_{name}"] = np.full(n_images, math.exp(bat["log_gamma"][c] + pla["log_gamma"][c]))
    for c, name in enumerate(channels):
        table[f"{NUISANCE_PREFIX}crosstalk_{name}"] = np.full(n_images, bat["crosstalk"][c] + pla["crosstalk"][c])
    gradient = bat["gradient"] + pla["gradient"] + jit_grad
    table[f"{NUISANCE_PREFIX}gradient_x"] = gradient[:, 0]
    table[f"{NUISANCE_PREFIX}gradient_y"] = gradient[:, 1]
    table[f"{NUISANCE_PREFIX}vignette"] = np.full(n_images, float(bat["vignette"] + pla["vignette"]))
    table[f"{NUISANCE_PREFIX}blur"] = float(bat["blur"] + pla["blur"]) + jit_blur
    table[f"{NUISANCE_PREFIX}noise"] = np.full(n_images, math.exp(float(bat["log_noise"] + pla["log_noise"])))
    zoom = np.exp(float(bat["log_zoom"] + pla["log_zoom"]) + jit_zoom)
    table[f"{NUISANCE_PREFIX}zoom"] = np.clip(zoom, *ZOOM_RANGE)
    out = pd.DataFrame(table)
    offsets = out[[f"{NUISANCE_PREFIX}offset_{c}" for c in channels]]
    out[offsets.columns] = offsets.clip(lower=0.0)
    return out


def apply_nuisance(
    clean: np.ndarray,
    nuisance: pd.DataFrame,
    channels: Sequence[str],
    noise: float,
    dtype: np.dtype | str,
    rng: np.random.Generator,
) -> np.ndarray:
    """Image clean renders (n, C, H, W) through the microscope described by ``nuisance``.

    In order: bleed-through from the previous channel, defocus blur, illumination gradient
    and vignetting, per-channel gamma, gain and background offset, then Gaussian noise of SD
    ``noise * nuisance_noise * sqrt(0.25 + signal)``; clipped and quantized to ``dtype``.
    """
    x = np.asarray(clean, dtype=np.float32)
    n, n_ch, h, w = x.shape
    if len(nuisance) != n or len(channels) != n_ch:
        raise ValueError(
            f"nuisance table has {len(nuisance)} rows for {n} images and {len(channels)} channels for {n_ch}"
        )

    def per(kind: str) -> np.ndarray:
        cols = [f"{NUISANCE_PREFIX}{kind}_{c}" for c in channels]
        return nuisance[cols].to_numpy(np.float32).reshape(n, n_ch, 1, 1)

    def one(kind: str) -> np.ndarray:
        return nuisance[f"{NUISANCE_PREFIX}{kind}"].to_numpy(np.float32)

    if n_ch > 1:
        x = x.copy()
        x[:, 1:] += per("crosstalk")[:, 1:] * x[:, :-1]
    x = blur(x, one("blur"))
    yy = np.linspace(-1.0, 1.0, h, dtype=np.float32)[:, None]
    xx = np.linspace(-1.0, 1.0, w, dtype=np.float32)[None, :]
    field = (
        1.0
        + one("gradient_x")[:, None, None] * xx
        + one("gradient_y")[:, None, None] * yy
        - one("vignette")[:, None, None] * (xx**2 + yy**2) / 2.0
    )
    x = x * np.maximum(field, 0.2)[:, None]
    x = np.maximum(x, 0.0) ** per("gamma")
    x = x * per("gain") + per("offset")
    sd = float(noise) * one("noise").reshape(n, 1, 1, 1) * np.sqrt(0.25 + np.clip(x, 0.0, 1.0))
    x = x + sd * rng.standard_normal(x.shape, dtype=np.float32)
    top = float(np.iinfo(np.dtype(dtype)).max)
    return np.rint(np.clip(x, 0.0, 1.0) * top).astype(dtype)
