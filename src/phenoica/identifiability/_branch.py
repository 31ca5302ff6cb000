"""The workflow's identifiability branch: model-to-model alignment (Nelson et al. 2026 Table 1) and
recovery of known generative factors (structural identifiability), on profile tables.

Row matching between tables is by the image's identity (plate + image index, or plate + well
for well-level profiles), never by row order.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from phenoica.contract import FACTOR_PREFIX, IMAGE_INDEX, PLATE, WELL, ScreenError, feature_columns
from phenoica.identifiability import _metrics as metrics
from phenoica.identifiability._options import StructuralOptions, Table1Options
from phenoica.utils import check_same_variants, write_parquet

LOG = logging.getLogger("phenoica.identifiability")


def row_keys(table: pd.DataFrame) -> list[str]:
    """Columns that identify a profile row: (plate, image index) per image, (plate, well) per well."""
    if IMAGE_INDEX in table.columns:
        return [PLATE, IMAGE_INDEX]
    if WELL in table.columns:
        return [PLATE, WELL]
    raise ScreenError(f"profiles need {IMAGE_INDEX} or {WELL} to be matched across tables")


def matched_features(tables: Mapping[str, pd.DataFrame]) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Inner-join several profile tables on their row keys; return the shared keys and each
    table's feature matrix in that common row order."""
    names = list(tables)
    if not names:
        raise ValueError("no tables to match")
    keys = row_keys(tables[names[0]])
    index: pd.DataFrame | None = None
    for name in names:
        t = tables[name]
        if t.duplicated(keys).any():
            raise ScreenError(f"{name}: duplicate rows for keys {keys}")
        k = t[keys].astype(str)
        index = k if index is None else index.merge(k, on=keys)
    assert index is not None
    if len(index) == 0:
        raise ScreenError(f"tables {names} share no rows (keys {keys})")
    out = {}
    for name in names:
        t = tables[name].copy()
        t[keys] = t[keys].astype(str)
        aligned = index.merge(t, on=keys, how="left")
        out[name] = aligned[feature_columns(tables[name])].to_numpy(dtype=np.float64)
    return index, out


