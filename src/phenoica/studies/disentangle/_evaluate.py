"""Scores of a trained model's latents and of the latents derived from the AE's (ICA, random and factor-fitted rotations)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.linalg import orthogonal_procrustes

from phenoica.identifiability import dci, infomec, linear_r2, mcc
from phenoica.studies.disentangle._model import MODELS
from phenoica.studies.disentangle._options import DisentangleEvaluateOptions
from phenoica.transforms import ICARotation, PCAWhitener, RandomRotation
from phenoica.utils import write_parquet

EVALUATED: tuple[str, ...] = ("ae", "beta_vae", "beta_tcvae", "bioae", "ae_ica", "ae_rand", "ae_oracle")


DISENTANGLE_SCORES: tuple[str, ...] = ("infom", "infoe", "infoc", "mcc", "r2", "dci_d", "dci_c", "dci_i")


SCORE_RANGE: tuple[float, float] = (0.0, 1.0)  # every score in DISENTANGLE_SCORES lies in [0, 1]


def read_latents(path: str | Path) -> dict[str, Any]:
    """A training job's latents file; a clear error when keys are missing."""
    with np.load(path, allow_pickle=False) as z:
        missing = {"latents", "factors", "factor_names"} - set(z.files)
        if missing:
            raise ValueError(f"{path}: missing arrays {sorted(missing)}; expected a disentangle latents .npz")
        return {k: z[k] for k in z.files}


def ica_latents(latents: np.ndarray, n_components: int | None, method: str, seed: int) -> np.ndarray:
    """AE + ICA: PCA-whiten (``n_components`` or all latent dimensions) then ICA-rotate, as the screen's pca_ica."""
    k = latents.shape[1] if n_components is None else int(n_components)
    white = PCAWhitener(n_components=k, seed=seed).fit_transform(latents)
    return ICARotation(method=method, seed=seed).fit_transform(white)


def random_rotation_latents(latents: np.ndarray, n_components: int | None, seed: int) -> np.ndarray:
    """AE + random rotation: PCA-whiten as :func:`ica_latents`, then a seeded Haar-random rotation.

    The control for "any rotation" (the screen's pca_rand): InfoM of AE + ICA above this says ICA
    found the factors' axes, not merely that rotating whitened latents changes the score.
    """
    k = latents.shape[1] if n_components is None else int(n_components)
    white = PCAWhitener(n_components=k, seed=seed).fit_transform(latents)
    return RandomRotation(seed=seed).fit_transform(white)


