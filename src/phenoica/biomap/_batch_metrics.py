"""How much batch effect is left in a profile table: the scIB family's batch-mixing scores.

Computed with scikit-learn (scib-metrics was measured: it pulls jax, jaxlib, scanpy, numba and
igraph and would move pandas back to 2.x in this environment; see docs/gene-maps.md). Formulas:

- **ASW-batch** (Luecken et al. 2022, scIB): within each biological group ``g`` (a gene; the
  controls are one group), the silhouette ``s(i)`` of every profile with the batch as its label
  (Euclidean, ``sklearn.metrics.silhouette_samples``); ``ASW_g = mean_i (1 - |s(i)|)``;
  ASW-batch = mean over groups with at least two batches. 1 = batches perfectly mixed,
  0 = separated.
- **kNN iLISI** (Korsunsky et al. 2019, Harmony; the kNN form of scIB's graph iLISI): for every
  profile, the inverse Simpson index ``1 / sum_b p_b^2`` of the batch labels among its ``k``
  nearest neighbours (itself excluded, uniform weights), averaged; reported also normalized as
  ``(iLISI - 1) / (n_batches - 1)`` in [0, 1] (1 = every neighbourhood holds all batches evenly).
- **Batch classifier**: a multinomial logistic regression predicting the batch from the profile,
  scored out of fold (stratified 5-fold, whole wells kept together when the table has wells);
  balanced accuracy, whose chance level is ``1 / n_batches``; ``batch_excess`` =
  ``(accuracy - chance) / (1 - chance)`` clipped to [0, 1] (0 = at chance).

``batch_removal`` = mean of ASW-batch, normalized iLISI and ``1 - batch_excess``: one number
per table, higher = less batch effect. A table with a single batch gets no scores and a
recorded reason. Large tables are subsampled (seeded) to ``max_samples`` rows.
"""

from __future__ import annotations

import logging
import math
import warnings
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score, silhouette_samples
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold
from sklearn.neighbors import NearestNeighbors
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from phenoica.biomap._options import BatchMetricsOptions
from phenoica.contract import BATCH, CONTROL, GENE, PERT_TYPE, PLATE, WELL, check_matrix, feature_columns
from phenoica.profiles import DEFAULT_BATCH_ROWS, ProfileSource, WellMeans, batch_features, split_columns
from phenoica.utils import check_same_variants, derive_seed, write_parquet

LOG = logging.getLogger(__name__)

SUBSETS: tuple[str, ...] = ("controls", "all")
COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    "subset",
    "n_profiles",
    "n_batches",
    "asw_batch",
    "ilisi",
    "ilisi_norm",
    "batch_accuracy",
    "batch_chance",
    "batch_excess",
    "batch_removal",
    "reason",
)


def well_profile_table(path: str, batch_rows: int = DEFAULT_BATCH_ROWS) -> pd.DataFrame:
    """A profile parquet as well profiles (mean of each (plate, well)'s rows), streamed in row
    batches so an image-level table is never held whole; a table without wells as it is."""
    src = ProfileSource(path, batch_rows)
    meta, features = split_columns(src.columns)
    if WELL not in meta or PLATE not in meta:
        return pd.read_parquet(path)
    kept = [c for c in (BATCH, GENE, "Metadata_Guide", PERT_TYPE) if c in meta]
    wells = WellMeans(kept, len(features))
    for batch in src.batches([PLATE, WELL, *kept, *features]):
        wells.update(batch, batch_features(batch, features))
    table, means = wells.result()
    return pd.concat([table.to_pandas(), pd.DataFrame(means, columns=features)], axis=1)


def asw_batch(X: np.ndarray, batch: np.ndarray, group: np.ndarray) -> float:
    """scIB's ASW-batch: mean over groups of mean(1 - |silhouette by batch|); groups with fewer
    than two batches (or fewer than three profiles) are left out; NaN when none is left."""
    scores = []
    for g in pd.unique(group):
        rows = np.flatnonzero(group == g)
        labels = batch[rows]
        n_labels = len(np.unique(labels))
        if n_labels < 2 or rows.size <= n_labels:
            continue
        sil = silhouette_samples(X[rows], labels, metric="euclidean")
        scores.append(float(np.mean(1.0 - np.abs(sil))))
    return float(np.mean(scores)) if scores else math.nan


def knn_ilisi(X: np.ndarray, batch: np.ndarray, k: int) -> tuple[float, float]:
    """(mean inverse Simpson index of the batches among each profile's k nearest neighbours,
    the same normalized to [0, 1] by (iLISI - 1) / (n_batches - 1))."""
    n = X.shape[0]
    k = min(int(k), n - 1)
    codes, labels = pd.factorize(batch)
    n_batches = len(labels)
    if k < 1 or n_batches < 2:
        return math.nan, math.nan
    idx = NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X, return_distance=False)
    neighbours = codes[idx[:, 1:]]
    counts = np.zeros((n, n_batches))
    np.add.at(counts, (np.repeat(np.arange(n), k), neighbours.ravel()), 1.0)
    p = counts / k
    ilisi = 1.0 / np.sum(p * p, axis=1)
    value = float(ilisi.mean())
    return value, (value - 1.0) / (n_batches - 1)


