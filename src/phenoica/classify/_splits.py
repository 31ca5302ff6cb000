"""Batch-effect splits: which rows a classifier trains on and which it is scored on.

- ``leave_one_batch_out``: one fold per batch (sorted by name); the fold's test rows are
  exactly that batch's rows and it never trains on them. Scores then measure how well a
  phenotype transfers to a batch the classifier has never seen (Nelson et al. 2026 Tables 3/4).
- ``in_distribution``: ``n_folds`` independent seeded draws (repeated random holdout, not a
  partition); each holds out ``holdout_fraction`` of every batch's wells, stratified by batch
  and guide (every guide of a batch loses its share of wells, rounded so the batch total is
  exact). Whole wells move: the sites of one well are never split between train and test.

Folds hold positional row indices (``iloc``) of the table they were made from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from phenoica.classify._options import SplitOptions
from phenoica.contract import (
    BATCH,
    CONTROL,
    GENE,
    GUIDE,
    IMAGE_INDEX,
    PERT_TYPE,
    PERTURBATION,
    PLATE,
    SITE,
    WELL,
    ScreenError,
)
from phenoica.utils import read_table, rng_for

SCHEMES = ("leave_one_batch_out", "in_distribution")
TRAIN, TEST = "train", "test"
FOLD_COLUMNS = ("fold", "row", "split", "heldout_batches")


@dataclass(frozen=True, eq=False)
class Fold:
    """One train/test split: positional row indices (sorted, read-only) and held-out batches.

    ``heldout_batches`` names the batches whose every row is in test (empty for in-distribution
    folds). Equality is identity (``eq=False``): arrays have no single truth value.
    """

    name: str
    train: np.ndarray
    test: np.ndarray
    heldout_batches: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for attr in ("train", "test"):
            arr = np.sort(np.asarray(getattr(self, attr), dtype=np.int64))
            arr.setflags(write=False)
            object.__setattr__(self, attr, arr)
        if np.intersect1d(self.train, self.test).size:
            raise ValueError(f"fold {self.name}: rows in both train and test")


def _batches(table: pd.DataFrame) -> np.ndarray:
    """The batch label of every row as str, checked present and complete."""
    if BATCH not in table.columns:
        raise ScreenError(f"profiles: missing column {BATCH}, needed for batch-effect splits")
    missing = table[BATCH].isna().to_numpy()
    if missing.any():
        raise ScreenError(f"profiles: column {BATCH} has missing values at row(s) {list(np.flatnonzero(missing)[:5])}")
    return table[BATCH].astype(str).to_numpy()


def leave_one_batch_out(table: pd.DataFrame) -> list[Fold]:
    """One fold per batch: test = that batch's rows, train = every other batch's rows.

    Raises ScreenError for a single batch (suggesting in_distribution), for a batch without
    controls (its fold could score nothing), and for guides present in only one batch (no fold
    could both train and score them), naming them and their batch.
    """
    batches = _batches(table)
    names = np.unique(batches)
    if names.size < 2:
        raise ScreenError(
            f"profiles: leave-one-batch-out needs at least 2 batches in {BATCH}, found {names.tolist()}; "
            "use splits.scheme in_distribution for a single batch"
        )
    if PERT_TYPE in table.columns:
        ptype = table[PERT_TYPE].astype(str).to_numpy()
        lacking = sorted(set(names.tolist()) - set(batches[ptype == CONTROL].tolist()))
        if lacking:
            raise ScreenError(
                f"profiles: batch(es) {lacking} hold no control samples ({PERT_TYPE} == {CONTROL!r}); under "
                "leave-one-batch-out every held-out batch needs controls to score guides against"
            )
        if GUIDE in table.columns:
            pert = ptype == PERTURBATION
            cols = [c for c in (GENE, GUIDE) if c in table.columns]
            guide_batches = (
                pd.DataFrame(
                    {"g": table.loc[pert, cols].astype(str).agg(" / ".join, axis=1).to_numpy(), "b": batches[pert]}
                )
                .groupby("g")["b"]
                .unique()
            )
            single = guide_batches[guide_batches.map(len) == 1]
            if len(single):
                listed = ", ".join(f"{g} (only in {b[0]})" for g, b in single.head(10).items())
                raise ScreenError(
                    f"profiles: {len(single)} of {len(guide_batches)} guide(s) are present in only one batch: "
                    f"{listed}{' ...' if len(single) > 10 else ''}. Leave-one-batch-out can never train and score "
                    "such a guide; remove it from the screen, or use splits.scheme in_distribution"
                )
    folds = []
    for batch in names.tolist():
        held = batches == batch
        folds.append(Fold(batch, np.flatnonzero(~held), np.flatnonzero(held), (batch,)))
    return folds


def stratified_sample(strata: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Positions of a seeded stratified sample of ``strata``: ``round(fraction * n)`` in total,
    spread over the strata (the wells held out of one batch, by guide; the training controls
    of the fast protocol, by plate).

    Each stratum gets ``floor(fraction * size)`` rows, and the remainder of the total goes to
    the strata with the largest fractional parts (ties broken at random), so every stratum is
    within one row of its exact share.
    """
    labels, inverse, sizes = np.unique(strata, return_inverse=True, return_counts=True)
    target = int(round(fraction * strata.size))
    exact = fraction * sizes
    quota = np.floor(exact).astype(np.int64)
    extra = target - int(quota.sum())
    if extra > 0:
        order = np.lexsort((rng.random(labels.size), -(exact - quota)))
        quota[order[:extra]] += 1
    held = []
    for s in range(labels.size):
        members = np.flatnonzero(inverse == s)
        held.append(rng.choice(members, size=int(quota[s]), replace=False))
    return np.concatenate(held) if held else np.empty(0, dtype=np.int64)


