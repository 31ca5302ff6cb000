"""Which models a classification trains: the exact protocol (the default), and the fast one.

``classify.protocol: exact`` is Nelson et al. 2026's protocol as the paper runs it: one model per
(guide, fold), each trained on every training control of its fold. ``fast``
(so that a guide's cost grows neither with the screen's controls nor with its batches), makes two declared
approximations, each with a rule, and nothing else changes (LightGBM parameters, rounds, the
concentration models, the pseudo-guides, the score table's rows):

1. **Fold groups** (``classify.fast_fold_groups``, K). Leave-one-batch-out folds beyond K are
   trained in K groups: fold ``i`` (in the folds' order, sorted batch names) joins group
   ``i % K``. A group's models train on the rows outside all its folds' held-out batches, and
   each of its folds is still scored on its own held-out rows: the score table keeps one row per
   (guide, fold), as under ``exact``. K models per guide instead of one per batch. Folds whose
   held-out rows overlap, or that name no held-out batch (``in_distribution`` repeats, whose
   number ``splits.n_folds`` already sets), are never grouped.
2. **Training-control subsample** (``classify.fast_train_controls``, C). A training set with more
   than C control rows trains on C of them: a seeded draw (``rng_for(seed, "train_controls",
   training name)``) stratified by (batch, plate), each stratum within one row of its
   proportional share. It is drawn once per training set, before any guide, so every guide and
   pseudo-guide of a fold (group) trains against the same controls, and the fold's bins stay
   shared; it does not depend on the shard or on the other guides. Held-out controls are all kept:
   every score is measured on the same rows as under ``exact``. The sample stands for the
   training set it is drawn from (:class:`ControlSample`): where ``C`` of ``N`` training
   controls are drawn (``f = C / N``), every training row of the set (the drawn controls and each
   target's own rows) weighs ``1 / f``, so LightGBM's sums of gradients, and with them its
   regularization (``lambda_l1``, ``lambda_l2``, ``min_gain_to_split``,
   ``min_sum_hessian_in_leaf``), stand at the full set's scale. ``min_data_in_leaf`` counts rows,
   not weights: under ``classify.fast_leaf: scaled`` it is the configured value times ``f``
   (rounded, at least 1), a leaf of the sample holding the share of rows a leaf of the full set
   would; under ``configured`` it stays the configured value, so a model's smallest leaf, as its
   rows, is the same whatever ``N`` is (:func:`sample_leaf`). Unweighted, the same parameters
   regularize a model trained on half the controls twice as hard, and its guides lose held-out
   AUROC (docs/benchmarks.md measures it).

Below both thresholds (at most K folds, at most C training controls) ``fast`` is ``exact``, to the
byte. A pseudo-guide is built and scored exactly as a real guide under either protocol: it trains
against the same (subsampled) controls less its own wells, in the same fold groups.

Under either protocol, ``classify.control_scope: plates`` classifies each guide against the
controls of its own plates (:func:`plate_trainings`): a training set is split by the (batch,
plate)s its targets' rows sit on, and each part is trained and scored as a training set of its
own, under the training's name (so a guide's seeds are those of ``fold``, and where its plates
are every plate, its scores).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from phenoica.classify._lightgbm_params import LIGHTGBM_MIN_DATA_IN_LEAF
from phenoica.classify._splits import stratified_sample
from phenoica.contract import BATCH, PLATE
from phenoica.utils import rng_for

PROTOCOLS: tuple[str, ...] = ("exact", "fast")


@dataclass(frozen=True, eq=False)
class Training:
    """One training set and the folds its models are scored on.

    ``train`` is the row mask the models train on; ``members`` are the (fold name, held-out row
    mask) pairs scored with them, one score row each. Under ``exact`` every training has one
    member, the fold itself, and ``name`` is the fold's name (the seeds are the exact protocol's).
    """

    name: str
    train: np.ndarray
    members: tuple[tuple[str, np.ndarray], ...]


def _groupable(folds: Sequence[Any], arrays: Sequence[tuple[str, np.ndarray, np.ndarray]]) -> bool:
    """Leave-one-batch-out-like folds: each names held-out batches, held-out rows disjoint."""
    if any(not tuple(getattr(f, "heldout_batches", ())) for f in folds):
        return False
    tested = np.zeros(len(arrays[0][2]), dtype=np.int64)
    for _, _, test in arrays:
        tested += test
    return bool(tested.max() <= 1)


def trainings(
    folds: Sequence[Any], arrays: Sequence[tuple[str, np.ndarray, np.ndarray]], max_groups: int | None
) -> list[Training]:
    """The training sets of the folds ``arrays`` ((name, train mask, test mask) of ``folds``).

    ``max_groups`` None (exact), or no more folds than it, or folds that cannot be grouped: one
    training per fold. Otherwise fold ``i`` joins group ``i % max_groups``; a group trains on the
    rows every member trains on and is named by its members' names joined with ``+``.
    """
    if max_groups is not None and max_groups < 1:
        raise ValueError(f"classify.fast_fold_groups: must be >= 1, got {max_groups}")
    if max_groups is None or len(arrays) <= max_groups or not _groupable(folds, arrays):
        return [Training(name, train, ((name, test),)) for name, train, test in arrays]
    out = []
    for g in range(max_groups):
        members = [arrays[i] for i in range(g, len(arrays), max_groups)]
        train = np.logical_and.reduce([m[1] for m in members])
        out.append(Training("+".join(m[0] for m in members), train, tuple((m[0], m[2]) for m in members)))
    return out


def plate_trainings(strata: np.ndarray, training: Training, targets: Sequence[Any]) -> list[tuple[Training, list[int]]]:
    """``training`` split by the plates of its targets (``classify.control_scope: plates``): per
    distinct set of plates that hold a target's rows, ``training`` restricted to those plates (its
    training rows and each member's held-out rows on them), with the indices of ``targets``
    (objects with ``rows``, table rows) it is for, in their order. ``strata``: the (batch, plate)
    code of every table row (:func:`control_strata`). Each part keeps ``training``'s name.
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, target in enumerate(targets):
        key = tuple(int(s) for s in np.unique(strata[np.asarray(target.rows)]))
        groups.setdefault(key, []).append(i)
    out = []
    for key, indices in groups.items():
        on = np.isin(strata, key)
        members = tuple((name, test & on) for name, test in training.members)
        out.append((Training(training.name, training.train & on, members), indices))
    return out


