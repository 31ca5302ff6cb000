"""Which null the mAP readout can take on a screen, and how deep each one reaches.

The within-plate permutation null (:mod:`~phenoica.classify._map_permutation`) exchanges a
guide's wells with its plates' control wells independently on every plate, so it is valid only
where a guide's wells on different plates are independent; a position's wells alike across plates
(a position effect, or image sets of one plate) break it. :func:`map_null_choice` decides
``classify.map_null: auto`` per table by the rule of docs/hit-calling.md (*Which mAP null a
screen can take*): the random-rank null without ``Metadata_Well``; the within-plate null where no
guide holds the same well on two of its plates; otherwise the control wells' position test
(:func:`grouping_share` of the well name within (plate, control construct) blocks, on the wells
as the readout compares them: :func:`readout_geometry`) at :data:`POSITION_ALPHA`.

:func:`map_p_floors` counts from the layout alone the smallest p-value each null can report for
each guide (the door's depth figures, :func:`phenoica.classify._capacity.map_capacity`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import sparse

from phenoica.classify._features import feature_matrix
from phenoica.classify._null import control_mask, well_units
from phenoica.contract import GENE, GUIDE, PLATE, WELL
from phenoica.utils import rng_for

#: The values of ``classify.map_null``.
MAP_NULLS: tuple[str, ...] = ("random_rank", "within_plate", "auto")
#: ``auto`` keeps the random-rank null where the control wells' position test has p at or below this.
POSITION_ALPHA = 0.05
#: Permutations of the position test.
N_PERMUTATIONS = 999


class MapNullChoice(NamedTuple):
    """The null a table's mAP readout takes (``random_rank`` or ``within_plate``) and why; the
    position test's share, permutation mean and p where it was run (NaN otherwise)."""

    null: str
    reason: str
    r2: float = math.nan
    r2_null: float = math.nan
    p_value: float = math.nan


def _between_share(X: np.ndarray, labels: np.ndarray, total: float) -> float:
    """Between-group sum of squares of ``X`` (centred: the grand mean is 0) over ``total``."""
    n_groups = int(labels.max()) + 1
    members = sparse.csr_matrix((np.ones(len(labels)), (labels, np.arange(len(labels)))), shape=(n_groups, len(labels)))
    sums = np.asarray(members @ X)
    sizes = np.bincount(labels, minlength=n_groups).astype(float)
    keep = sizes > 0
    return float((sums[keep] ** 2 / sizes[keep, None]).sum() / total)


def grouping_share(
    X: np.ndarray,
    labels: np.ndarray,
    blocks: np.ndarray,
    rng: np.random.Generator,
    n_permutations: int = N_PERMUTATIONS,
) -> tuple[float, float, float]:
    """(r2, permutation mean, permutation p-value) of grouping ``labels`` of the rows of ``X``
    after each of ``blocks``' means is taken out, with the labels permuted within blocks by ``rng``."""
    X = X.astype(np.float64, copy=True)
    block_codes = pd.factorize(blocks)[0]
    for b in np.unique(block_codes):
        X[block_codes == b] -= X[block_codes == b].mean(axis=0)
    total = float((X**2).sum())
    codes = pd.factorize(labels)[0]
    if total <= 0:
        return math.nan, math.nan, math.nan
    observed = _between_share(X, codes, total)
    members = [np.flatnonzero(block_codes == b) for b in np.unique(block_codes)]
    null = np.empty(n_permutations)
    permuted = codes.copy()
    for i in range(n_permutations):
        for rows in members:
            permuted[rows] = codes[rng.permutation(rows)]
        null[i] = _between_share(X, permuted, total)
    return observed, float(null.mean()), float((1 + np.sum(null >= observed - 1e-12)) / (n_permutations + 1))


def repeated_positions(wells: pd.DataFrame, is_control: np.ndarray) -> int:
    """How many guides of a well table hold the same ``Metadata_Well`` on two of their plates."""
    guides = wells.loc[~is_control, [GENE, GUIDE, WELL, PLATE]].astype(str)
    plates = guides.groupby([GENE, GUIDE, WELL], observed=True)[PLATE].nunique()
    return int(plates[plates > 1].reset_index()[[GENE, GUIDE]].drop_duplicates().shape[0])


def readout_geometry(wells: pd.DataFrame, is_control: np.ndarray) -> np.ndarray:
    """The wells as the mAP readout compares them: each plate taken from its control wells'
    centre (:func:`phenoica.classify.centered_on_plate_controls`), each well scaled to unit
    length (cosine similarity), so that the position test weighs features as the readout does."""
    from phenoica.classify._map_readout import centered_on_plate_controls

    X, _ = feature_matrix(wells, "mAP null choice", None)
    X = centered_on_plate_controls(X, wells[PLATE].astype(str).to_numpy(), is_control)
    return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), np.finfo(np.float64).tiny)