def _well_codes(table: pd.DataFrame) -> np.ndarray:
    """An integer per row naming its (plate, well); each row its own unit without well columns."""
    if WELL not in table.columns or PLATE not in table.columns:
        return np.arange(len(table), dtype=np.int64)
    keys = table[PLATE].astype(str) + "\x1f" + table[WELL].astype(str)
    return pd.factorize(keys, sort=True)[0].astype(np.int64)


def in_distribution(table: pd.DataFrame, holdout_fraction: float, n_folds: int, seed: int) -> list[Fold]:
    """``n_folds`` seeded random holdouts of ``holdout_fraction`` of each batch's wells,
    stratified by guide; every site of a held-out well is held out.

    Fold ``f`` draws with ``rng_for(seed, "in_distribution", f)``, so a fold does not change
    when ``n_folds`` grows. Without a guide column the draw is stratified by batch only; without
    plate/well columns every row is its own well.
    """
    if not 0 < holdout_fraction < 1:
        raise ValueError(f"holdout_fraction: expected a fraction in (0, 1), got {holdout_fraction}")
    if n_folds < 1:
        raise ValueError(f"n_folds: expected >= 1, got {n_folds}")
    batches = _batches(table)
    guides = table[GUIDE].astype(str).to_numpy() if GUIDE in table.columns else np.zeros(len(table), dtype=str)
    wells = _well_codes(table)
    first = pd.Series(np.arange(len(table))).groupby(wells).first().to_numpy()  # one row per well
    well_batch, well_guide = batches[first], guides[first]
    groups = [np.flatnonzero(well_batch == b) for b in np.unique(well_batch).tolist()]
    folds = []
    for f in range(n_folds):
        rng = rng_for(seed, "in_distribution", f)
        held_wells = np.concatenate([w[stratified_sample(well_guide[w], holdout_fraction, rng)] for w in groups])
        test = np.flatnonzero(np.isin(wells, held_wells))
        train = np.setdiff1d(np.arange(len(table)), test)
        folds.append(Fold(f"fold{f}", train, test, ()))
    return folds