def batch_classifier(
    X: np.ndarray, batch: np.ndarray, wells: np.ndarray | None, seed: int, n_folds: int = 5
) -> tuple[float, float]:
    """(out-of-fold balanced accuracy of a logistic regression predicting the batch, chance =
    1 / n_batches). Folds are stratified by batch; with ``wells`` a well's profiles stay in one fold."""
    codes, labels = pd.factorize(batch)
    chance = 1.0 / len(labels)
    per_batch = np.bincount(codes).min()
    folds = int(min(n_folds, per_batch))
    if folds < 2:
        return math.nan, chance
    if wells is not None and len(np.unique(wells)) >= folds * len(labels):
        splitter: Any = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
        splits = splitter.split(X, codes, wells)
    else:
        splits = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(X, codes)
    predicted = np.empty_like(codes)
    for train, test in splits:
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X[train], codes[train])
        predicted[test] = model.predict(X[test])
    return float(balanced_accuracy_score(codes, predicted)), chance


def batch_scores(
    table: pd.DataFrame,
    *,
    model: str,
    variant: str,
    subset: str,
    seed: int,
    n_neighbors: int,
    max_samples: int,
) -> dict[str, Any]:
    """All scores of one table (one row of :data:`COLUMNS`); a single batch = NaNs and a reason."""
    row: dict[str, Any] = {c: math.nan for c in COLUMNS}
    row.update(model=model, variant=variant, subset=subset, n_profiles=len(table), reason="")
    batches = table[BATCH].astype(str).to_numpy() if BATCH in table.columns else np.array([])
    row["n_batches"] = int(len(np.unique(batches)))
    if row["n_batches"] < 2:
        row["reason"] = f"{row['n_batches']} batch(es) among the {len(table)} {subset} profiles: batch mixing needs two"
        return row
    if len(table) > max_samples:
        keep = np.sort(
            np.random.default_rng(derive_seed(seed, "batch_metrics", model, variant, subset)).choice(
                len(table), max_samples, replace=False
            )
        )
        table = table.iloc[keep]
        batches = batches[keep]
    features = feature_columns(table)
    X = check_matrix(
        table[features].to_numpy(np.float64), f"batch metrics {model}/{variant}/{subset}", len(features), features
    )
    groups = table[GENE].astype(str).to_numpy() if GENE in table.columns else np.zeros(len(table))
    wells = (
        (table[PLATE].astype(str) + "/" + table[WELL].astype(str)).to_numpy()
        if PLATE in table.columns and WELL in table.columns
        else None
    )
    row["asw_batch"] = asw_batch(X, batches, groups)
    row["ilisi"], row["ilisi_norm"] = knn_ilisi(X, batches, n_neighbors)
    row["batch_accuracy"], row["batch_chance"] = batch_classifier(
        X, batches, wells, derive_seed(seed, "batch_classifier", model, variant, subset)
    )
    chance = row["batch_chance"]
    if np.isfinite(row["batch_accuracy"]):
        row["batch_excess"] = float(np.clip((row["batch_accuracy"] - chance) / (1.0 - chance), 0.0, 1.0))
    parts = [row["asw_batch"], row["ilisi_norm"], 1.0 - row["batch_excess"]]
    finite = [p for p in parts if np.isfinite(p)]
    row["batch_removal"] = float(np.mean(finite)) if finite else math.nan
    return row


def batch_metrics(
    table: pd.DataFrame,
    options: BatchMetricsOptions,
    *,
    model: str,
    variant: str,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """Batch-mixing scores of a (model, variant) profile table on its controls and on all its
    profiles (:data:`SUBSETS`); one row each, :data:`COLUMNS`, by the ``batch_metrics`` rule's
    ``options`` (seed, iLISI's k, the profiles' cap)."""
    log = log or LOG
    is_control = (table[PERT_TYPE] == CONTROL).to_numpy() if PERT_TYPE in table.columns else np.zeros(len(table), bool)
    rows = []
    for subset, part in (("controls", table[is_control]), ("all", table)):
        row = batch_scores(
            part,
            model=model,
            variant=variant,
            subset=subset,
            seed=options.seed,
            n_neighbors=options.batch_neighbors,
            max_samples=options.batch_max_samples,
        )
        if row["reason"]:
            log.warning("batch metrics %s/%s (%s): skipped: %s", model, variant, subset, row["reason"])
        else:
            log.info(
                "batch metrics %s/%s (%s, %d profiles, %d batches): ASW-batch %.3f, iLISI %.3f (norm %.3f), "
                "batch accuracy %.3f (chance %.3f)",
                model,
                variant,
                subset,
                row["n_profiles"],
                row["n_batches"],
                row["asw_batch"],
                row["ilisi"],
                row["ilisi_norm"],
                row["batch_accuracy"],
                row["batch_chance"],
            )
        rows.append(row)
    out = pd.DataFrame(rows, columns=list(COLUMNS))
    out["n_profiles"] = out["n_profiles"].astype(np.int64)
    out["n_batches"] = out["n_batches"].astype(np.int64)
    return out


def batch_metrics_files(
    profiles: Mapping[str, Path | str],
    outputs: Mapping[str, Path | str],
    options: BatchMetricsOptions,
    *,
    model: str,
    log: logging.Logger | None = None,
) -> None:
    """Batch-mixing scores of each variant of ``model`` (:func:`batch_metrics` on the well
    profiles of its table, :func:`well_profile_table`), one variant after the other: ``profiles``
    maps a variant to its profile table, ``outputs`` to the parquet it writes (atomically)."""
    log = log or LOG
    check_same_variants(profiles, outputs, "profiles")
    for i, (variant, out_path) in enumerate(outputs.items(), 1):
        wells = well_profile_table(str(profiles[variant]))
        write_parquet(batch_metrics(wells, options, model=model, variant=variant, log=log), out_path)
        log.info("variant %s (%d of %d): batch metrics on %d well profiles", variant, i, len(outputs), len(wells))
