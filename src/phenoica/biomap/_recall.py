"""Known-relationship recall (EFAAR): annotated pairs against the null of all pairwise cosines, counted block by block."""

from __future__ import annotations

import logging
import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from phenoica.biomap._gene_similarity import similarity_blocks, unit_rows
from phenoica.contract import ScreenError

LOG = logging.getLogger(__name__)


#: Cosines closer than this are ties when ranking a query in the null (float32 rounding).
TIE_TOLERANCE = 1e-6


RECALL_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    "source",
    "n_map_genes",
    "n_entities",
    "n_pairs",
    "n_null_pairs",
    "lower",
    "upper",
    "recall",
    "recall_lo",
    "recall_hi",
    "recall_expected",
    "status",
    "reason",
)


COVERAGE_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    "source",
    "n_source_pairs",
    "n_source_genes",
    "n_screen_genes",
    "n_screen_genes_known",
    "n_map_genes",
    "n_map_genes_known",
    "n_map_pairs",
)


def pair_cosines(U: np.ndarray, index: Mapping[str, int], pairs: pd.DataFrame) -> np.ndarray:
    """Cosines of annotated pairs (``entity1``, ``entity2``, both in ``index``) of unit rows ``U``."""
    i = pairs["entity1"].map(index).to_numpy(np.int64)
    j = pairs["entity2"].map(index).to_numpy(np.int64)
    return np.einsum("ij,ij->i", U[i], U[j]).astype(np.float64)


def null_rank_counts(
    U: np.ndarray, queries: np.ndarray, block_rows: int, log: logging.Logger | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """For each query cosine: (#null <= x, #null < x, null size), where the null is every
    pairwise cosine of the rows of unit ``U`` (upper triangle); computed block by block (each
    block's values sorted and searched), never holding the null."""
    log = log or LOG
    n = U.shape[0]
    le = np.zeros(queries.size, dtype=np.int64)
    lt = np.zeros(queries.size, dtype=np.int64)
    size = 0
    # A query is itself one of the null's values, computed by another float32 product: values
    # within TIE_TOLERANCE of it count as equal to it (EFAAR takes both from one matrix).
    q_hi = (queries + TIE_TOLERANCE).astype(np.float32)
    q_lo = (queries - TIE_TOLERANCE).astype(np.float32)
    for start, S in similarity_blocks(U, block_rows):
        m = S.shape[0]
        upper = np.arange(n)[None, :] > np.arange(start, start + m)[:, None]
        values = np.sort(S[upper])
        size += values.size
        le += np.searchsorted(values, q_hi, side="right")
        lt += np.searchsorted(values, q_lo, side="left")
        if n > 4 * block_rows:
            log.info("recall null: rows %d-%d of %d", start, start + m, n)
    return le, lt, size


def _wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return math.nan, math.nan
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def relationship_recall(
    X: np.ndarray,
    names: Sequence[str],
    sources: Mapping[str, pd.DataFrame],
    *,
    screen_genes: Sequence[str] | None = None,
    thresholds: Sequence[Sequence[float]],
    min_entities: int,
    block_rows: int,
    log: logging.Logger | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(recall, coverage) of every annotation source against the map ``X`` (genes ``names``).

    Recall rows (:data:`RECALL_COLUMNS` less model/variant): one per (source, threshold pair);
    ``status`` ``ok`` or ``skipped`` (``reason`` gives the counts: too few of the source's
    genes in the map, or no annotated pair in it). ``recall_lo``/``recall_hi``: a 95% Wilson
    interval over the annotated pairs (pairs share genes, so it is optimistic). Coverage rows:
    how many of the screen's (``screen_genes``) and the map's genes each source knows.
    """
    log = log or LOG
    names = [str(x) for x in names]
    index = {g: i for i, g in enumerate(names)}
    if len(index) != len(names):
        raise ScreenError("biomap: duplicate gene names in the map")
    screen = set(screen_genes) if screen_genes is not None else set(names)
    U = unit_rows(X)
    in_map: dict[str, pd.DataFrame] = {}
    coverage = []
    for source, pairs in sources.items():
        known = set(pairs["entity1"]) | set(pairs["entity2"])
        mine = pairs[pairs["entity1"].isin(index) & pairs["entity2"].isin(index)]
        in_map[source] = mine
        coverage.append(
            {
                "source": source,
                "n_source_pairs": len(pairs),
                "n_source_genes": len(known),
                "n_screen_genes": len(screen),
                "n_screen_genes_known": len(screen & known),
                "n_map_genes": len(names),
                "n_map_genes_known": len(set(names) & known),
                "n_map_pairs": len(mine),
            }
        )
    runnable = {}
    skipped = {}
    for row in coverage:
        source = row["source"]
        if row["n_map_genes_known"] < min_entities:
            skipped[source] = (
                f"{row['n_map_genes_known']} of the map's {len(names)} genes are in {source} "
                f"(fewer than biomap.min_entities = {min_entities})"
            )
        elif row["n_map_pairs"] == 0:
            skipped[source] = f"no pair of {source} has both genes in the map ({row['n_map_genes_known']} genes known)"
        else:
            runnable[source] = pair_cosines(U, index, in_map[source])
    for source, why in skipped.items():
        log.warning("recall: %s skipped: %s", source, why)
    counts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    n_null = len(names) * (len(names) - 1) // 2
    if runnable:
        allq = np.concatenate(list(runnable.values()))
        le, lt, n_null = null_rank_counts(U, allq, block_rows, log)
        at = 0
        for source, qv in runnable.items():
            counts[source] = (le[at : at + qv.size], lt[at : at + qv.size])
            at += qv.size
    rows = []
    for cov in coverage:
        source = cov["source"]
        n_entities = len(set(in_map[source]["entity1"]) | set(in_map[source]["entity2"]))
        for pair in thresholds:
            lo, hi = float(min(pair)), float(max(pair))
            row: dict[str, Any] = {
                "source": source,
                "n_map_genes": len(names),
                "n_entities": n_entities,
                "n_pairs": cov["n_map_pairs"],
                "n_null_pairs": n_null,
                "lower": lo,
                "upper": hi,
                "recall": math.nan,
                "recall_lo": math.nan,
                "recall_hi": math.nan,
                "recall_expected": lo + 1.0 - hi,
                "status": "skipped",
                "reason": skipped.get(source, ""),
            }
            if source in counts:
                c_le, c_lt = counts[source]
                hit = (c_le / n_null <= lo) | (c_lt / n_null >= hi)
                k = int(hit.sum())
                row.update(recall=k / hit.size, status="ok", reason="")
                row["recall_lo"], row["recall_hi"] = _wilson(k, hit.size)
            rows.append(row)
    recall = pd.DataFrame(rows, columns=[c for c in RECALL_COLUMNS if c not in ("model", "variant")])
    coverage_df = pd.DataFrame(coverage, columns=[c for c in COVERAGE_COLUMNS if c not in ("model", "variant")])
    return recall, coverage_df