def oracle_rotation_latents(
    latents: np.ndarray, factors: np.ndarray, n_components: int | None, seed: int
) -> np.ndarray:
    """AE + factor-fitted rotation (a reference, not a method: it uses the factors).

    PCA-whiten as :func:`ica_latents`, then the rotation that best maps the whitened latents
    onto the z-scored factor codes (orthogonal Procrustes, ``scipy.linalg.orthogonal_procrustes``,
    factors padded with zero columns to the latent count): it maximizes the summed correlation of
    rotated latent k with factor k. AE + ICA near this row means ICA found the factors' axes about
    as well as a label-guided rotation; this row near the AE means rotating the AE's whitened
    latents cannot align them much better with the factors.
    """
    k = latents.shape[1] if n_components is None else int(n_components)
    white = PCAWhitener(n_components=k, seed=seed).fit_transform(latents)
    f = np.asarray(factors, dtype=np.float64)
    sd = f.std(axis=0)
    target = np.zeros((f.shape[0], max(k, f.shape[1])))
    target[:, : f.shape[1]] = (f - f.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    rotation, _ = orthogonal_procrustes(white, target[:, :k] if k < target.shape[1] else target)
    return white @ rotation


def derived_latents(
    model_name: str,
    latents: np.ndarray,
    options: DisentangleEvaluateOptions,
    seed: int,
    factors: np.ndarray | None = None,
) -> np.ndarray:
    """The latents scored for ``model_name``: the trained model's own, or the AE's transformed
    (``ae_ica``, ``ae_rand``, ``ae_oracle``; the last needs ``factors``), keeping
    ``options.ica_n_components`` whitened components."""
    n_components = options.ica_n_components
    if model_name == "ae_ica":
        return ica_latents(latents, n_components, options.ica_method, seed)
    if model_name == "ae_rand":
        return random_rotation_latents(latents, n_components, seed)
    if model_name == "ae_oracle":
        if factors is None:
            raise ValueError("ae_oracle: the factor-fitted rotation needs the factors")
        return oracle_rotation_latents(latents, factors, n_components, seed)
    if model_name not in MODELS:
        raise ValueError(f"model must be one of {EVALUATED}, got {model_name!r}")
    return latents


def score_latents(
    latents: np.ndarray, factors: np.ndarray, options: DisentangleEvaluateOptions, seed: int, with_dci: bool = True
) -> dict[str, Any]:
    """InfoM/E/C, MCC, mean linear R^2 and DCI of ``latents`` against discrete ``factors``.

    Factors are class codes by construction (:class:`FactorDataset`), so InfoMEC and DCI
    label-encode every factor with all its values (``n_bins=None``; MPI3D's 40-valued factors
    keep 40 classes, as in Hsu et al.); InfoE regresses on all latents, as Nelson et al. (ICLR 2026) define it.
    Returns the :data:`DISENTANGLE_SCORES` as floats (DCI NaN when ``with_dci`` is false), ``nmi``
    (sources x all latents; inactive latents get 0), ``active`` (mask) and ``infoe_sources``
    (each factor's explicitness). The NMI estimator's neighbours and InfoE's iterations are
    ``options``'.
    """
    info = infomec(
        factors,
        latents,
        n_neighbors=options.n_neighbors,
        seed=seed,
        n_bins=None,
        infoe_max_iter=options.infoe_max_iter,
        infoe_all_latents=True,
    )
    nmi_full = np.zeros((factors.shape[1], latents.shape[1]))
    nmi_full[:, info["active"]] = info["nmi"]
    if with_dci:
        d = dci(latents, factors, seed=seed, n_bins=None)
    else:
        d = {"disentanglement": math.nan, "completeness": math.nan, "informativeness": math.nan}
    return {
        "infom": info["infom"],
        "infoe": info["infoe"],
        "infoc": info["infoc"],
        "mcc": mcc(latents, factors),
        "r2": float(linear_r2(latents, factors).mean()),
        "dci_d": d["disentanglement"],
        "dci_c": d["completeness"],
        "dci_i": d["informativeness"],
        "nmi": nmi_full,
        "active": info["active"],
        "infoe_sources": info["infoe_sources"],
    }


def evaluate(
    latents_path: str | Path,
    model_name: str,
    options: DisentangleEvaluateOptions,
    seed: int,
    dataset: str,
    out_path: str | Path,
) -> pd.DataFrame:
    """Score one (dataset, model, seed) from its latents file; ``ae_ica`` / ``ae_rand`` transform the AE's latents first."""
    if model_name not in EVALUATED:
        raise ValueError(f"model must be one of {EVALUATED}, got {model_name!r}")
    z = read_latents(latents_path)
    latents = derived_latents(model_name, z["latents"], options, seed, z["factors"])
    s = score_latents(latents, z["factors"], options, seed)
    row = {
        "dataset": dataset,
        "model": model_name,
        "seed": int(seed),
        **{c: float(s[c]) for c in DISENTANGLE_SCORES},
        "nmi": json.dumps(np.round(s["nmi"], 5).tolist()),
        "factor_names": json.dumps([str(f) for f in z["factor_names"]]),
        "infoe_sources": json.dumps(np.round(s["infoe_sources"], 5).tolist()),
        "images_per_s": float(z["images_per_s"]) if "images_per_s" in z else float("nan"),
        "train_seconds": float(z["seconds"]) if "seconds" in z else float("nan"),
        "loss_first": float(np.mean(z["loss"][:10])) if "loss" in z else float("nan"),
        "loss_last": float(np.mean(z["loss"][-10:])) if "loss" in z else float("nan"),
    }
    df = pd.DataFrame([row])
    write_parquet(df, out_path)
    return df
