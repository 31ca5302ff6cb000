"""The hit calls of a whole screen (``screen_calls``: what the gather step writes), from the
guide-fold rows of every shard through their guide and gene means (``summarize_scores``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from phenoica.classify import ReadoutInputs, registered_readouts
from phenoica.contract import GENE, GUIDE, OK, SCORE_COLUMNS
from phenoica.hits._calls import NULL_COLUMNS, call_genes, call_guides, null_summary
from phenoica.hits._effects import DISTANCE_COLUMNS, gene_distances, guide_distances, ranked
from phenoica.hits._readouts import hit_table, readout_notes

GUIDE_SUMMARY_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    GENE,
    GUIDE,
    "is_null_guide",
    "n_folds_ok",
    "auroc",
    *DISTANCE_COLUMNS,
    "sparsity",
    "concentration",
)


GENE_SUMMARY_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    GENE,
    "n_guides",
    "auroc",
    *DISTANCE_COLUMNS,
    "sparsity",
    "concentration",
)


def summarize_scores(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Guide-level and gene-level means of the ``ok`` (guide, fold) rows.

    Guide level: ``GUIDE_SUMMARY_COLUMNS``; n_folds_ok and the mean of auroc, sparsity and
    concentration over the guide's ok folds (NaN when none), and the held-out distance with its
    interval over folds (:func:`phenoica.hits._effects.guide_distances`). Gene level (real guides
    only, null pseudo-guides excluded): ``GENE_SUMMARY_COLUMNS``; n_guides = guides with at least
    one ok fold, means pooled over all ok (guide, fold) rows of the gene, and the distance per
    fold over its guides (:func:`phenoica.hits._effects.gene_distances`).
    """
    missing = [c for c in SCORE_COLUMNS if c not in rows.columns and c != "distance_se"]  # optional: NaN
    if missing:
        raise ValueError(f"summarize_scores: score table lacks column(s) {missing}")
    keys = ["model", "variant", GENE, GUIDE, "is_null_guide"]
    vals = ["auroc", "sparsity", "concentration"]
    rows = rows.copy()
    ok = rows["status"] == OK
    rows["_ok"] = ok.astype(np.int64)
    for v in vals:
        rows[v] = rows[v].where(ok)
    guide = (
        rows.groupby(keys, sort=True, dropna=False)
        .agg(n_folds_ok=("_ok", "sum"), **{v: (v, "mean") for v in vals})
        .reset_index()
    )
    guide["n_folds_ok"] = guide["n_folds_ok"].astype(np.int64)
    ok_rows = rows[ok]
    guide = guide.merge(guide_distances(ok_rows), on=keys, how="left", validate="one_to_one")
    guide = guide[list(GUIDE_SUMMARY_COLUMNS)]
    real = rows[~rows["is_null_guide"].astype(bool)]
    gkeys = ["model", "variant", GENE]
    gene = real.groupby(gkeys, sort=True, dropna=False).agg(**{v: (v, "mean") for v in vals}).reset_index()
    scored = real[real["_ok"] == 1].groupby(gkeys)[GUIDE].nunique().rename("n_guides")
    gene = gene.merge(scored.reset_index(), on=gkeys, how="left")
    gene["n_guides"] = gene["n_guides"].fillna(0).astype(np.int64)
    gene = gene.merge(gene_distances(ok_rows), on=gkeys, how="left", validate="one_to_one")
    return guide.reset_index(drop=True), gene[list(GENE_SUMMARY_COLUMNS)].reset_index(drop=True)


def screen_calls(
    rows: pd.DataFrame,
    map_df: pd.DataFrame | None,
    null_model: str,
    q_threshold: float,
    with_null: bool = True,
    seed: int = 0,
) -> dict[str, pd.DataFrame]:
    """Everything the gather step writes, from the guide-fold rows of every shard.

    Returns ``guides`` (per-guide means and distances, plus ``GUIDE_CALL_COLUMNS``), ``genes``
    (per-gene means and distances, the gene calls ``n_guides_hit``, ``p_value``,
    ``p_beyond_null``, ``p_tail``, ``q_value``, ``hit``, the mean ``mean_average_precision`` of
    its guides, and ``rank`` / ``ranked_by`` as the hit table's), ``hits`` (``hit_table``: every registered
    readout's calls of each guide) and ``null`` (``null_summary``). Without a null (``with_null`` False:
    ``classify.n_null_guides: 0``) the calls are NaN/False and ``null`` is empty.
    """
    guides, genes = summarize_scores(rows)
    keys = ["model", "variant", GENE]
    call_cols = ["n_guides_hit", "p_value", "p_beyond_null", "p_tail", "q_value", "hit"]
    if with_null:
        guides = call_guides(guides, null_model, q_threshold, seed)
        gene_calls = call_genes(guides, q_threshold)
        genes = genes.merge(gene_calls[keys + call_cols], on=keys, how="left")
        null = null_summary(guides, null_model, q_threshold, seed)
    else:
        no_calls = {"p_value": math.nan, "p_beyond_null": False, "p_tail": math.nan, "q_value": math.nan, "hit": False}
        guides = guides.assign(**no_calls)
        genes = genes.assign(n_guides_hit=0, **no_calls)
        null = pd.DataFrame(columns=list(NULL_COLUMNS))
    for c in ("hit", "p_beyond_null"):
        genes[c] = genes[c].fillna(False).astype(bool)
    genes["n_guides_hit"] = genes["n_guides_hit"].fillna(0).astype(np.int64)
    inputs = ReadoutInputs(guides, map_df, q_threshold)
    ran = frozenset(
        r.name for r in registered_readouts() if (table := r.guide_table(inputs)) is not None and len(table)
    )
    hits = hit_table(inputs)
    hits["note"] = readout_notes(hits, null, with_null, ran)
    gene_map = hits.groupby(keys)["mean_average_precision"].mean().rename("mean_average_precision")
    genes = ranked(genes.merge(gene_map.reset_index(), on=keys, how="left"), [GENE])
    return {"guides": guides, "genes": genes, "hits": hits, "null": null}
