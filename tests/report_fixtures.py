"""A tiny screen with pixels and scores for the gallery, the interactive page and the AnnData
export: 2 plates (one batch each), 3 Cell Painting channels, genes G1..G3 with 2 guides each
(3 sites per guide per plate) and 8 control images per plate; per-plate image embeddings whose
nearest-to-mean images are known; score tables in the shapes the workflow gathers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from phenoica.contract import validate_config, write_plate
from phenoica.report import ReportOptions

CHANNELS = ["DNA", "ER", "Mito"]
PLATES = ["P1", "P2"]
GENES = ["G1", "G2", "G3"]
VARIANTS = ["base", "pca", "pca_ica", "pca_rand"]
SITES = 3
CONTROLS = 8
DIM = 4


def report_options(**config: Any) -> ReportOptions:
    """The report's options from a validated config holding ``config`` (the schema's defaults elsewhere)."""
    return ReportOptions.from_config(validate_config(config))


def plate_image_rows(plate: str) -> pd.DataFrame:
    """Metadata of one plate: each guide's 3 sites, then 8 control images (4 wells x 2 sites)."""
    rows = []
    for g, gene in enumerate(GENES):
        for k in (1, 2):
            for s in range(SITES):
                rows.append((gene, f"{gene}_g{k}", "perturbation", f"A{2 * g + k:02d}", s + 1))
    for w in range(CONTROLS // 2):
        for s in range(2):
            rows.append(("non-targeting", f"NTC_{w}", "control", f"H{w + 1:02d}", s + 1))
    df = pd.DataFrame(
        rows, columns=["Metadata_Gene", "Metadata_Guide", "Metadata_PertType", "Metadata_Well", "Metadata_Site"]
    )
    df.insert(0, "Metadata_Plate", plate)
    df.insert(0, "Metadata_Batch", f"B{PLATES.index(plate) + 1}")
    df["Metadata_ImageIndex"] = np.arange(len(df))
    return df


def embeddings(df: pd.DataFrame, plate_i: int) -> np.ndarray:
    """Per image: a guide's site 2 (of 3) sits at its guide's mean on both plates, sites 1 and 3
    at -+(1 + plate index) along axis 0, so its two nearest images are the site-2 images and the
    next two (a tie, broken by the seed) are sites 1 and 3 of P1. Controls along axis 1: site 1
    of each well at 0, site 2 of well Hw at 1 + w; their mean is 1.75, so a plate's nearest
    controls are H01 s2 (0.25 away), then H02 s2 (1.25), then the four site-1 images (a tie)."""
    emb = np.zeros((len(df), DIM), dtype=np.float32)
    for i, r in enumerate(df.itertuples()):
        if r.Metadata_PertType == "control":
            w = int(r.Metadata_Well[1:])
            emb[i, 1] = 0.0 if r.Metadata_Site == 1 else 1.0 + w
        else:
            centre = 10.0 * (1 + GENES.index(r.Metadata_Gene)) + int(r.Metadata_Guide[-1])
            emb[i, 2] = centre
            emb[i, 0] = {1: -(1.0 + plate_i), 2: 0.0, 3: 1.0 + plate_i}[r.Metadata_Site]
    return emb


def tiles_for(df: pd.DataFrame, size: int = 16) -> np.ndarray:
    """uint16 tiles whose every pixel of channel c is 100 * (c + 1) + image index (known values)."""
    n = len(df)
    base = (
        np.arange(n, dtype=np.uint16)[:, None, None, None]
        + 100 * (np.arange(len(CHANNELS), dtype=np.uint16) + 1)[None, :, None, None]
    )
    return np.broadcast_to(base, (n, len(CHANNELS), size, size)).copy()


def write_screen(root: Path) -> tuple[list[Path], dict[str, str]]:
    """Write the plates (chunks of 4 images) and their embedding files; return the files and stores."""
    files, stores = [], {}
    for i, plate in enumerate(PLATES):
        df = plate_image_rows(plate)
        store = write_plate(root / "plates" / f"{plate}.zarr", tiles_for(df), CHANNELS, chunk_images=4)
        emb = embeddings(df, i)
        table = pd.concat([df, pd.DataFrame(emb, columns=[f"emb_{j:04d}" for j in range(DIM)])], axis=1)
        path = root / "embeddings" / f"{plate}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        table.to_parquet(path, index=False)
        files.append(path)
        stores[plate] = str(store)
    return files, stores


def score_tables(model: str = "mae") -> dict[str, pd.DataFrame]:
    """hits, genes and guide_folds in the gathered shapes: G1 a hit in every variant (q 0.001),
    G2 a hit in pca_ica only, G3 no hit; two held-out batches; ranked by distances that follow the
    AUROCs; p-values at or above 0.01, the bound of a null of 99 pseudo-guides."""
    hits, genes, folds = [], [], []
    for variant in VARIANTS:
        for g, gene in enumerate(GENES):
            is_hit = gene == "G1" or (gene == "G2" and variant == "pca_ica")
            q = 0.001 if is_hit else 0.5
            for k in (1, 2):
                auroc = 0.9 - 0.1 * g + 0.01 * k + (0.02 if variant == "pca_ica" else 0.0)
                guide = f"{gene}_g{k}"
                distance = 10 * (auroc - 0.5)
                rank = 2 * g + 3 - k  # by distance: G1_g2, G1_g1, G2_g2, ...
                hits.append(
                    (model, variant, rank, gene, guide, 2, auroc, distance, distance - 1, distance + 1)
                    + (max(q / 2, 0.01), False, q, is_hit, 0.3 + 0.1 * k, q, q, is_hit, "both", "distance_sd")
                )
                for b, batch in enumerate(("B1", "B2")):
                    folds.append((model, variant, gene, guide, False, batch, auroc + 0.01 * b, distance + b, "ok"))
            distance = 4.0 - g
            genes.append(
                (model, variant, g + 1, gene, 2, 0.9 - 0.1 * g, distance, distance - 1, distance + 1)
                + (2 if is_hit else 0, max(q / 2, 0.01), False, q, is_hit)
            )
    hit_cols = ["model", "variant", "rank", "Metadata_Gene", "Metadata_Guide", "n_folds_ok", "auroc"]
    hit_cols += ["distance_sd", "distance_sd_low", "distance_sd_high", "p_value", "p_beyond_null", "q_value", "hit"]
    hit_cols += ["mean_average_precision", "map_p_value", "map_q_value", "map_hit", "agreement", "ranked_by"]
    gene_cols = ["model", "variant", "rank", "Metadata_Gene", "n_guides", "auroc"]
    gene_cols += ["distance_sd", "distance_sd_low", "distance_sd_high", "n_guides_hit", "p_value", "p_beyond_null"]
    gene_cols += ["q_value", "hit"]
    fold_cols = ["model", "variant", "Metadata_Gene", "Metadata_Guide", "is_null_guide", "fold", "auroc"]
    fold_cols += ["distance_sd", "status"]
    return {
        "hits": pd.DataFrame(hits, columns=hit_cols),
        "genes": pd.DataFrame(genes, columns=gene_cols),
        "guide_folds": pd.DataFrame(folds, columns=fold_cols),
    }


def neighbors(model: str = "mae") -> pd.DataFrame:
    """Each gene's map neighbours (the other two genes) in every variant."""
    rows = []
    for variant in VARIANTS:
        for gene in GENES:
            others = [g for g in GENES if g != gene]
            for rank, other in enumerate(others, start=1):
                rows.append((model, variant, gene, rank, other, 0.8 - 0.2 * rank, 0.01 * rank))
    return pd.DataFrame(
        rows, columns=["model", "variant", "Metadata_Gene", "rank", "neighbor", "cosine", "neighbor_q_value"]
    )
