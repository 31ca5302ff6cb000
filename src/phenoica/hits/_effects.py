"""Effect sizes beside the calls: how far each guide and gene lies from the controls, the order of
the hits, and whether a readout saturates.

A p-value or a q-value says whether a guide differs from the controls, not by how much; the
held-out AUROC stops at 1.0. Hits are ranked by an effect size that keeps growing with the
phenotype:

- ``distance_sd``, the classifier readout's held-out distance from the controls in control SDs
  (:mod:`phenoica.classify._distance`, one value and its standard error over the fold's held-out
  replicate rows per (guide, fold)): a guide's is the mean over its scored folds, with a 95%
  interval (``distance_sd_low`` / ``distance_sd_high``, :func:`wells_and_folds_interval`) from the
  folds' errors over their replicate wells and the spread between folds beyond them
  (DerSimonian-Laird). It covers the guide's distance in the screen's batches (what more replicate
  wells there would give); a phenotype that differs between batches widens it. A gene's is the
  mean over folds of its guides' mean in each fold, with the same interval.
- ``mean_average_precision`` (the mAP readout) ranks a (model, variant) where it scored more
  guides than the classifier (a layout the classifier cannot train on). mAP reaches 1.0 too, once
  every well of a guide ranks its sibling wells above all controls, so it ranks only there.

A readout *saturates* in a (model, variant) when more than :data:`SATURATION_SHARE` of its scored
guides sit at its ceiling (AUROC or mAP exactly 1.0): its values then leave that share of the
screen unordered.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import pandas as pd
from scipy import stats

from phenoica.classify import DISTANCE_COLUMNS
from phenoica.contract import GENE, GUIDE

#: The effect size each readout ranks by, in order of preference.
RANKING_MEASURES: tuple[str, ...] = ("distance_sd", "mean_average_precision")
#: What each ranking measure is, in words (the report says which one ranks the hits).
MEASURE_NAMES: dict[str, str] = {
    "distance_sd": "held-out distance from the controls in control SDs (classifier readout)",
    "mean_average_precision": "mean average precision against the controls (mAP readout)",
}
#: Stated before any screen was measured: a readout saturates when more than a tenth of its scored
#: guides sit at its ceiling, because the top tenth of a hit list is what a biologist follows up
#: first, and beyond that share the readout cannot order it.
SATURATION_SHARE = 0.1
#: Ceilings of the readouts that can saturate.
CEILINGS: dict[str, float] = {"auroc": 1.0, "mean_average_precision": 1.0}
#: The interval's confidence level.
LEVEL = 0.95
SATURATION_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    "n_scored",
    "n_auroc_at_1",
    "auroc_share_at_1",
    "auroc_saturated",
    "n_map_scored",
    "n_map_at_1",
    "map_share_at_1",
    "map_saturated",
    "ranked_by",
)


def fold_interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """Mean of the finite ``values`` (one per fold) and its two-sided Student-t interval at
    ``level``; NaN bounds with fewer than 2 values, all NaN with none."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if not x.size:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if x.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, df=x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return mean, mean - half, mean + half


