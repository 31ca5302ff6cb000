"""A run's profiles as AnnData (``.h5ad``) for the scverse: every profile level of a results
folder, written for scanpy / pertpy.

:func:`to_anndata` turns a profile table of the data contract (``Metadata_*`` columns and
features) into an AnnData: ``X`` the features (every non-``Metadata_`` column: ``emb_*``, or a
variant's ``comp_*``; float32), ``obs`` the ``Metadata_`` columns, ``var`` the feature names,
``uns["phenoica"]`` the level, model and variant. At guide and gene level the hit calls of that
model and variant join ``obs`` (AUROC, p, q, hit; the mAP readout's where it ran).
:func:`export_run` writes every level of every model and variant of a results folder.
Reading an ``.h5ad`` back into a profile table: :func:`phenoica.screen.read_h5ad_profiles`.

Levels and their files (the results layout, :data:`phenoica.contract.OUTPUTS`): ``image`` -
the embeddings (``embed/{model}/{plate}.parquet``; variant ``base`` only, before any transform);
``profile`` - ``transforms/{model}/{variant}.parquet`` (the level of config ``profiles.level``:
image or well); ``guide`` and ``gene`` - ``biomap/{model}/{variant}/{guide,gene}_profiles.parquet``.
Hit calls: ``hits/hits.parquet`` (guides) and ``hits/genes.parquet``.

``anndata`` is an optional dependency (extra ``scverse``): imported when a function needs it.
Command line: ``python -m phenoica.report.anndata RESULTS [OUT]`` (OUT defaults to ``RESULTS/anndata``).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from phenoica.contract import GENE, GUIDE, OUTPUTS, ScreenError, feature_columns, metadata_columns
from phenoica.utils import atomic_path

if TYPE_CHECKING:
    from anndata import AnnData

log = logging.getLogger("phenoica.report.anndata")

LEVELS = ("image", "profile", "guide", "gene")
#: Hit-call columns joined to obs at guide level (from hits/hits.parquet) and gene level (hits/genes.parquet).
GUIDE_CALLS = (
    "rank",
    "auroc",
    "distance_sd",
    "distance_sd_low",
    "distance_sd_high",
    "p_value",
    "p_beyond_null",
    "q_value",
    "hit",
    "mean_average_precision",
    "map_q_value",
    "map_hit",
)
GENE_CALLS = (
    "rank",
    "n_guides",
    "n_guides_hit",
    "auroc",
    "distance_sd",
    "distance_sd_low",
    "distance_sd_high",
    "p_value",
    "p_beyond_null",
    "q_value",
    "hit",
)


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


def _level_files(results: Path, model: str, variant: str) -> dict[str, list[Path]]:
    def one(stage: str, name: str) -> Path:
        return results / OUTPUTS[stage][name].format(model=model, variant=variant)

    plates = OUTPUTS["embed"]["embedding"].format(model=model, plate="*")  # every plate's embeddings
    files = {
        "image": sorted(results.glob(plates)) if variant == "base" else [],
        "profile": [one("transforms", "variant")],
        "guide": [one("biomap", "guide_profiles")],
        "gene": [one("biomap", "gene_profiles")],
    }
    return {level: [p for p in paths if p.is_file()] for level, paths in files.items()}


def _calls(results: Path, name: str, model: str, variant: str) -> pd.DataFrame | None:
    path = results / OUTPUTS["hits"][name]
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
    variant_files = OUTPUTS["transforms"]["variant"].format(model="*", variant="*")
    for variant_file in sorted(results.glob(variant_files)):
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
        raise FileNotFoundError(f"{results}: no {variant_files} found: is this a results folder?")
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
