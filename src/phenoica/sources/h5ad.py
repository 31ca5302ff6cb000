"""AnnData (``.h5ad``) for the scverse: every profile level of a run, written for scanpy / pertpy.

:func:`to_anndata` turns a profile table of the data contract (``Metadata_*`` columns and
``emb_*`` features) into an AnnData: ``X`` the features (every non-``Metadata_`` column: ``emb_*``, or a variant's ``comp_*``; float32), ``obs`` the ``Metadata_``
columns, ``var`` the feature names, ``uns["phenoica"]`` the level, model and variant. At guide and
gene level the hit calls of that model and variant join ``obs`` (AUROC, p, q, hit; the mAP
readout's where it ran). :func:`export_run` writes every level of every model and variant of a
results folder; :func:`read_h5ad_profiles` reads an ``.h5ad`` back into the profile-table contract.

An ``.h5ad`` of embeddings is an input next to parquet: ``screen.embeddings`` may match ``.h5ad``
files (source ``embeddings``). Each is read as the table a parquet of the same screen holds
(:func:`read_h5ad_profiles`: the ``Metadata_*`` obs columns, then ``X`` as float32 columns named
by ``var``), and the embedding readers read that table's parquet encoding in memory
(:func:`parquet_source`), so every contract check and every feature choice (``feature_prefix``,
``feature_regex``, ``feature_columns``) works on it exactly as on a parquet file, naming the
``.h5ad`` file. :func:`h5ad_to_parquet` writes the same table to disk.

Levels and their files (``{results}``): ``image`` - ``embeddings/{model}/*.parquet`` (before any
variant transform, variant ``base``); ``profile`` - ``variants/{model}/{variant}.parquet`` (the
level of config ``profiles.level``: image or well); ``guide`` and ``gene`` -
``biomap/{model}/{variant}/{guide,gene}_profiles.parquet``.

``anndata`` is an optional dependency (extra ``scverse``): imported when a function needs it.
Command line: ``python -m phenoica.sources.h5ad RESULTS [OUT]`` (OUT defaults to ``RESULTS/anndata``).
"""

from __future__ import annotations

import argparse
import functools
import io
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from phenoica.contract.screen import (
    GENE,
    GUIDE,
    ScreenError,
    feature_columns,
    metadata_columns,
    validate_profile_metadata,
)
from phenoica.utils.io import atomic_path, write_parquet

if TYPE_CHECKING:
    from anndata import AnnData

log = logging.getLogger("phenoica.sources.h5ad")

LEVELS = ("image", "profile", "guide", "gene")
H5AD_SUFFIX = ".h5ad"
#: Hit-call columns joined to obs at guide level (from scores/hits.parquet) and gene level (genes.parquet).
GUIDE_CALLS = ("auroc", "p_value", "q_value", "hit", "mean_average_precision", "map_q_value", "map_hit")
GENE_CALLS = ("n_guides", "n_guides_hit", "auroc", "p_value", "q_value", "hit")


def _column(values: pd.Series) -> pd.Series:
    """One obs column as h5ad readers everywhere accept it: text as plain Python ``str`` objects
    (not pandas' nullable string arrays, which anndata < 0.11 cannot read), calls with missing
    values as nullable booleans, mixed objects as text."""
    if not (pd.api.types.is_string_dtype(values) or values.dtype == object):
        return values
    present = values.dropna()
    if len(present) and all(isinstance(v, (bool, np.bool_)) for v in present):
        return values.astype("boolean")
    return pd.Series([None if pd.isna(v) else str(v) for v in values], dtype=object, index=values.index)


def _obs(meta: pd.DataFrame) -> pd.DataFrame:
    """obs of an AnnData: each column through :func:`_column`, the row number as a string index."""
    out = meta.reset_index(drop=True)
    out = pd.DataFrame({c: _column(out[c]) for c in out.columns})
    out.index = pd.Index([str(i) for i in range(len(out))], dtype=object)
    return out


def to_anndata(
    profiles: pd.DataFrame, level: str, model: str, variant: str, calls: pd.DataFrame | None = None
) -> "AnnData":
    """An AnnData of one profile table; ``calls`` (this model and variant's hit calls) join obs at
    guide level on (gene, guide) and at gene level on gene, prefixed ``call_``."""
    import anndata as ad

    if level not in LEVELS:
        raise ValueError(f"level {level!r}: expected one of {LEVELS}")
    features = feature_columns(profiles)
    if not features:
        raise ScreenError(f"{level} profiles of {model}/{variant}: no feature columns (all are Metadata_*)")
    obs = profiles[metadata_columns(profiles)]
    if calls is not None and level in ("guide", "gene"):
        key, cols = ([GENE, GUIDE], GUIDE_CALLS) if level == "guide" else ([GENE], GENE_CALLS)
        sel = calls[[*key, *[c for c in cols if c in calls.columns]]]
        sel = sel.rename(columns={c: f"call_{c}" for c in cols})
        obs = obs.merge(sel, on=key, how="left", validate="many_to_one")
    adata = ad.AnnData(
        X=profiles[features].to_numpy(np.float32),
        obs=_obs(obs),
        var=pd.DataFrame(index=pd.Index([str(f) for f in features], dtype=object)),
    )
    adata.uns["phenoica"] = {"level": level, "model": model, "variant": variant}
    return adata