def control_strata(table: pd.DataFrame) -> np.ndarray:
    """The stratum of every row for the training-control draw: an integer code of its (batch, plate)."""
    return pd.factorize(table[BATCH].astype(str) + "\x1f" + table[PLATE].astype(str))[0].astype(np.int64)


def training_controls(
    train_controls: np.ndarray, strata: np.ndarray, cap: int | None, seed: int, name: str
) -> np.ndarray:
    """The training controls a training set uses: all of ``train_controls`` (sorted row indices)
    when ``cap`` is None or not exceeded, else ``cap`` of them drawn with
    ``rng_for(seed, "train_controls", name)``, stratified by ``strata`` (an integer code per table
    row: its (batch, plate)), sorted."""
    if cap is None or len(train_controls) <= cap:
        return train_controls
    if cap < 1:
        raise ValueError(f"classify.fast_train_controls: must be >= 1, got {cap}")
    rng = rng_for(seed, "train_controls", name)
    picked = stratified_sample(strata[train_controls], cap / len(train_controls), rng)
    return np.sort(train_controls[picked])


def sample_leaf(leaf: int, drawn: int, of: int, scaled: bool) -> int:
    """The ``min_data_in_leaf`` of a training set that trains on ``drawn`` of its ``of`` training
    controls, configured at ``leaf``: ``leaf`` when all are kept or ``scaled`` is False
    (``classify.fast_leaf: configured``), else ``leaf x drawn / of``, rounded, at least 1."""
    if drawn >= of or not scaled:
        return leaf
    return max(1, round(leaf * (drawn / of)))  # the share first, as the sample's weight is computed


@dataclass(frozen=True, eq=False)
class ControlSample:
    """The training controls one training set trains on (``rows``, sorted table rows) and the
    number it was drawn from (``of``): all of them when ``len(rows) == of``; ``scale_leaf``:
    whether its ``min_data_in_leaf`` is scaled by the share drawn (:func:`sample_leaf`)."""

    rows: np.ndarray
    of: int
    scale_leaf: bool = True

    @property
    def fraction(self) -> float:
        """The share of the training controls drawn: ``C / N`` (1.0 when all are kept)."""
        return len(self.rows) / self.of if self.of else 1.0

    @property
    def weight(self) -> float | None:
        """Each training row's weight, ``1 / fraction``; None (no weights) when all are kept."""
        return None if len(self.rows) >= self.of else self.of / len(self.rows)

    def params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """LightGBM's parameters for this sample: ``params`` with ``min_data_in_leaf`` (LightGBM's
        default where unset) as :func:`sample_leaf` gives it; ``params`` unchanged when every
        control is kept."""
        if self.weight is None:
            return dict(params)
        leaf = int(params.get("min_data_in_leaf", LIGHTGBM_MIN_DATA_IN_LEAF))
        return {**params, "min_data_in_leaf": sample_leaf(leaf, len(self.rows), self.of, self.scale_leaf)}
