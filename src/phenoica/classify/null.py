"""What is classified: the real guides of a table, and the pseudo-guides of the empirical null.

The empirical null (:func:`null_guide_design`): pseudo-guides made of whole control wells, laid
out like real guides (wells per plate and batch copied from a randomly drawn real guide), scored
by the same classifier. A pseudo-guide's wells leave the control set only for its own classifier
(training and held-out negatives); every real guide trains against the full control set.
Pseudo-guides need only their AUROC (:mod:`phenoica.hits.calls` turns the null into p-values), so they
never train the concentration models. Pseudo-guide ``j`` is scored in shard ``j % n_shards``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from phenoica.contract.screen import BATCH, CONTROL, GENE, GUIDE, PERT_TYPE, PERTURBATION, PLATE, WELL, ScreenError
from phenoica.utils.seeding import rng_for

NULL_GENE = "null"


@dataclass(frozen=True, eq=False)
class GuideSamples:
    """One classification target: a real guide's perturbation rows, or a pseudo-guide's rows.

    ``rows`` are positional row indices of the table. A real guide's rows are never controls; a
    pseudo-guide's rows are control rows that leave the control set for its own classifier only.
    """

    gene: str
    guide: str
    rows: np.ndarray
    is_null: bool = False


def control_mask(table: pd.DataFrame) -> np.ndarray:
    """Rows of the shared control set: ``Metadata_PertType == "control"``."""
    return table[PERT_TYPE].astype(str).to_numpy() == CONTROL


def well_units(table: pd.DataFrame) -> np.ndarray:
    """An integer code per row naming its (plate, well); each row is its own unit without a
    ``Metadata_Well`` column (e.g. embeddings computed elsewhere without wells)."""
    if WELL not in table.columns:
        return np.arange(len(table), dtype=np.int64)
    keys = table[PLATE].astype(str) + "\x1f" + table[WELL].astype(str)
    return pd.factorize(keys, sort=True)[0].astype(np.int64)


def guides_of(table: pd.DataFrame, genes: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """Sorted (gene, guide) pairs of the table's perturbations (of ``genes`` if given)."""
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
    pairs = table.loc[pert, [GENE, GUIDE]].astype(str).drop_duplicates()
    if genes is not None:
        pairs = pairs[pairs[GENE].isin(list(genes))]
    return sorted(map(tuple, pairs.to_numpy().tolist()))  # type: ignore[arg-type]


def guide_samples(table: pd.DataFrame, guides: Sequence[tuple[str, str]]) -> list[GuideSamples]:
    """The perturbation rows of each (gene, guide); an error names any pair the table lacks."""
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
    keys = table[GENE].astype(str) + "\x1f" + table[GUIDE].astype(str)
    positions = keys[pert].groupby(keys[pert], sort=False).indices
    index = np.flatnonzero(pert)
    missing = [g for g in guides if f"{g[0]}\x1f{g[1]}" not in positions]
    if missing:
        raise ValueError(f"requested guide(s) {missing[:5]} are not perturbation guides of the table")
    return [GuideSamples(g, s, index[positions[f"{g}\x1f{s}"]]) for g, s in guides]


def control_constructs(table: pd.DataFrame) -> list[GuideSamples]:
    """Each control construct (a ``Metadata_Guide`` of the control rows) as a classification
    target, when the controls hold two or more: its rows leave the control set for its own
    classifier, exactly as a pseudo-guide's wells do, so it is scored against the remaining
    controls as a guide is. Its gene is the controls' gene name (never :data:`NULL_GENE`, which
    the door reserves), which tells its score rows from the pseudo-guides'. Sorted by (gene, guide)."""
    is_control = control_mask(table)
    if not is_control.any():
        return []
    keys = pd.Series(
        table[GENE].astype(str).to_numpy()[is_control] + "\x1f" + table[GUIDE].astype(str).to_numpy()[is_control]
    )
    positions = keys.groupby(keys, sort=True).indices
    if len(positions) < 2:
        return []
    index = np.flatnonzero(is_control)
    return [GuideSamples(*key.split("\x1f"), index[rows], True) for key, rows in positions.items()]


def null_guide_name(j: int, n: int) -> str:
    """Name of pseudo-guide ``j`` (0-based) of ``n``: ``null_0001``..."""
    return f"null_{j + 1:0{max(4, len(str(n)))}d}"


