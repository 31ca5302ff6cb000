"""The report's inputs checked at the boundary and the variants' display order and names.

Inputs are the classification stage's tables (see ``phenoica.classify``): guide-fold rows, guide
scores, gene scores, optionally a mAP table and a truth table. Each ``check_*`` returns a checked
copy or raises an error that names the table and the column or rows at fault. Variants are
ordered as :data:`phenoica.transforms.VARIANTS` declares them (base, pca, pca_ica, pca_rand,
tvn), any other name after them, sorted.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from phenoica.contract import (
    GENE,
    GUIDE,
    OK,
    SCORE_COLUMNS,
    SCORE_FLOAT_COLUMNS,
    SCORE_INT_COLUMNS,
    SKIPPED,
    ScreenError,
)
from phenoica.hits import DISTANCE_COLUMNS, GENE_SUMMARY_COLUMNS, GUIDE_SUMMARY_COLUMNS
from phenoica.transforms import VARIANTS

VARIANT_LABELS: dict[str, str] = {
    "base": "Base",
    "pca": "PCA",
    "pca_ica": "PCA + ICA",
    "pca_rand": "PCA + Rand",
}
GUIDE_COLUMNS: tuple[str, ...] = GUIDE_SUMMARY_COLUMNS  # what hits.calls.summarize_scores writes
GENE_COLUMNS: tuple[str, ...] = GENE_SUMMARY_COLUMNS
MAP_COLUMNS: tuple[str, ...] = ("model", "variant", GENE, GUIDE, "mean_average_precision", "map_p_value", "map_q_value")
TRUTH_COLUMNS: tuple[str, ...] = (GENE, GUIDE, "has_effect", "efficacy")


def ordered_variants(values: Iterable[str]) -> list[str]:
    """The distinct variant names in ``values``: known ones in paper order, then others sorted."""
    present = {str(v) for v in values}
    return [v for v in VARIANTS if v in present] + sorted(present - set(VARIANTS))


def variant_label(variant: str) -> str:
    """Display name of a variant as in the paper ("PCA + ICA"); unknown names pass through."""
    return VARIANT_LABELS.get(variant, variant)


def _as_bool(series: pd.Series, column: str, source: str) -> pd.Series:
    """A boolean column from bools, 0/1 or "true"/"false" strings; anything else is an error."""
    if series.dtype == bool:
        return series
    mapping = {"true": True, "false": False, "1": True, "0": False, "1.0": True, "0.0": False}
    text = series.astype(str).str.strip().str.lower()
    bad = ~text.isin(list(mapping))
    if bad.any():
        rows = np.flatnonzero(bad.to_numpy())[:5].tolist()
        raise ScreenError(f"{source}: column {column} must be boolean (True/False); bad value(s) at row(s) {rows}")
    return text.map(mapping).astype(bool)


def checked_table(
    df: pd.DataFrame,
    source: str,
    required: Sequence[str],
    numeric: Sequence[str] = (),
    boolean: Sequence[str] = (),
    key: Sequence[str] = (),
) -> pd.DataFrame:
    """Copy of ``df`` with the required columns present, numeric/boolean columns coerced, ``key`` unique.

    Raises ScreenError naming ``source`` and the column or rows at fault.
    """
    if not isinstance(df, pd.DataFrame):
        raise ScreenError(f"{source}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ScreenError(f"{source}: missing column(s) {missing}; expected {list(required)}")
    out = df.reset_index(drop=True).copy()
    for col in ("model", "variant", GENE, GUIDE):
        if col in out.columns:
            if out[col].isna().any():
                rows = np.flatnonzero(out[col].isna().to_numpy())[:5].tolist()
                raise ScreenError(f"{source}: column {col} has missing values at row(s) {rows}")
            out[col] = out[col].astype(str)
    for col in numeric:
        try:
            out[col] = pd.to_numeric(out[col], errors="raise").astype(float)
        except (TypeError, ValueError) as exc:
            raise ScreenError(f"{source}: column {col} must be numeric ({exc})") from None
    for col in boolean:
        out[col] = _as_bool(out[col], col, source)
    if key:
        dup = out.duplicated(list(key), keep=False)
        if dup.any():
            rows = np.flatnonzero(dup.to_numpy())[:5].tolist()
            raise ScreenError(f"{source}: duplicate rows for key {list(key)} at row(s) {rows}")
    return out


def check_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Validate guide-fold rows (status must be ok/skipped); return a normalized copy (a table
    written before ``distance_se`` existed gets it as NaN: its distances keep the folds' interval)."""
    out = checked_table(
        rows if "distance_se" in rows.columns else rows.assign(distance_se=np.nan),
        "guide-fold rows",
        SCORE_COLUMNS,  # the guide-fold score rows, as classify writes them
        numeric=(*SCORE_INT_COLUMNS, *SCORE_FLOAT_COLUMNS),
        boolean=("is_null_guide",),
    )
    bad = ~out["status"].isin([OK, SKIPPED])
    if bad.any():
        rows_at = np.flatnonzero(bad.to_numpy())[:5].tolist()
        raise ScreenError(f"guide-fold rows: column status must be 'ok' or 'skipped'; bad at row(s) {rows_at}")
    out["reason"] = out["reason"].fillna("").astype(str)
    return out


def check_guides(guides: pd.DataFrame) -> pd.DataFrame:
    """Validate guide scores (unique per model, variant, gene, guide); return a normalized copy."""
    return checked_table(
        guides,
        "guide scores",
        GUIDE_COLUMNS,
        numeric=("n_folds_ok", "auroc", *DISTANCE_COLUMNS, "sparsity", "concentration"),
        boolean=("is_null_guide",),
        key=("model", "variant", GENE, GUIDE),
    )


def check_genes(genes: pd.DataFrame) -> pd.DataFrame:
    """Validate gene scores (unique per model, variant, gene); return a normalized copy."""
    return checked_table(
        genes,
        "gene scores",
        GENE_COLUMNS,
        numeric=("n_guides", "auroc", *DISTANCE_COLUMNS, "sparsity", "concentration"),
        key=("model", "variant", GENE),
    )


def check_truth(truth: pd.DataFrame) -> pd.DataFrame:
    """Validate the demo truth table (unique per gene, guide); return a normalized copy."""
    return checked_table(
        truth, "truth table", TRUTH_COLUMNS, numeric=("efficacy",), boolean=("has_effect",), key=(GENE, GUIDE)
    )


def model_variants(df: pd.DataFrame) -> list[tuple[str, str]]:
    """The (model, variant) pairs present, models sorted, variants in paper order."""
    pairs = []
    for model in sorted(df["model"].unique()):
        for variant in ordered_variants(df.loc[df["model"] == model, "variant"]):
            pairs.append((model, variant))
    return pairs


def mean_or_nan(values: np.ndarray) -> float:
    return float(np.mean(values)) if values.size else math.nan
