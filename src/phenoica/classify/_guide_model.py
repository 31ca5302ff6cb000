"""One guide's models: trained on its training set, scored on held-out sets.

The full model's held-out AUROC, the sparsity of its split counts and, with
``concentration_k``, the concentration of its top features against the rest (two more models
retrained on each side), for one (guide, fold) (:func:`score_guide_on`), seeded by
:func:`guide_seed`. The fold engine (:mod:`phenoica.classify._engine`) builds each guide's
training set from the fold's shared bins; the reference readout from raw rows
(:func:`columns_dataset`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import lightgbm as lgb
import numpy as np

from phenoica.utils import auroc, concentration, derive_seed, sparsity, split_fractions, top_features


def guide_seed(seed: int, gene: str, guide: str, fold: str) -> int:
    """A seed for one (guide, fold) model: independent of order, shard and the other guides."""
    return derive_seed(seed, "classify", gene, guide, fold)


@dataclass(frozen=True)
class GuideScore:
    """Held-out scores of one (guide, fold)."""

    auroc: float
    sparsity: float
    concentration: float
    auroc_top: float
    auroc_rest: float

    @property
    def split(self) -> bool:
        """Whether the full model made a split: one without predicts one value for every row (AUROC
        0.5, no answer), and its sparsity is NaN (:func:`score_guide_on`)."""
        return not math.isnan(self.sparsity)


def columns_dataset(X: np.ndarray, y: np.ndarray, features: np.ndarray | None) -> lgb.Dataset:
    """A training Dataset of rows ``X`` with labels ``y``, on the sorted column indices
    ``features`` (None: all): what :func:`score_guide_on` asks of a training set built from its
    raw rows (the classify jobs' guides share binned rows instead, :mod:`phenoica.classify._bins`)."""
    return lgb.Dataset(X if features is None else X[:, features], y, free_raw_data=True)


def score_guide(
    dataset_for: Callable[[np.ndarray | None], lgb.Dataset],
    X_test: np.ndarray,
    y_test: np.ndarray,
    params: Mapping[str, Any],
    num_boost_round: int,
    concentration_k: float | None,
) -> GuideScore:
    """:func:`score_guide_on` one held-out set."""
    return score_guide_on(dataset_for, [(X_test, y_test)], params, num_boost_round, concentration_k)[0]


def score_guide_on(
    dataset_for: Callable[[np.ndarray | None], lgb.Dataset],
    tests: Sequence[tuple[np.ndarray, np.ndarray]],
    params: Mapping[str, Any],
    num_boost_round: int,
    concentration_k: float | None,
) -> list[GuideScore]:
    """Train the full model (and, unless ``concentration_k`` is None, the top-/rest-feature
    models) once; score each on every held-out set ``tests`` ((X, y) pairs, X with all columns).

    ``dataset_for(features)`` returns the guide's training Dataset restricted to the sorted
    column indices ``features`` (None = all columns). Sparsity comes from the full model's
    split fractions; the top features are the top ``concentration_k`` fraction by its split
    counts, the rest are the others; both are retrained from scratch with the same parameters
    and rounds. Without them concentration, ``auroc_top`` and ``auroc_rest`` are NaN.

    A full model that makes no split at all (nothing in the guide's training rows beats
    LightGBM's regularization) predicts one value for every sample: its AUROC is 0.5, as
    measured, and sparsity and concentration are undefined (NaN). Such a guide is scored, not
    skipped: dropping it would remove the low end of the real guides and of the null alike.
    """
    # The training booster is kept (LightGBM would otherwise copy it through its text form) and
    # predicts on the training's own thread count: the same model and numbers, at less cost.
    threads = params.get("num_threads", 0)
    full = lgb.train(dict(params), dataset_for(None), num_boost_round=num_boost_round, keep_training_booster=True)
    counts = full.feature_importance(importance_type="split")
    aucs = [auroc(y, full.predict(X, num_threads=threads)) for X, y in tests]
    if counts.sum() == 0:
        return [GuideScore(a, math.nan, math.nan, math.nan, math.nan) for a in aucs]
    split_sparsity = sparsity(split_fractions(counts, full.num_feature()))
    if concentration_k is None:
        return [GuideScore(a, split_sparsity, math.nan, math.nan, math.nan) for a in aucs]
    top, rest = top_features(counts, concentration_k)
    parts = []
    for subset in (top, rest):
        booster = lgb.train(
            dict(params), dataset_for(subset), num_boost_round=num_boost_round, keep_training_booster=True
        )
        parts.append([auroc(y, booster.predict(X[:, subset], num_threads=threads)) for X, y in tests])
    return [GuideScore(a, split_sparsity, concentration(t, r), t, r) for a, t, r in zip(aucs, parts[0], parts[1])]