def map_null_choice(wells: pd.DataFrame, setting: str, seed: int, model: str = "", variant: str = "") -> MapNullChoice:
    """The null of the mAP readout on ``wells`` (one row per well, as the readout takes it) under
    ``classify.map_null = setting`` (module doc; the position test seeded ``rng_for(seed,
    "map_null", model, variant)``)."""
    if setting not in MAP_NULLS:
        raise ValueError(f"classify.map_null: expected one of {MAP_NULLS}, got {setting!r}")
    if setting != "auto":
        return MapNullChoice(setting, f"classify.map_null is {setting}")
    if WELL not in wells.columns:
        return MapNullChoice("random_rank", f"auto: no {WELL} column, so image sets of one plate cannot be told from "
                             "replicate plates")  # fmt: skip
    is_control = control_mask(wells)
    repeats = repeated_positions(wells, is_control)
    if not repeats:
        return MapNullChoice("within_plate", "auto: no guide holds the same well on two of its plates")
    controls = wells[is_control].reset_index(drop=True)
    labels = controls[WELL].astype(str).to_numpy()
    blocks = controls[PLATE].astype(str) + "\x1f" + controls[GENE].astype(str) + "\x1f" + controls[GUIDE].astype(str)
    varies = pd.DataFrame({"b": blocks, "l": labels}).groupby("b")["l"].nunique().gt(1).any()
    on_two = controls.groupby(WELL, observed=True)[PLATE].nunique().max() > 1 if len(controls) else False
    where = f"auto: {repeats} guide(s) hold one well on two or more of their plates"
    if not (varies and on_two):
        return MapNullChoice("random_rank", f"{where}, and the control wells cannot show whether positions carry an "
                             "effect (no control construct at two positions of a plate, or no control position on two "
                             "plates)")  # fmt: skip
    X = readout_geometry(wells, is_control)[is_control]
    r2, r2_null, p = grouping_share(X, labels, blocks.to_numpy(), rng_for(seed, "map_null", model, variant))
    measured = f"the control wells' position share {r2:.3f} (permutations {r2_null:.3f}, p {p:.3g})"
    if p <= POSITION_ALPHA:
        return MapNullChoice("random_rank", f"{where}, and positions carry an effect: {measured}", r2, r2_null, p)
    return MapNullChoice("within_plate", f"{where}; no position effect shown: {measured}", r2, r2_null, p)


def _log10_comb(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    """log10 C(n, k), elementwise."""
    from scipy.special import gammaln

    n, k = np.asarray(n, dtype=np.float64), np.asarray(k, dtype=np.float64)
    return (gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)) / math.log(10)


def map_p_floors(table: pd.DataFrame, max_null_size: int) -> pd.DataFrame:
    """Per guide of a screen's table (its guides with 2 wells or more, one on a plate with control
    wells): the smallest p-value each mAP null can report, counted from the layout
    (docs/hit-calling.md): ``random_rank`` 1 / C(k - 1 + n, n) for k wells and n the most control
    wells of its plates (one ranking putting all positives first), ``within_plate`` 1 / prod over
    its plates with control wells of C(g + c, g); each no lower than 1 / (``max_null_size`` + 1).
    Columns gene, guide, n_wells, random_rank, within_plate."""
    units = well_units(table)
    is_control = control_mask(table)
    plate = table[PLATE].astype(str).to_numpy()
    wells = pd.DataFrame({"unit": units, PLATE: plate, "control": is_control, GENE: table[GENE].astype(str).to_numpy(),
                          GUIDE: table[GUIDE].astype(str).to_numpy()}).drop_duplicates("unit")  # fmt: skip
    controls = wells[wells["control"]].groupby(PLATE).size()
    own = wells[~wells["control"]].groupby([GENE, GUIDE, PLATE]).size().rename("g").reset_index()
    own["c"] = own[PLATE].map(controls).fillna(0).to_numpy(dtype=np.int64)
    own["log_ways"] = np.where(own["c"] > 0, _log10_comb(own["g"] + own["c"], own["g"]), 0.0)
    per = own.groupby([GENE, GUIDE]).agg(n_wells=("g", "sum"), n=("c", "max"), log_ways=("log_ways", "sum"))
    per = per[(per["n_wells"] >= 2) & (per["n"] > 0)].reset_index()
    floor = -math.log10(max_null_size + 1)
    rr = -_log10_comb(per["n_wells"] - 1 + per["n"], per["n"])
    return per[[GENE, GUIDE, "n_wells"]].assign(
        random_rank=10 ** np.maximum(rr, floor), within_plate=10 ** np.maximum(-per["log_ways"], floor)
    )
