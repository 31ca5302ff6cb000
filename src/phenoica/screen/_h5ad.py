"""AnnData (``.h5ad``) as an input: an ``.h5ad`` of embeddings read as the profile table of the
data contract (the export of a run's profiles as AnnData: :mod:`phenoica.report.anndata`).

``screen.embeddings`` may match ``.h5ad`` files (source ``embeddings``). Each is read as the table a
parquet of the same screen holds (:func:`read_h5ad_profiles`: the ``Metadata_*`` obs columns, then
``X`` as float32 columns named by ``var``), and the embedding readers read that table's parquet
encoding in memory (:func:`phenoica.screen.parquet_source`), so every contract check and every feature choice
(``feature_prefix``, ``feature_regex``, ``feature_columns``) works on it exactly as on a parquet
file, naming the ``.h5ad`` file. :func:`h5ad_to_parquet` writes the same table to disk.

``anndata`` is an optional dependency (extra ``scverse``): imported when a function needs it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from phenoica.contract import ScreenError, validate_profile_metadata
from phenoica.utils import write_parquet

log = logging.getLogger("phenoica.screen._h5ad")

H5AD_SUFFIX = ".h5ad"


def read_h5ad_profiles(path: Path | str) -> pd.DataFrame:
    """An ``.h5ad`` of profiles as a phenoica profile table: its ``Metadata_*`` obs columns,
    then ``X`` as float32 columns named by ``var`` (``emb_0000 ...`` for phenoica's embeddings).
    Other obs columns are left out; categorical obs columns become their values (a missing
    value stays missing). An obs without ``Metadata_`` columns, and a feature name given twice
    or also an obs column, are errors naming the file."""
    import anndata as ad

    adata = ad.read_h5ad(str(path))
    meta = adata.obs[[c for c in adata.obs.columns if str(c).startswith("Metadata_")]].reset_index(drop=True)
    if meta.empty and len(adata.obs.columns):
        raise ScreenError(f"{path}: obs has no Metadata_* columns (has {list(adata.obs.columns)[:8]})")
    for col in meta.columns:
        if isinstance(meta[col].dtype, pd.CategoricalDtype):
            meta[col] = meta[col].astype(object).where(meta[col].notna(), None)
    names = [str(v) for v in adata.var_names]
    twice = sorted({n for n in names if names.count(n) > 1} | (set(names) & set(map(str, meta.columns))))
    if twice:
        raise ScreenError(f"{path}: feature name(s) {twice[:8]} of var appear twice (in var, or in var and obs)")
    X = np.asarray(adata.X.toarray() if hasattr(adata.X, "toarray") else adata.X, dtype=np.float32)
    feats = pd.DataFrame(X, columns=names)
    return pd.concat([meta, feats], axis=1)


def read_h5ad_embeddings(path: Path | str) -> pd.DataFrame:
    """An ``.h5ad`` of embeddings (e.g. from scanpy or another embedder) as an embeddings table of
    the data contract (:func:`read_h5ad_profiles`: features named by ``var``), its metadata
    checked as any embeddings input is (:func:`phenoica.contract.validate_profile_metadata`: the
    errors name the file and column)."""
    table = read_h5ad_profiles(path)
    validate_profile_metadata(table, source=str(path))
    return table


def h5ad_to_parquet(path: Path | str, out: Path | str) -> Path:
    """:func:`read_h5ad_embeddings`, written atomically as a parquet embeddings file."""
    return write_parquet(read_h5ad_embeddings(path), out)


def is_h5ad(path: Path | str) -> bool:
    """Whether an embeddings file is an ``.h5ad`` (by its extension, any case)."""
    return str(path).lower().endswith(H5AD_SUFFIX)
