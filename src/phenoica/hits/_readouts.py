"""The hit table: each real guide's calls by both readouts (the classifier's, against its null, and
the mAP readout's), their agreement and what a (model, variant) could not call."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from phenoica.contract import GENE, GUIDE
from phenoica.hits._calls import KEYS
from phenoica.hits._effects import DISTANCE_COLUMNS, ranked

AGREEMENT: tuple[str, ...] = ("both", "classifier_only", "map_only", "neither")


def hit_table(guide_calls: pd.DataFrame, map_df: pd.DataFrame | None, q_threshold: float = 0.05) -> pd.DataFrame:
    """One row per real guide: AUROC, distance from the controls (with its interval), p, q, call,
    beside the mAP readout and their agreement, ranked by effect size.

    ``map_df`` (``phenoica.classify.guide_map`` output, or None) adds ``mean_average_precision``,
    ``map_p_value``, ``map_q_value`` and ``map_hit`` (map q < ``q_threshold``); ``agreement`` is
    one of ``AGREEMENT`` (NaN-free: a guide a readout could not score is not called by it).
    ``rank`` and ``ranked_by``: :func:`phenoica.hits._effects.ranked` (the held-out distance, or the
    mAP where the mAP readout scored more guides), rows in that order.
    """
    real = guide_calls[~guide_calls["is_null_guide"].astype(bool)]
    cols = ["model", "variant", GENE, GUIDE, "n_folds_ok", "auroc", *DISTANCE_COLUMNS]
    cols += ["p_value", "p_beyond_null", "q_value", "hit"]
    out = real[cols].copy()
    key = ["model", "variant", GENE, GUIDE]
    if map_df is not None and len(map_df):
        m = map_df[key + ["mean_average_precision", "map_p_value", "map_q_value"]]
        out = out.merge(m, on=key, how="left", validate="one_to_one")
        mq = out["map_q_value"].to_numpy(dtype=float)
        out["map_hit"] = np.where(np.isfinite(mq), mq < q_threshold, False).astype(bool)
    else:
        for c in ("mean_average_precision", "map_p_value", "map_q_value"):
            out[c] = math.nan
        out["map_hit"] = False
    a, b = out["hit"].astype(bool).to_numpy(), out["map_hit"].astype(bool).to_numpy()
    out["agreement"] = np.select([a & b, a & ~b, ~a & b], list(AGREEMENT[:3]), AGREEMENT[3])
    out = ranked(out, [GENE, GUIDE])
    return out[["model", "variant", "rank", *[c for c in out.columns if c not in ("model", "variant", "rank")]]]


def readout_agreement(hits: pd.DataFrame) -> pd.DataFrame:
    """Per (model, variant): counts of each ``agreement`` class, Cohen's kappa of the two calls
    and the Spearman correlation of AUROC with mAP over guides both readouts scored."""
    rows = []
    for (model, variant), sub in hits.groupby(list(KEYS), sort=True):
        counts = sub["agreement"].value_counts()
        a, b = sub["hit"].astype(bool).to_numpy(), sub["map_hit"].astype(bool).to_numpy()
        both = sub[np.isfinite(sub["auroc"]) & np.isfinite(sub["mean_average_precision"])]
        rho = (
            stats.spearmanr(both["auroc"], both["mean_average_precision"]).statistic
            if len(both) >= 3 and both["auroc"].nunique() > 1 and both["mean_average_precision"].nunique() > 1
            else math.nan
        )
        rows.append(
            {
                "model": model,
                "variant": variant,
                "n_guides": len(sub),
                **{c: int(counts.get(c, 0)) for c in AGREEMENT},
                "kappa": _kappa(a, b),
                "spearman_auroc_map": float(rho),
            }
        )
    return pd.DataFrame(rows, columns=["model", "variant", "n_guides", *AGREEMENT, "kappa", "spearman_auroc_map"])


def _kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's kappa of two boolean calls (NaN when chance agreement is total)."""
    if not a.size:
        return math.nan
    po = float(np.mean(a == b))
    pe = float(a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean()))
    return (po - pe) / (1 - pe) if pe < 1 else math.nan


def readout_notes(hits: pd.DataFrame, null: pd.DataFrame, with_null: bool, with_map: bool) -> np.ndarray:
    """Per hit-table row: what its (model, variant) could not call, empty when both readouts called
    (the classifier without a null; the mAP readout, when it ran, where it scored no guide)."""
    no_calls = {}
    if not with_null:
        no_calls = {k: "classify.n_null_guides is 0" for k in hits.groupby(list(KEYS)).groups}
    else:
        for row in null.itertuples(index=False):
            if not bool(row.calls):
                no_calls[(row.model, row.variant)] = str(row.reason)
    map_scored = hits.groupby(list(KEYS))["mean_average_precision"].apply(lambda s: bool(np.isfinite(s).any()))
    notes = []
    for key in zip(hits["model"], hits["variant"]):
        parts = []
        if key in no_calls:
            parts.append(f"classifier: no hit calls ({no_calls[key]})")
        if with_map and not map_scored.get(key, False):
            parts.append("mAP: no guide scored (guides need 2 wells or more, on plates with control wells)")
        notes.append("; ".join(parts))
    return np.asarray(notes, dtype=object)