def attach_factors(table: pd.DataFrame, factors: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Latents of ``table`` and the ground-truth factors of the same images, row-matched.

    Well-level profiles get each factor's mean over the well's images.
    """
    names = [c for c in factors.columns if str(c).startswith(FACTOR_PREFIX)]
    if not names:
        raise ScreenError(f"factors table has no {FACTOR_PREFIX}* columns")
    keys = row_keys(table)
    f = factors.copy()
    if keys[1] == WELL and WELL not in f.columns:
        raise ScreenError("well-level profiles need Metadata_Well in the factors table")
    f[keys] = f[keys].astype(str)
    f = f.groupby(keys, as_index=False)[names].mean()
    t = table.copy()
    t[keys] = t[keys].astype(str)
    joined = t.merge(f, on=keys, how="inner")
    if len(joined) < len(t):
        raise ScreenError(f"{len(t) - len(joined)} profile rows have no ground-truth factors")
    return joined[feature_columns(table)].to_numpy(np.float64), joined[names].to_numpy(np.float64), names


def structural_scores(
    table: pd.DataFrame, factors: pd.DataFrame, options: StructuralOptions, *, n_neighbors: int = 10
) -> dict[str, Any]:
    """How well the table's latents recover the known factors: MCC, mean linear R^2 (and per
    factor), held-out ridge-probe R^2 (``metrics.probe_r2``, 5-fold; mean and per factor as
    ``probe_r2_factor_XX``), InfoM/InfoE/InfoC (factors discretized into ``options.factor_bins``
    quantile bins, ``n_neighbors`` neighbours in the kNN mutual information).

    At most ``options.max_samples`` rows (seeded subsample) enter the kNN mutual information and
    the logistic regressions of InfoMEC; MCC and R^2 use every row.
    """
    seed, max_samples = options.seed, options.max_samples
    latents, truth, names = attach_factors(table, factors)
    r2 = metrics.linear_r2(latents, truth)
    probe = metrics.probe_r2(latents, truth, seed=seed)
    rows = np.arange(len(latents))
    if len(rows) > max_samples:
        rows = np.sort(np.random.default_rng(seed).choice(rows, size=max_samples, replace=False))
    info = metrics.infomec(
        truth[rows],
        latents[rows],
        n_neighbors=n_neighbors,
        seed=seed,
        n_bins=options.factor_bins,
        infoe_max_iter=options.infoe_max_iter,
    )
    out: dict[str, Any] = {
        "n_samples": len(latents),
        "n_latents": latents.shape[1],
        "n_factors": truth.shape[1],
        "mcc": metrics.mcc(latents, truth),
        "r2_mean": float(np.mean(r2)),
        "probe_r2_mean": float(np.mean(probe)),
        "infom": info["infom"],
        "infoe": info["infoe"],
        "infoc": info["infoc"],
    }
    out.update({f"r2_{name}": float(v) for name, v in zip(names, r2)})
    out.update({f"probe_r2_{name}": float(v) for name, v in zip(names, probe)})
    return out


def alignment_for_variant(
    tables: Mapping[str, pd.DataFrame], variant: str, options: Table1Options, log: Any = None
) -> pd.DataFrame:
    """Table 1 for one variant: every ordered pair of models' profiles, row-matched by image.

    ``options``: the ``align`` rule's settings; at most ``options.max_samples`` matched rows (a
    seeded subsample keeps large screens tractable) enter the maps of
    :meth:`AlignOptions.for_variant`.
    """

    # imported here: the structural jobs load this module too and need none of Table 1's maps (ICA, kNN)
    from phenoica.identifiability._table1 import AlignOptions, alignment_table

    keys, features = matched_features(tables)
    n = len(keys)
    rows = np.arange(n)
    if n > options.max_samples:
        rows = np.sort(np.random.default_rng(options.seed).choice(n, size=options.max_samples, replace=False))
    if log is not None:
        log.info("variant %s: %d matched rows, %d used; models %s", variant, n, len(rows), list(tables))
    table = alignment_table(
        {name: x[rows] for name, x in features.items()}, options=AlignOptions.for_variant(options, variant)
    )
    table.insert(0, "variant", variant)
    if log is not None:
        log.info("\n%s", table.to_string())
    return table


def structural_files(
    tables: Mapping[str, Path | str],
    factors: pd.DataFrame,
    outputs: Mapping[str, Path | str],
    options: StructuralOptions,
    *,
    model: str,
    log: logging.Logger | None = None,
) -> None:
    """:func:`structural_scores` of each variant of ``model``, one variant after the other:
    ``tables`` maps a variant to its profile table, ``outputs`` to the one-row parquet it writes
    (atomically: ``model``, ``variant`` and the scores); ``factors`` are the screen's known
    factors (every plate's)."""
    log = log or LOG
    check_same_variants(tables, outputs, "tables")
    for i, (variant, out_path) in enumerate(outputs.items(), 1):
        scores = structural_scores(pd.read_parquet(tables[variant]), factors, options)
        write_parquet(pd.DataFrame([{"model": model, "variant": variant, **scores}]), out_path)
        shown = {k: scores[k] for k in ("mcc", "r2_mean", "infom", "infoe", "infoc")}
        log.info("%s/%s (%d of %d): %s", model, variant, i, len(outputs), shown)


def alignment_files(
    tables: Mapping[str, Mapping[str, Path | str]],
    outputs: Mapping[str, Path | str],
    options: Table1Options,
    log: logging.Logger | None = None,
) -> None:
    """Table 1 of each variant (:func:`alignment_for_variant`), one variant after the other:
    ``tables`` maps a variant to each model's profile table (model -> path, in the models'
    order), ``outputs`` to the parquet it writes (atomically)."""
    log = log or LOG
    check_same_variants(tables, outputs, "tables")
    for variant, out_path in outputs.items():
        frames = {model: pd.read_parquet(path) for model, path in tables[variant].items()}
        write_parquet(alignment_for_variant(frames, variant, options, log=log), out_path)