def wells_and_folds_interval(
    values: np.ndarray, errors: np.ndarray, dof: float = math.inf, level: float = LEVEL
) -> tuple[float, float, float]:
    """Mean of the finite per-fold ``values`` and its two-sided interval at ``level`` from the
    folds' standard errors over their replicate wells (``errors``) and the spread between folds
    beyond them: ``var = sum(se^2) / F^2 + tau^2 / F`` (the folds taken as independent), tau^2 the
    DerSimonian-Laird estimate of the between-fold variance (0 when the folds agree within their
    wells' errors), the quantile Student-t's with ``dof`` degrees of freedom (the guide's held-out
    wells less one per fold: the wells' variance is estimated from them). Where a fold lacks its
    error, :func:`fold_interval` (over folds only)."""
    x = np.asarray(values, dtype=float)
    se = np.asarray(errors, dtype=float)
    keep = np.isfinite(x)
    x, se = x[keep], se[keep]
    if not x.size or not (np.isfinite(se) & (se > 0)).all():
        return fold_interval(x, level)
    f = x.size
    tau2 = 0.0
    if f > 1:
        w = 1.0 / se**2
        centre = float((w * x).sum() / w.sum())
        q = float((w * (x - centre) ** 2).sum())
        tau2 = max(0.0, (q - (f - 1)) / float(w.sum() - (w**2).sum() / w.sum()))
    quantile = (
        stats.t.ppf(0.5 + level / 2, df=dof) if math.isfinite(dof) and dof >= 1 else stats.norm.ppf(0.5 + level / 2)
    )
    half = float(quantile * math.sqrt((se**2).sum() / f**2 + tau2 / f))
    mean = float(x.mean())
    return mean, mean - half, mean + half


def _group_interval(sub: pd.DataFrame) -> tuple[float, float, float]:
    """:func:`wells_and_folds_interval` of one guide's (or gene's) fold rows, the degrees of freedom
    its held-out wells less one per fold (``_dof``, normal where none is left)."""
    d = sub["distance_sd"].to_numpy(dtype=float)
    dof = float(sub["_dof"].to_numpy(dtype=float)[np.isfinite(d)].sum()) if "_dof" in sub.columns else math.inf
    return wells_and_folds_interval(d, sub["distance_se"].to_numpy(dtype=float), dof if dof >= 1 else math.inf)