def write_h5ad(adata: "AnnData", path: Path | str) -> Path:
    """Write ``adata`` as ``.h5ad`` at ``path`` atomically."""
    path = Path(path)
    with atomic_path(path) as tmp:
        adata.write_h5ad(tmp)
    return path


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
    checked as any embeddings input is (:func:`phenoica.contract.screen.validate_profile_metadata`: the
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


@functools.lru_cache(maxsize=4)
def _parquet_bytes(path: str, size: int, mtime_ns: int) -> bytes:
    """The parquet encoding (as :func:`phenoica.utils.io.write_parquet` writes it) of one ``.h5ad``'s
    table; cached by path, size and modification time, since the readers open a file several
    times (footer, metadata, rows)."""
    try:
        table = read_h5ad_profiles(path)
    except ImportError:
        raise ScreenError(f"{path}: reading .h5ad files needs anndata (pip install 'phenoica[scverse]')") from None
    except (OSError, KeyError, ValueError) as exc:  # h5py and anndata's errors for a file that is not AnnData
        raise ScreenError(f"{path}: not a readable .h5ad file ({type(exc).__name__}: {exc})") from None
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    log.info("%s: read as an embeddings table (%d bytes as parquet)", path, buffer.tell())
    return buffer.getvalue()


def parquet_source(path: Path | str) -> Any:
    """What the parquet readers of the embedding files open: a parquet file's path unchanged, and
    for an ``.h5ad`` the parquet encoding of its table (:func:`read_h5ad_profiles`) as an
    in-memory ``pyarrow.BufferReader``, so that the table and every check on it are those of a
    parquet file holding the same table."""
    if not is_h5ad(path):
        return path
    st = os.stat(path)
    return pa.BufferReader(_parquet_bytes(str(path), st.st_size, st.st_mtime_ns))


def _level_files(results: Path, model: str, variant: str) -> dict[str, list[Path]]:
    files = {
        "image": sorted((results / "embeddings" / model).glob("*.parquet")) if variant == "base" else [],
        "profile": [results / "variants" / model / f"{variant}.parquet"],
        "guide": [results / "biomap" / model / variant / "guide_profiles.parquet"],
        "gene": [results / "biomap" / model / variant / "gene_profiles.parquet"],
    }
    return {level: [p for p in paths if p.is_file()] for level, paths in files.items()}


def _calls(results: Path, name: str, model: str, variant: str) -> pd.DataFrame | None:
    path = results / "scores" / f"{name}.parquet"
    if not path.is_file():
        return None
    df = pd.read_parquet(path)
    return df[(df["model"] == model) & (df["variant"] == variant)]


def export_run(results: Path | str, out_dir: Path | str | None = None) -> list[Path]:
    """Write ``{out}/{model}/{variant}/{level}.h5ad`` for every level found in a results
    folder (see the module docstring), hit calls joined at guide and gene level."""
    results = Path(results)
    out = Path(out_dir) if out_dir is not None else results / "anndata"
    written = []
    for variant_file in sorted((results / "variants").glob("*/*.parquet")):
        model, variant = variant_file.parent.name, variant_file.stem
        for level, paths in _level_files(results, model, variant).items():
            if not paths:
                continue
            table = pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)
            calls = _calls(results, "hits" if level == "guide" else "genes", model, variant)
            path = write_h5ad(to_anndata(table, level, model, variant, calls), out / model / variant / f"{level}.h5ad")
            log.info("%s: %d x %d", path, len(table), table.shape[1])
            written.append(path)
    if not written:
        raise FileNotFoundError(f"{results}: no variants/<model>/<variant>.parquet found: is this a results folder?")
    return written


def main(argv: Sequence[str] | None = None) -> Any:
    parser = argparse.ArgumentParser(description="Write every profile level of a results folder as .h5ad.")
    parser.add_argument("results", help="the run's results folder")
    parser.add_argument("out", nargs="?", default=None, help="output folder (default RESULTS/anndata)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for path in export_run(args.results, args.out):
        print(path)


if __name__ == "__main__":
    main()
