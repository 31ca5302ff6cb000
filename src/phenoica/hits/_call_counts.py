"""How many hits each (model, variant) calls, and, against a screen's known truth, how many of
them are right: the recall of the true effects and the observed false discovery rate."""

from __future__ import annotations

import numpy as np
import pandas as pd

from phenoica.hits._calls import KEYS


def hit_counts(
    guide_calls: pd.DataFrame, gene_calls: pd.DataFrame, thresholds: tuple[float, ...] = (0.05, 0.1)
) -> pd.DataFrame:
    """Per (model, variant): scored real guides and genes, and how many pass each q threshold."""
    real = guide_calls[~guide_calls["is_null_guide"].astype(bool)]
    rows = []
    for (model, variant), sub in real.groupby(list(KEYS), sort=True):
        genes = gene_calls[(gene_calls["model"] == model) & (gene_calls["variant"] == variant)]
        row: dict[str, object] = {
            "model": model,
            "variant": variant,
            "n_guides_scored": int(np.isfinite(sub["p_value"]).sum()),
            "n_genes_scored": int(np.isfinite(genes["p_value"]).sum()),
        }
        for t in thresholds:
            row[f"guides_q<{t:g}"] = int((sub["q_value"] < t).sum())
            row[f"genes_q<{t:g}"] = int((genes["q_value"] < t).sum())
        rows.append(row)
    return pd.DataFrame(rows)