def _interval_table(per_fold: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """:func:`wells_and_folds_interval` of the ``distance_sd`` (and ``distance_se``) of each group
    of ``keys`` (one row per fold); the keys keep their types, the distances are float64 (an empty
    table too)."""
    groups = list(per_fold.groupby(keys, sort=True, dropna=False))
    out = pd.DataFrame([key for key, _ in groups], columns=keys) if groups else per_fold[keys].iloc[:0].copy()
    values = np.array([_group_interval(sub) for _, sub in groups], dtype=float)
    for column, v in zip(DISTANCE_COLUMNS, values.reshape(-1, 3).T):
        out[column] = v
    return out.reset_index(drop=True)


def guide_distances(ok_rows: pd.DataFrame) -> pd.DataFrame:
    """Per (model, variant, gene, guide, is_null_guide) of the scored guide-fold rows ``ok_rows``:
    ``distance_sd`` (mean over folds) and its interval over folds."""
    keys = ["model", "variant", GENE, GUIDE, "is_null_guide"]
    rows = ok_rows if "distance_se" in ok_rows.columns else ok_rows.assign(distance_se=math.nan)
    rows = rows.assign(
        _dof=np.maximum(rows["n_test_pos"].to_numpy(dtype=float) - 1, 0) if "n_test_pos" in rows else 0.0
    )
    return _interval_table(rows[[*keys, "distance_sd", "distance_se", "_dof"]], keys)


def gene_distances(ok_rows: pd.DataFrame) -> pd.DataFrame:
    """Per (model, variant, gene) of the real guides' scored guide-fold rows ``ok_rows``: the mean
    over folds of the gene's guides' mean distance in that fold, and its interval over folds."""
    keys = ["model", "variant", GENE]
    real = ok_rows[~ok_rows["is_null_guide"].astype(bool)]
    real = real if "distance_se" in real.columns else real.assign(distance_se=math.nan)
    dof = np.maximum(real["n_test_pos"].to_numpy(dtype=float) - 1, 0) if "n_test_pos" in real else 0.0
    grouped = real.assign(_var=real["distance_se"] ** 2, _dof=dof).groupby([*keys, "fold"], sort=True)
    per_fold = grouped.agg(
        distance_sd=("distance_sd", "mean"), _var=("_var", "mean"), _k=("distance_sd", "size"), _dof=("_dof", "sum")
    )
    per_fold["distance_se"] = np.sqrt(per_fold["_var"] / per_fold["_k"])  # the mean of k guides' distances
    return _interval_table(per_fold.reset_index(), keys)


def ranking_measures(table: pd.DataFrame) -> dict[tuple[str, str], str]:
    """Per (model, variant) of a hit or gene table: of :data:`RANKING_MEASURES`, the one with a
    finite value for the most rows there, the first in that order on a tie (absent when none has
    any): the readout that scored the guides ranks them (on a layout where the classifier scores
    1 guide of 83 and the mAP readout all of them, the mAP ranks)."""
    out: dict[tuple[str, str], str] = {}
    for (model, variant), sub in table.groupby(["model", "variant"], sort=True):
        counts = {m: int(np.isfinite(sub[m].to_numpy(dtype=float)).sum()) for m in RANKING_MEASURES if m in sub}
        best = max(counts, key=lambda m: counts[m], default=None)  # max keeps the first of equal counts
        if best is not None and counts[best]:
            out[(str(model), str(variant))] = best
    return out


def ranked(table: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """``table`` with ``ranked_by`` (:func:`ranking_measures`) and ``rank`` (1 = farthest from the
    controls, per (model, variant); missing where the measure is), sorted by model, variant, rank,
    then ``order`` (rows without a rank last)."""
    measures = ranking_measures(table)
    out = table.reset_index(drop=True).copy()
    rank = np.full(len(out), np.nan)
    by = np.full(len(out), "", dtype=object)
    for (model, variant), idx in out.groupby(["model", "variant"], sort=True).indices.items():
        measure = measures.get((str(model), str(variant)))
        if measure is None:
            continue
        values = pd.Series(out[measure].to_numpy(dtype=float)[idx])
        rank[idx] = values.rank(ascending=False, method="min").to_numpy()
        by[idx] = measure
    out["ranked_by"] = by
    out["rank"] = pd.array(np.where(np.isfinite(rank), rank, np.nan), dtype="Float64").astype("Int64")
    sort_rank = np.where(np.isfinite(rank), rank, np.inf)
    out = out.assign(_rank=sort_rank).sort_values(["model", "variant", "_rank", *order], kind="stable")
    return out.drop(columns="_rank").reset_index(drop=True)


def saturation(hits: pd.DataFrame) -> pd.DataFrame:
    """Per (model, variant) of the hit table: how many scored guides sit at the AUROC and the mAP
    ceiling (exactly 1.0), their shares, whether each readout saturates (share above
    :data:`SATURATION_SHARE`) and the measure that ranks the hits (``ranked_by``)."""
    measures = ranking_measures(hits)
    rows = []
    for (model, variant), sub in hits.groupby(["model", "variant"], sort=True):
        row: dict[str, object] = {"model": model, "variant": variant}
        for prefix, col, n_col in (("auroc", "auroc", "n_scored"), ("map", "mean_average_precision", "n_map_scored")):
            values = sub[col].to_numpy(dtype=float) if col in sub.columns else np.empty(0)
            values = values[np.isfinite(values)]
            at_ceiling = int((values >= CEILINGS[col]).sum())
            share = at_ceiling / values.size if values.size else math.nan
            row.update(
                {
                    n_col: int(values.size),
                    f"n_{prefix}_at_1": at_ceiling,
                    f"{prefix}_share_at_1": share,
                    f"{prefix}_saturated": bool(values.size and share > SATURATION_SHARE),
                }
            )
        row["ranked_by"] = measures.get((str(model), str(variant)), "")
        rows.append(row)
    return pd.DataFrame(rows, columns=list(SATURATION_COLUMNS))


def measure_phrase(measure: str, names: Mapping[str, str] = MEASURE_NAMES) -> str:
    """``measure`` in words, with its column name."""
    return f"{names.get(measure, measure)}, `{measure}`"
