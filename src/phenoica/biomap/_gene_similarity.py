"""Which genes form the map, and cosine similarity between them in row blocks: nearest genes and nearest guides."""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import pandas as pd

from phenoica.contract import GENE, GUIDE, PERT_TYPE, PERTURBATION, feature_columns

GENE_SELECTIONS: tuple[str, ...] = ("active", "all")


NEIGHBOR_COLUMNS: tuple[str, ...] = ("model", "variant", GENE, "rank", "neighbor", "cosine", "neighbor_q_value")


def unit_rows(X: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32); a zero row stays zero (its cosines are 0)."""
    X = np.asarray(X, dtype=np.float32)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return np.divide(X, norms, out=np.zeros_like(X), where=norms > 0)


def map_genes(genes: pd.DataFrame, calls: pd.DataFrame | None, selection: str) -> tuple[pd.DataFrame, np.ndarray, str]:
    """(the map's gene profiles, their gene q-values, a note on how they were chosen).

    ``selection`` ``active``: the perturbed genes whose gene call is a hit (``calls``: the
    (model, variant)'s rows of the gene calls, ``Metadata_Gene``, ``q_value``, ``hit``);
    ``all``: every perturbed gene. Without calls (no null pseudo-guides) ``active`` falls back
    to all genes, and the note says so.
    """
    if selection not in GENE_SELECTIONS:
        raise ValueError(f"biomap.genes: expected one of {list(GENE_SELECTIONS)}, got {selection!r}")
    perturbed = genes[genes[PERT_TYPE] == PERTURBATION].reset_index(drop=True)
    q = np.full(len(perturbed), np.nan)
    hit = np.zeros(len(perturbed), dtype=bool)
    have_calls = bool(
        calls is not None
        and len(calls)
        and "q_value" in calls.columns
        and np.isfinite(calls["q_value"].to_numpy(float)).any()
    )
    if have_calls:
        by_gene = calls.drop_duplicates(GENE).set_index(GENE)  # type: ignore[union-attr]
        q = perturbed[GENE].map(by_gene["q_value"]).astype(float).to_numpy()
        hit = perturbed[GENE].map(by_gene["hit"]).fillna(False).astype(bool).to_numpy()
    if selection == "all":
        return perturbed, q, f"all {len(perturbed)} perturbed genes"
    if not have_calls:
        return perturbed, q, f"no hit calls (classify.n_null_guides = 0?): all {len(perturbed)} perturbed genes"
    note = f"{int(hit.sum())} of {len(perturbed)} perturbed genes called active (gene q below the threshold)"
    return perturbed[hit].reset_index(drop=True), q[hit], note


def similarity_blocks(X: np.ndarray, block_rows: int) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, cosine similarities of rows [first, first + block) against all rows) for
    unit-normalized ``X``, one (block x n) float32 slab at a time."""
    n = X.shape[0]
    for start in range(0, n, block_rows):
        yield start, X[start : start + block_rows] @ X.T


def similarity_matrix(X: np.ndarray) -> np.ndarray:
    """The full cosine matrix of the rows of ``X`` (for small maps: the heatmap)."""
    U = unit_rows(X)
    return np.clip(U @ U.T, -1.0, 1.0)


def nearest_neighbors(
    X: np.ndarray, names: Sequence[str], q_values: Sequence[float], k: int, block_rows: int
) -> pd.DataFrame:
    """Top ``k`` genes by cosine for every gene (itself excluded): gene, rank (1 = nearest),
    neighbour, cosine, the neighbour's q-value. Blocked over rows."""
    names = np.asarray(names, dtype=object)
    q = np.asarray(q_values, dtype=float)
    n = len(names)
    k = min(int(k), n - 1)
    if k < 1:
        return pd.DataFrame({c: [] for c in NEIGHBOR_COLUMNS if c not in ("model", "variant")})
    U = unit_rows(X)
    parts = []
    for start, S in similarity_blocks(U, block_rows):
        rows = np.arange(start, start + S.shape[0])
        S[np.arange(S.shape[0]), rows] = -np.inf
        top = np.argpartition(-S, k - 1, axis=1)[:, :k]
        vals = np.take_along_axis(S, top, axis=1)
        order = np.argsort(-vals, axis=1, kind="stable")
        top, vals = np.take_along_axis(top, order, axis=1), np.take_along_axis(vals, order, axis=1)
        parts.append(
            pd.DataFrame(
                {
                    GENE: np.repeat(names[rows], k),
                    "rank": np.tile(np.arange(1, k + 1), len(rows)),
                    "neighbor": names[top.ravel()],
                    "cosine": np.clip(vals.ravel(), -1, 1).astype(np.float64),
                    "neighbor_q_value": q[top.ravel()],
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def guide_neighbors(guides: pd.DataFrame, genes: set[str], k: int, block_rows: int) -> pd.DataFrame:
    """The guide-level map: top ``k`` guides by cosine for every guide of the map's ``genes``
    (among those guides), with each guide's and neighbour's gene and ``same_gene``."""
    sel = guides[(guides[PERT_TYPE] == PERTURBATION) & guides[GENE].astype(str).isin(genes)].reset_index(drop=True)
    cols = [GUIDE, GENE, "rank", "neighbor", "neighbor_gene", "cosine", "same_gene"]
    if len(sel) < 2:
        return pd.DataFrame({c: [] for c in cols})
    names = sel[GUIDE].astype(str).to_numpy()
    gene_of = dict(zip(names, sel[GENE].astype(str)))
    nn = (
        nearest_neighbors(
            sel[feature_columns(sel)].to_numpy(np.float32), names, np.full(len(sel), np.nan), k, block_rows
        )
        .rename(columns={GENE: GUIDE})
        .drop(columns="neighbor_q_value")
    )
    nn[GENE] = nn[GUIDE].map(gene_of)
    nn["neighbor_gene"] = nn["neighbor"].map(gene_of)
    nn["same_gene"] = nn[GENE] == nn["neighbor_gene"]
    return nn[cols]
