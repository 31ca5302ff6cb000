"""Hit calls against known truth: recall and observed FDR of the calls of a simulated screen."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from phenoica.contract import GENE, GUIDE
from phenoica.hits._calls import KEYS, call_genes


def recall_fdr(
    guide_calls: pd.DataFrame, truth: pd.DataFrame, thresholds: tuple[float, ...] = (0.05, 0.1)
) -> pd.DataFrame:
    """Hit calls against known truth (``truth``: gene, guide, ``has_effect``), per (model,
    variant, level, threshold): calls, true and false positives, recall of the true effects and
    the observed FDR (false calls / calls; 0 when nothing is called). Gene level: a gene has an
    effect when any of its guides does; its calls come from ``call_genes``."""
    t = truth[[GENE, GUIDE, "has_effect"]].copy()
    t["has_effect"] = t["has_effect"].astype(bool)
    real = guide_calls[~guide_calls["is_null_guide"].astype(bool)].merge(t, on=[GENE, GUIDE], how="inner")
    gene_truth = t.groupby(GENE)["has_effect"].any()
    genes = call_genes(guide_calls)
    genes = genes[genes[GENE].isin(gene_truth.index)].assign(has_effect=lambda d: d[GENE].map(gene_truth).astype(bool))
    rows = []
    for level, df in (("guide", real), ("gene", genes)):
        for (model, variant), sub in df.groupby(list(KEYS), sort=True):
            truth_pos = sub["has_effect"].to_numpy(bool)
            qv = sub["q_value"].to_numpy(dtype=float)
            for thr in thresholds:
                called = np.isfinite(qv) & (qv < thr)
                tp, fp = int((called & truth_pos).sum()), int((called & ~truth_pos).sum())
                rows.append(
                    {
                        "model": model,
                        "variant": variant,
                        "level": level,
                        "q_threshold": thr,
                        "n_true_effects": int(truth_pos.sum()),
                        "n_no_effect": int((~truth_pos).sum()),
                        "n_called": tp + fp,
                        "true_positives": tp,
                        "false_positives": fp,
                        "recall": tp / truth_pos.sum() if truth_pos.any() else math.nan,
                        "observed_fdr": fp / (tp + fp) if tp + fp else 0.0,
                    }
                )
    return pd.DataFrame(rows)


def pooled_recall_fdr(rows: pd.DataFrame) -> tuple[float, float]:
    """Recall and observed FDR of several :func:`recall_fdr` rows taken together (e.g. the guide
    rows of some models and variants at one threshold): true positives over true effects, false
    calls over calls (0 when nothing is called)."""
    called = int(rows["n_called"].sum())
    return rows["true_positives"].sum() / rows["n_true_effects"].sum(), rows["false_positives"].sum() / max(called, 1)
