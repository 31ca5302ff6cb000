"""Scores of a classifier, as Nelson et al. (ICLR 2026) define them (Tables 3, 4 and 6).

Pure functions, numpy in and out, shared by the classifiers of every guide
(:mod:`phenoica.classify`) and of each construct against its reference (:mod:`phenoica.hits`):

- AUROC of held-out predictions (``auroc``).
- Split fractions ``c_d``: the fraction of all tree splits that use feature ``d``; ``sum(c) = 1``
  over the ``D`` features (``split_fractions``).
- Sparsity of feature use: ``(sqrt(D) - 1 / ||c||_2) / (sqrt(D) - 1)``; 0 when every feature is
  used equally, 1 when a single feature takes every split (``sparsity``).
- Concentration (Table 4): retrain on the top ``k`` fraction of features by importance and on
  the rest; ``AUROC(top) / AUROC(rest) - 1`` (``top_features`` picks the split, ``concentration``
  computes the ratio).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import rankdata


def auroc(y_true: ArrayLike, score: ArrayLike) -> float:
    """Area under the ROC curve of ``score`` for binary labels ``y_true`` (1 = positive).

    Computed as the Mann-Whitney U statistic of the positives over ``n_pos * n_neg`` (ties
    count one half; Hanley & McNeil 1982) from scipy's average ranks: the same number as
    scikit-learn's ``roc_auc_score`` to one unit in the last place (tested), at a twentieth of
    its cost, which matters because the classifier computes it for every model it trains.

    Returns NaN, with a RuntimeWarning giving the reason, when ``y_true`` holds one class only
    (AUROC is undefined then). Raises ValueError for mismatched lengths, labels other than 0/1,
    or non-finite scores.
    """
    y = np.asarray(y_true).ravel()
    s = np.asarray(score, dtype=np.float64).ravel()
    if y.shape != s.shape:
        raise ValueError(f"auroc: y_true has {y.size} values but score has {s.size}")
    if y.size and not np.isin(y, (0, 1)).all():
        raise ValueError(f"auroc: y_true must hold 0/1 labels, got values {np.unique(y)[:5].tolist()}")
    if not np.isfinite(s).all():
        raise ValueError(f"auroc: score has non-finite values at index {int(np.flatnonzero(~np.isfinite(s))[0])}")
    n_pos = int((y == 1).sum())
    n_neg = int(y.size - n_pos)
    if n_pos == 0 or n_neg == 0:
        warnings.warn(
            f"auroc undefined: {n_pos} positive and {n_neg} negative samples (needs both classes)",
            RuntimeWarning,
            stacklevel=2,
        )
        return float("nan")
    rank_sum = float(rankdata(s)[y == 1].sum())
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def split_fractions(booster_or_split_counts: Any, n_features: int) -> np.ndarray:
    """c_d = (splits on feature d) / (all splits), for d = 0 .. n_features - 1; sums to 1.

    Accepts a LightGBM Booster (its split-count importance is used) or a 1-D array of
    per-feature split counts. Raises ValueError when the length differs from ``n_features``,
    counts are negative or non-finite, or there are no splits at all (fractions undefined).
    """
    if hasattr(booster_or_split_counts, "feature_importance"):
        counts = np.asarray(booster_or_split_counts.feature_importance(importance_type="split"), dtype=np.float64)
        what = "booster"
    else:
        counts = np.asarray(booster_or_split_counts, dtype=np.float64)
        what = "split counts"
    if counts.ndim != 1 or counts.size != n_features:
        raise ValueError(f"split_fractions: {what} cover {counts.size} features, expected {n_features}")
    if not np.isfinite(counts).all() or (counts < 0).any():
        raise ValueError(f"split_fractions: {what} must be finite and non-negative")
    total = counts.sum()
    if total <= 0:
        raise ValueError(f"split_fractions: {what} hold no splits; fractions are undefined")
    return counts / total


def sparsity(c: np.ndarray) -> float:
    """Sparsity of feature use, ``(sqrt(D) - 1/||c||_2) / (sqrt(D) - 1)`` (Nelson et al. 2026, Table 3).

    ``c`` are split fractions (non-negative, summing to 1, D >= 2 entries). 0 when all D
    features are used equally (``||c||_2 = 1/sqrt(D)``), 1 when one feature takes all splits.
    """
    c = np.asarray(c, dtype=np.float64).ravel()
    d = c.size
    if d < 2:
        raise ValueError(f"sparsity: needs at least 2 features, got {d}")
    if not np.isfinite(c).all() or (c < 0).any():
        raise ValueError("sparsity: fractions must be finite and non-negative")
    if not math.isclose(float(c.sum()), 1.0, rel_tol=0, abs_tol=1e-9):
        raise ValueError(f"sparsity: fractions must sum to 1, got {c.sum():.6g}")
    root_d = math.sqrt(d)
    value = (root_d - 1.0 / float(np.linalg.norm(c))) / (root_d - 1.0)
    # ||c||_2 lies in [1/sqrt(D), 1]; clip rounding noise at the ends.
    return float(min(1.0, max(0.0, value)))


def concentration(auroc_top: float, auroc_rest: float) -> float:
    """Concentration (Nelson et al. 2026, Table 4): ``AUROC(top) / AUROC(rest) - 1``.

    NaN when either AUROC is NaN or both are 0; +inf when only ``auroc_rest`` is 0. Raises
    ValueError for values outside [0, 1].
    """
    top, rest = float(auroc_top), float(auroc_rest)
    if math.isnan(top) or math.isnan(rest):
        return float("nan")
    for name, value in (("auroc_top", top), ("auroc_rest", rest)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"concentration: {name} must lie in [0, 1], got {value}")
    if rest == 0.0:
        return float("inf") if top > 0.0 else float("nan")
    return top / rest - 1.0


def top_features(importance: np.ndarray, k: float) -> tuple[np.ndarray, np.ndarray]:
    """Split features into the top ``k`` fraction by importance and the rest.

    The top set has ``ceil(k * D)`` features, at least 1 and at most D - 1 (so the rest is never
    empty). Ties are broken by the lower feature index. Both index arrays are sorted ascending.
    """
    imp = np.asarray(importance, dtype=np.float64).ravel()
    d = imp.size
    if d < 2:
        raise ValueError(f"top_features: needs at least 2 features, got {d}")
    if not np.isfinite(imp).all():
        raise ValueError("top_features: importance has non-finite values")
    if not 0.0 < k < 1.0:
        raise ValueError(f"top_features: k must lie in (0, 1), got {k}")
    n_top = min(d - 1, max(1, math.ceil(k * d - 1e-9)))
    order = np.lexsort((np.arange(d), -imp))  # descending importance, then ascending index
    return np.sort(order[:n_top]), np.sort(order[n_top:])
