"""Gather per-plate embeddings into one profile table, from phenoica or from elsewhere.

Entry points: the embed rule's parquet files, or any parquet in the data contract's shape
(``Metadata_*`` columns + float feature columns, or one list-valued embedding column).
Analysis level: per image, or per well (mean of the well's images).
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from phenoica import screen
from phenoica.screen import ScreenError, feature_columns, feature_name, metadata_columns

def expand_embedding_column(df: pd.DataFrame, column: str, source: str = "embeddings") -> pd.DataFrame:
    """Replace one list-valued embedding column by float32 ``emb_*`` columns."""
    if column not in df.columns:
        raise ScreenError(f"{source}: embedding column {column!r} not found; columns are {list(df.columns)[:12]}")
    lengths = df[column].map(lambda v: -1 if v is None else len(v))
    if (lengths < 0).any():
        raise ScreenError(f"{source}: column {column!r} row {int(np.flatnonzero(lengths < 0)[0])} is empty")
    if lengths.nunique() != 1:
        row = int(np.flatnonzero(lengths != lengths.iloc[0])[0])
        raise ScreenError(
            f"{source}: column {column!r} row {row} has length {lengths.iloc[row]}, expected {lengths.iloc[0]}"
        )
    values = np.stack(df[column].to_numpy()).astype(np.float32)
    features = pd.DataFrame(values, columns=[feature_name(i) for i in range(values.shape[1])], index=df.index)
    return pd.concat([df.drop(columns=[column]), features], axis=1)


def check_features(df: pd.DataFrame, source: str = "embeddings") -> list[str]:
    """Feature columns of ``df``: numeric and finite, else a ScreenError naming the columns."""
    features = feature_columns(df)
    if not features:
        raise ScreenError(f"{source}: no feature columns (everything is Metadata_*)")
    non_numeric = [c for c in features if not pd.api.types.is_numeric_dtype(df[c])]
    if non_numeric:
        raise ScreenError(f"{source}: non-numeric feature column(s) {non_numeric[:10]}; prefix metadata with Metadata_")
    values = df[features].to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values).all(axis=0)
    if bad.any():
        cols = [features[i] for i in np.flatnonzero(bad)]
        raise ScreenError(f"{source}: non-finite values (NaN/inf) in feature column(s) {cols[:10]}")
    return features


def read_embeddings(paths: Sequence[Path | str], embedding_column: str | None = None) -> pd.DataFrame:
    """Read and concatenate embedding parquets; expand a list-valued column if named.

    Every file must have the analysis metadata columns and the same feature columns.
    """
    if not paths:
        raise ScreenError("no embedding files given")
    frames = []
    reference: list[str] | None = None
    for path in paths:
        df = pd.read_parquet(path)
        if embedding_column is not None:
            df = expand_embedding_column(df, embedding_column, source=str(path))
        screen.validate_profile_metadata(df, source=str(path))
        features = check_features(df, source=str(path))
        if reference is None:
            reference = features
        elif features != reference:
            raise ScreenError(
                f"{path}: feature columns differ from {paths[0]} ({len(features)} vs {len(reference)} columns)"
            )
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    for col in screen.PROFILE_COLUMNS:
        out[col] = out[col].astype(str)
    screen.validate_profile_metadata(out, source="embeddings (all files)")
    return out


def aggregate_wells(df: pd.DataFrame) -> pd.DataFrame:
    """Mean profile per (plate, well); metadata constant within a well is kept, the rest dropped."""
    if screen.WELL not in df.columns:
        raise ScreenError(f"well-level analysis needs the {screen.WELL} column")
    keys = [screen.PLATE, screen.WELL]
    meta = metadata_columns(df)
    features = feature_columns(df)
    grouped = df.groupby(keys, sort=True, observed=True)
    constant = [c for c in meta if c not in keys and (grouped[c].nunique(dropna=False) <= 1).all()]
    out_meta = grouped[constant].first().reset_index()
    out_feat = grouped[features].mean().reset_index(drop=True).astype(np.float32)
    out = pd.concat([out_meta, out_feat], axis=1)
    out["Metadata_NImages"] = grouped.size().to_numpy()
    return out[[*metadata_columns(out), *features]]


def gather_profiles(
    paths: Sequence[Path | str], level: str = "image", embedding_column: str | None = None
) -> pd.DataFrame:
    """Embedding files -> one profile table at the requested analysis level (image or well)."""
    df = read_embeddings(paths, embedding_column)
    if level == "well":
        df = aggregate_wells(df)
    elif level != "image":
        raise ValueError(f"profiles.level must be 'image' or 'well', got {level!r}")
    df[feature_columns(df)] = df[feature_columns(df)].astype(np.float32)
    return df.reset_index(drop=True)


def expand_glob(pattern: str) -> list[str]:
    """Sorted files matching a glob; a clear error when nothing matches."""
    files = sorted(glob.glob(pattern))
    if not files:
        raise ScreenError(f"screen.embeddings: no file matches {pattern!r}")
    return files
