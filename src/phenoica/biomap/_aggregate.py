"""Guide and gene profiles: streamed means of a profile table's rows, optionally centred per batch on controls."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from scipy import sparse

from phenoica.contract import BATCH, CONTROL, GENE, GUIDE, PERT_TYPE, ScreenError, check_matrix
from phenoica.profiles import DEFAULT_BATCH_ROWS, ProfileSource, batch_features, split_columns
from phenoica.transforms import column_values
from phenoica.utils import check_same_variants, write_parquet

LOG = logging.getLogger(__name__)


class _GroupSums:
    """Running per-key sums and row counts of feature rows (keys seen in any order); memory
    holds one (keys x features) float64 array, grown as keys appear."""

    def __init__(self, n_features: int) -> None:
        self.index: dict[tuple[str, ...], int] = {}
        self.sums = np.zeros((0, n_features))
        self.counts = np.zeros(0, dtype=np.int64)
        self.n_features = n_features

    def add(self, keys: Sequence[tuple[str, ...]], X: np.ndarray) -> None:
        codes = np.fromiter((self.index.setdefault(k, len(self.index)) for k in keys), dtype=np.int64, count=len(keys))
        n = len(self.index)
        if n > self.sums.shape[0]:
            grown = max(n, 2 * self.sums.shape[0])
            self.sums = np.vstack([self.sums, np.zeros((grown - self.sums.shape[0], self.n_features))])
            self.counts = np.concatenate([self.counts, np.zeros(grown - self.counts.size, dtype=np.int64)])
        present, local = np.unique(codes, return_inverse=True)  # only the keys of this block
        onehot = sparse.csr_matrix(
            (np.ones(len(codes)), (local, np.arange(len(codes)))), shape=(present.size, len(codes))
        )
        self.sums[present] += np.asarray(onehot @ X.astype(np.float64, copy=False))
        self.counts[present] += np.bincount(local, minlength=present.size)

    def result(self) -> tuple[list[tuple[str, ...]], np.ndarray, np.ndarray]:
        n = len(self.index)
        keys = sorted(self.index, key=self.index.__getitem__)
        return keys, self.sums[:n], self.counts[:n]


def _strings(batch: pa.RecordBatch, name: str) -> np.ndarray:
    return np.asarray(column_values(batch, name)).astype(str)


def control_means(src: ProfileSource, features: Sequence[str]) -> dict[str, np.ndarray]:
    """The mean profile of each batch's control rows (one pass); a batch without controls is an
    error naming it."""
    sums = _GroupSums(len(features))
    seen: set[str] = set()
    for batch in src.batches([*features, BATCH, PERT_TYPE]):
        b = _strings(batch, BATCH)
        seen.update(np.unique(b).tolist())
        ctrl = _strings(batch, PERT_TYPE) == CONTROL
        if ctrl.any():
            sums.add([(x,) for x in b[ctrl]], batch_features(batch, features)[ctrl])
    keys, total, counts = sums.result()
    means = {k[0]: total[i] / counts[i] for i, k in enumerate(keys)}
    missing = sorted(seen - set(means))
    if missing:
        raise ScreenError(
            f"{src.label}: batch(es) {missing[:5]} have no control rows ({PERT_TYPE} == {CONTROL!r}); "
            f"centring on controls needs them (or set biomap.center_on_controls: false)"
        )
    return means


def aggregate_profiles(
    profiles: pd.DataFrame | Path | str,
    center_on_controls: bool,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    log: logging.Logger | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(guide profiles, gene profiles) of a profile table, streamed in row batches.

    Guide rows: ``Metadata_Gene``, ``Metadata_Guide``, ``Metadata_PertType``,
    ``Metadata_NRows`` (rows averaged) and the float32 features (mean of the guide's rows, after
    subtracting each batch's control mean when ``center_on_controls``). Gene rows: the same
    without the guide, ``Metadata_NGuides`` and the mean of the gene's guide profiles.
    """
    log = log or LOG
    src = ProfileSource(profiles, batch_rows, label=None if not isinstance(profiles, pd.DataFrame) else "profiles")
    missing = [c for c in (GENE, GUIDE, PERT_TYPE, *((BATCH,) if center_on_controls else ())) if c not in src.columns]
    if missing:
        raise ScreenError(f"{src.label}: missing column(s) {missing}; expected the data contract's metadata")
    features = split_columns(src.columns)[1]
    if not features:
        raise ScreenError(f"{src.label}: no feature columns")
    centres = control_means(src, features) if center_on_controls else {}
    sums = _GroupSums(len(features))
    read = [*features, GENE, GUIDE, PERT_TYPE, *((BATCH,) if center_on_controls else ())]
    n_rows = 0
    for batch in src.batches(read):
        X = batch_features(batch, features).astype(np.float64)
        X = check_matrix(X, src.label, len(features), features)
        if center_on_controls:
            b = _strings(batch, BATCH)
            for name in np.unique(b):
                X[b == name] -= centres[name]
        keys = list(zip(_strings(batch, GENE), _strings(batch, GUIDE), _strings(batch, PERT_TYPE)))
        sums.add(keys, X)
        n_rows += batch.num_rows
        log.info("aggregate: %d of %d rows", n_rows, src.num_rows)
    keys, total, counts = sums.result()
    meta = pd.DataFrame(keys, columns=[GENE, GUIDE, PERT_TYPE])
    twice = meta[meta.duplicated([GENE, GUIDE], keep=False)]
    if len(twice):
        raise ScreenError(
            f"{src.label}: guide {twice[GUIDE].iloc[0]!r} of gene {twice[GENE].iloc[0]!r} is listed both "
            f"as {sorted(set(twice[PERT_TYPE]))}; a guide has one {PERT_TYPE}"
        )
    meta["Metadata_NRows"] = counts
    guide_values = (total / counts[:, None]).astype(np.float32)
    guides = pd.concat([meta, pd.DataFrame(guide_values, columns=features)], axis=1)
    guides = guides.sort_values([GENE, GUIDE], kind="stable").reset_index(drop=True)
    grouped = guides.groupby([GENE, PERT_TYPE], sort=True)
    gene_meta = grouped.agg(Metadata_NGuides=(GUIDE, "nunique"), Metadata_NRows=("Metadata_NRows", "sum")).reset_index()
    gene_values = grouped[features].mean().reset_index(drop=True).astype(np.float32)
    genes = pd.concat([gene_meta, gene_values], axis=1)
    return guides, genes


def profile_files(
    profiles: Mapping[str, Path | str],
    outputs: Mapping[str, tuple[Path | str, Path | str]],
    center_on_controls: bool,
    log: logging.Logger | None = None,
) -> None:
    """Guide and gene profiles of each variant's profile table (:func:`aggregate_profiles`), one
    variant after the other: ``profiles`` maps a variant to its table, ``outputs`` to its (guide
    profiles, gene profiles) parquets, each written atomically."""
    log = log or LOG
    check_same_variants(profiles, outputs, "profiles")
    for i, (variant, (guides_path, genes_path)) in enumerate(outputs.items(), 1):
        guides, genes = aggregate_profiles(profiles[variant], center_on_controls=center_on_controls, log=log)
        write_parquet(guides, guides_path)
        write_parquet(genes, genes_path)
        log.info(
            "variant %s (%d of %d): %d guide and %d gene profiles", variant, i, len(outputs), len(guides), len(genes)
        )
