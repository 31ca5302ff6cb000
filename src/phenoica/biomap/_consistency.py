"""Perturbation consistency (EFAAR): mean pairwise cosine of a gene's guides against random guide sets."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import pandas as pd

from phenoica.biomap._gene_similarity import unit_rows
from phenoica.contract import GENE, PERT_TYPE, PERTURBATION, feature_columns
from phenoica.utils import derive_seed

CONSISTENCY_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    GENE,
    "n_guides",
    "consistency",
    "p_value",
    "n_null",
    "reason",
)

LOG = logging.getLogger(__name__)


def _mean_pairwise(U: np.ndarray) -> np.ndarray:
    """Mean pairwise cosine within each set: U is (sets, k, features) of unit rows."""
    k = U.shape[1]
    total = np.einsum("skf,slf->s", U, U)  # sum over all ordered pairs incl. self (= |sum|^2)
    return (total - k) / (k * (k - 1))


def guide_consistency(
    guides: pd.DataFrame,
    *,
    seed: int,
    null_size: int,
    model: str = "",
    variant: str = "",
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """Do a gene's guides agree? Per perturbed gene: the mean pairwise cosine of its guide
    profiles, and its p-value against ``null_size`` sets of as many guides, each from a
    different gene (seeded ``derive_seed(seed, "consistency", model, variant, k)``). A gene
    with one guide gets NaN and the reason; so does every gene when fewer genes than guides
    per set exist to draw a null from."""
    log = log or LOG
    pert = guides[guides[PERT_TYPE] == PERTURBATION].reset_index(drop=True)
    features = feature_columns(pert)
    U = unit_rows(pert[features].to_numpy(np.float32))
    gene_codes, gene_names = pd.factorize(pert[GENE].astype(str), sort=True)
    members = [np.flatnonzero(gene_codes == g) for g in range(len(gene_names))]
    rng_cache: dict[int, np.ndarray] = {}

    def null_for(k: int) -> np.ndarray:
        if k not in rng_cache:
            rng = np.random.default_rng(derive_seed(seed, "consistency", model, variant, k))
            n_genes = len(members)
            picks = np.empty((null_size, k), dtype=np.int64)
            for s in range(null_size):
                genes = rng.choice(n_genes, k, replace=False)
                picks[s] = [members[g][rng.integers(members[g].size)] for g in genes]
            rng_cache[k] = np.sort(_mean_pairwise(U[picks]))
        return rng_cache[k]

    rows = []
    for g, name in enumerate(gene_names):
        idx = members[g]
        row: dict[str, Any] = {
            "model": model,
            "variant": variant,
            GENE: name,
            "n_guides": int(idx.size),
            "consistency": math.nan,
            "p_value": math.nan,
            "n_null": 0,
            "reason": "",
        }
        if idx.size < 2:
            row["reason"] = "one guide: no pair of guides to compare"
        elif len(members) < idx.size:
            row["reason"] = f"the null draws {idx.size} guides from different genes; only {len(members)} genes"
        else:
            value = float(_mean_pairwise(U[idx][None])[0])
            null = null_for(int(idx.size))
            row.update(
                consistency=value,
                n_null=null.size,
                p_value=(1 + null.size - np.searchsorted(null, value, side="left")) / (null.size + 1),
            )
        rows.append(row)
    out = pd.DataFrame(rows, columns=list(CONSISTENCY_COLUMNS))
    n_single = int((out["n_guides"] < 2).sum())
    if n_single:
        log.warning("consistency %s/%s: %d gene(s) with one guide get no score", model, variant, n_single)
    return out