def null_guide_design(table: pd.DataFrame, n: int, seed: int, log: logging.Logger | None = None) -> list[GuideSamples]:
    """``n`` pseudo-guides, each a set of whole control wells laid out like a real guide.

    Pseudo-guide ``j`` copies the layout of one real guide drawn at random (its template): for
    every plate where the template has ``k`` wells, ``k`` control wells of that plate, all their
    sites (rows). So pseudo-guides have the screen's own distribution of wells per plate and
    batch, and are spread over batches as real guides are. When a plate holds too few control
    wells (fewer than ``k + 1``: one must stay a control), the wells come from the controls of
    the template's batch on any plate. Draws are independent between pseudo-guides (two may
    share a well): each is scored by its own classifier, against every control except its own
    wells. Seeds: ``derive_seed(seed, "null_guide", j)``, so pseudo-guide ``j`` does not change
    when ``n`` grows.

    Raises ScreenError naming the batch and counts when a batch holds too few control wells to
    build even one pseudo-guide, or when the table has no perturbation guides to copy.
    """
    log = log or logging.getLogger(__name__)
    if n < 0:
        raise ValueError(f"classify.n_null_guides: must be >= 0, got {n}")
    if n == 0:
        return []
    for col in (GENE, GUIDE, PERT_TYPE, BATCH, PLATE):
        if col not in table.columns:
            raise ScreenError(f"null guides: missing required column {col}")
    if (table[GENE].astype(str) == NULL_GENE).any():
        raise ScreenError(f"null guides: column {GENE} already uses the name {NULL_GENE!r} reserved for pseudo-guides")
    units = well_units(table)
    is_control = control_mask(table)
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
    if not pert.any():
        raise ScreenError("null guides: the table has no perturbation guides whose layout pseudo-guides could copy")
    plate = table[PLATE].astype(str).to_numpy()
    batch = table[BATCH].astype(str).to_numpy()
    unit_plate = pd.Series(plate, index=units).groupby(level=0).first()
    unit_batch = pd.Series(batch, index=units).groupby(level=0).first()
    rows_of_unit = pd.Series(np.arange(len(table)), index=units).groupby(level=0).indices
    ctrl_units = np.unique(units[is_control])
    ctrl_by_plate = {p: u for p, u in pd.Series(ctrl_units, index=unit_plate[ctrl_units].to_numpy()).groupby(level=0)}
    ctrl_by_plate = {p: np.sort(u.to_numpy()) for p, u in ctrl_by_plate.items()}
    ctrl_by_batch = {
        b: np.sort(u.to_numpy())
        for b, u in pd.Series(ctrl_units, index=unit_batch[ctrl_units].to_numpy()).groupby(level=0)
    }
    # templates: each real guide's wells per plate
    layout = pd.DataFrame(
        {
            "guide": (table[GENE].astype(str) + "\x1f" + table[GUIDE].astype(str)).to_numpy()[pert],
            "plate": plate[pert],
            "batch": batch[pert],
            "unit": units[pert],
        }
    )
    per_plate = layout.drop_duplicates("unit").groupby(["guide", "plate", "batch"], sort=True).size()
    templates: list[list[tuple[str, str, int]]] = [
        [(p, b, int(k)) for (_, p, b), k in grp.items()] for _, grp in per_plate.groupby(level=0, sort=True)
    ]
    # a batch must hold enough control wells for the largest need any template has there
    need = per_plate.groupby(["guide", "batch"]).sum().groupby(level="batch").max()
    for b, k in need.items():
        have = len(ctrl_by_batch.get(b, ()))
        if have < int(k) + 1:
            raise ScreenError(
                f"null guides: batch {b!r} has {have} control well(s); a pseudo-guide laid out like the real guides "
                f"needs up to {int(k)} there, and at least one more must stay a control. Too few control wells to "
                "build the empirical null (add control wells, or set classify.n_null_guides: 0 to score without "
                "hit calls)"
            )
    fallback_plates: set[str] = set()
    out = []
    for j in range(n):
        rng = rng_for(seed, "null_guide", j)
        template = templates[int(rng.integers(len(templates)))]
        chosen: list[np.ndarray] = []
        used: set[int] = set()
        for p, b, k in template:
            pool = ctrl_by_plate.get(p, np.empty(0, dtype=np.int64))
            if len(pool) < k + 1:
                fallback_plates.add(p)
                pool = ctrl_by_batch[b]
            pool = np.asarray([u for u in pool if u not in used], dtype=np.int64)
            pick = rng.choice(pool, size=min(k, len(pool) - 1), replace=False)
            used.update(int(u) for u in pick)
            chosen.append(pick)
        units_j = np.sort(np.concatenate(chosen))
        rows = np.sort(np.concatenate([rows_of_unit[u] for u in units_j]))
        out.append(GuideSamples(NULL_GENE, null_guide_name(j, n), rows, True))
    if fallback_plates:
        log.info(
            "null guides: %d plate(s) hold too few control wells for a guide's layout (%s%s); their pseudo-guide "
            "wells come from the controls of the same batch",
            len(fallback_plates),
            sorted(fallback_plates)[:5],
            " ..." if len(fallback_plates) > 5 else "",
        )
    return out


def split_control_rows(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Score rows -> (guide and pseudo-guide rows, control-construct rows): a control construct's
    rows carry ``is_null_guide`` (its wells are controls) under the controls' gene, a pseudo-guide's
    under :data:`NULL_GENE`. The control rows lose ``is_null_guide``."""
    is_control = rows["is_null_guide"].astype(bool).to_numpy() & (rows[GENE].astype(str).to_numpy() != NULL_GENE)
    controls = rows[is_control].drop(columns=["is_null_guide"]).reset_index(drop=True)
    return rows[~is_control].reset_index(drop=True), controls