def make_folds(table: pd.DataFrame, options: SplitOptions) -> list[Fold]:
    """The folds ``options.scheme`` asks for: :func:`leave_one_batch_out`, or
    :func:`in_distribution` with ``options``' share, repeats and seed."""
    scheme = options.scheme
    if scheme == "leave_one_batch_out":
        return leave_one_batch_out(table)
    if scheme == "in_distribution":
        return in_distribution(table, float(options.holdout_fraction), int(options.n_folds), options.seed)
    raise ValueError(f"splits.scheme: expected one of {SCHEMES}, got {scheme!r}")


def folds_table(table: pd.DataFrame, folds: list[Fold]) -> pd.DataFrame:
    """A long table, one row per (fold, table row in the fold): which rows train and test.

    Columns: ``fold``, ``row`` (positional index in ``table``), ``split`` (train/test),
    ``heldout_batches`` ("|"-joined), plus the image's identifying Metadata columns
    (batch, plate, well, site, image index) where the table has them.
    """
    keys = [c for c in (BATCH, PLATE, WELL, SITE, IMAGE_INDEX) if c in table.columns]
    parts = []
    for fold in folds:
        for split, rows in ((TRAIN, fold.train), (TEST, fold.test)):
            if rows.size and rows.max() >= len(table):
                raise ValueError(f"fold {fold.name}: row {int(rows.max())} beyond the table's {len(table)} rows")
            part = table.iloc[rows][keys].reset_index(drop=True)
            part.insert(0, "fold", fold.name)
            part.insert(1, "row", rows)
            part.insert(2, "split", split)
            part.insert(3, "heldout_batches", "|".join(fold.heldout_batches))
            parts.append(part)
    if not parts:
        raise ValueError("folds_table: no folds given")
    return pd.concat(parts, ignore_index=True)


def folds_from_table(long: pd.DataFrame, source: str = "folds table") -> list[Fold]:
    """The folds back from :func:`folds_table`'s output (in order of first appearance)."""
    missing = [c for c in FOLD_COLUMNS if c not in long.columns]
    if missing:
        raise ValueError(f"{source}: missing column(s) {missing}; expected {list(FOLD_COLUMNS)}")
    bad = sorted(set(long["split"].astype(str)) - {TRAIN, TEST})
    if bad:
        raise ValueError(f"{source}: column split has {bad}; expected {TRAIN!r} or {TEST!r}")
    folds = []
    for name, rows in long.groupby("fold", sort=False):
        split = rows["split"].astype(str).to_numpy()
        held = str(rows["heldout_batches"].iloc[0])
        folds.append(
            Fold(
                str(name),
                rows["row"].to_numpy()[split == TRAIN],
                rows["row"].to_numpy()[split == TEST],
                tuple(held.split("|")) if held else (),
            )
        )
    return folds


def read_folds(path: Path | str, table: pd.DataFrame) -> list[Fold]:
    """Folds saved by :func:`folds_table`, checked against the table they will index.

    Every row index must exist in ``table``, and the identifying Metadata columns saved with
    the folds (batch, plate, well, site, image index) must match ``table`` at those rows, so
    folds made from one table are never applied to a reordered or different one.
    """
    source = str(path)
    long = read_table(path)
    folds = folds_from_table(long, source)
    rows = long["row"].to_numpy()
    if rows.size and (rows.min() < 0 or rows.max() >= len(table)):
        raise ScreenError(f"{source}: row index {int(rows.max())} out of range for a table of {len(table)} rows")
    for col in (BATCH, PLATE, WELL, SITE, IMAGE_INDEX):
        if col in long.columns and col in table.columns:
            saved = long[col].astype(str).to_numpy()
            actual = table[col].astype(str).to_numpy()[rows]
            wrong = np.flatnonzero(saved != actual)
            if wrong.size:
                i = int(wrong[0])
                raise ScreenError(
                    f"{source}: fold {long['fold'].iloc[i]!r} row {int(rows[i])} has {col} {saved[i]!r} in the "
                    f"folds but {actual[i]!r} in the table; the folds were made from a different table"
                )
    return folds
