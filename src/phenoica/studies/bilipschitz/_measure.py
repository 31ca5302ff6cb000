"""Per-sample bi-Lipschitz estimates from exact encoder Jacobians, and one training job per (dataset, alpha, group)."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
import torch

from phenoica.studies._plan import dataset_groups
from phenoica.studies.bilipschitz._cross_seed import gather_dataset
from phenoica.studies.bilipschitz._data import isometric_embed, load_group_data
from phenoica.studies.bilipschitz._model import (
    Autoencoder,
    TrainSettings,
    late_improvement,
    negative_slope,
    train_autoencoder,
)
from phenoica.studies.bilipschitz._options import (
    BilipschitzGatherOptions,
    BilipschitzReportOptions,
    BilipschitzTrainOptions,
)
from phenoica.studies.bilipschitz._report import write_report

LOG = logging.getLogger(__name__)


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
    options: BilipschitzTrainOptions,
    log: logging.Logger | None = None,
    data: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Train one autoencoder of (dataset, group, alpha, seed) and measure it (settings: ``options``).

    Returns :func:`measure_model`'s table with ``dataset``, ``group``, ``alpha``, ``slope``,
    ``seed``, ``parametrization``, ``final_loss`` and ``late_improvement`` (relative loss fall
    over the last 10% of epochs, :func:`late_improvement`) in front. ``data`` (as
    :func:`load_group_data` returns it) saves reloading when several models share it.
    """
    log = log or LOG
    data = data if data is not None else load_group_data(dataset, group, options)
    train = TrainSettings.from_options(options, dataset)
    param = train.parametrization
    start = time.perf_counter()
    model, hist = train_autoencoder(data["x"], alpha, seed, train)
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
    table = measure_model(model, data, int(options.max_jacobian_samples), seed)
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
    dataset: str, group: str, alpha: float, options: BilipschitzTrainOptions, log: logging.Logger | None = None
) -> pd.DataFrame:
    """Every seed of (dataset, group, alpha): :func:`run_model` per ``options.seeds``, one table (a job of the DAG)."""
    data = load_group_data(dataset, group, options)
    return pd.concat(
        [run_model(dataset, group, alpha, int(s), options, log, data=data) for s in options.seeds],
        ignore_index=True,
    )


def run_sweep(config: Mapping[str, Any], out_dir: Path | str, log: logging.Logger | None = None) -> dict[str, Path]:
    """The whole study in one process (what the DAG does job by job) from a validated ``config``
    (:func:`phenoica.contract.validate_config`): train and measure every (dataset, group,
    alpha, seed) of ``bilipschitz.datasets``, ``per_digit`` and ``alphas``, gather per dataset,
    write the report; each step reads the options its rule takes."""
    train = BilipschitzTrainOptions.from_config(config)
    gather = BilipschitzGatherOptions.from_config(config)
    report = BilipschitzReportOptions.from_config(config)
    study = config["bilipschitz"]
    models, pairs, samples = [], [], []
    for ds in study["datasets"]:
        runs = [
            run_alpha(ds, g, float(a), train, log)
            for g in dataset_groups(ds, study["per_digit"])
            for a in study["alphas"]
        ]
        m, p, smp = gather_dataset(runs, float(gather.train_fraction), gather.seed)
        models.append(m), pairs.append(p), samples.append(smp)
    return write_report(
        out_dir,
        pd.concat(models, ignore_index=True),
        pd.concat(pairs, ignore_index=True),
        pd.concat(samples, ignore_index=True),
        n_boot=int(report.n_bootstrap),
        seed=report.seed,
    )
