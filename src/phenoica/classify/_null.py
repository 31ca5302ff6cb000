"""What is classified: the real guides of a table, and the pseudo-guides of the empirical null.

The empirical null (:func:`null_guide_design`): pseudo-guides made of whole control wells, laid
out like real guides (wells per plate and batch copied from a randomly drawn real guide), scored
by the same classifier. A pseudo-guide's wells leave the control set only for its own classifier
(training and held-out negatives); every real guide trains against the full control set (of its
fold, or of its plates under ``classify.control_scope: plates``).
Pseudo-guides need only their AUROC (:mod:`phenoica.hits._calls` turns the null into p-values), so they
never train the concentration models. Pseudo-guide ``j`` is scored in shard ``j % n_shards``.

Two layouts of the null (``classify.null_layout``; :func:`null_layout_choice` says which and why):

- ``plain`` (:func:`plain_null_design`): a pseudo-guide's wells are drawn among the control wells
  of each plate, so its positions change from plate to plate and a position's own effect averages
  out;
- ``position`` (:func:`position_null_design`): a pseudo-guide is one control construct at as many
  positions (``Metadata_Well``) as its template real guide holds, on the template's plates: on an
  arrayed screen, where a construct sits at the same well on every replicate plate, it carries the
  position's effect as a real guide does. Each pseudo-guide is a distinct (construct, positions,
  plates) set, so the null holds at most as many as the control positions allow.

``auto`` takes ``position`` where the control positions give at least half of
``classify.n_null_guides`` distinct position-aware pseudo-guides (:data:`POSITION_NULL_SHARE`), and
``plain`` otherwise.

The null's size, ``classify.n_null_guides``: a count, or ``auto`` (:func:`null_count`), a
tenth of the screen's guides between :data:`AUTO_NULL_MIN` and :data:`AUTO_NULL_MAX`
(docs/hit-calling.md, *A larger null*).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Iterable, NamedTuple, Sequence

import numpy as np
import pandas as pd

from phenoica.contract import BATCH, CONTROL, GENE, GUIDE, PERT_TYPE, PERTURBATION, PLATE, WELL, ScreenError
from phenoica.utils import keyed_uniforms, name_hashes, rng_for

NULL_GENE = "null"
#: The values of ``classify.null_layout``.
NULL_LAYOUTS: tuple[str, ...] = ("auto", "plain", "position")
#: ``auto`` takes the position-aware null where it can draw at least this share of
#: ``classify.n_null_guides`` distinct pseudo-guides. Why a half: with the default 100, a null of 50
#: reaches p = 1/51, so a guide above every pseudo-guide is called at q < 0.05 once a fifth of the
#: guides are; fewer distinct draws leave the calls to the null's resolution, not to the data.
POSITION_NULL_SHARE = 0.5
#: ``classify.n_null_guides: auto`` takes one pseudo-guide per this many of the screen's guides: each
#: pseudo-guide costs the classifiers of one guide, so a null of a tenth of the guides is 1 / 11 of
#: the classify CPU.
AUTO_NULL_GUIDES_PER_PSEUDO = 10
#: ``auto`` never goes below the fixed default's 100 (a screen of a few hundred guides keeps its null
#: and its CPU) ...
AUTO_NULL_MIN = 100
#: ... nor above the largest null measured calibrated on both the arrayed scenario and the shipped
#: plate (docs/hit-calling.md, *Measured: calibration against the null's size*).
AUTO_NULL_MAX = 600


def null_guide_count(setting: int | str, table: pd.DataFrame) -> int:
    """How many pseudo-guides ``classify.n_null_guides = setting`` asks for on ``table``
    (:func:`null_count` of the table's perturbation guides, counted only under ``auto``)."""
    return null_count(setting, len(guides_of(table)) if setting == "auto" else 0)


def null_count(setting: int | str, n_guides: int) -> int:
    """How many pseudo-guides ``classify.n_null_guides = setting`` asks for on a screen of
    ``n_guides`` guides: the count itself, or under ``auto`` one per
    :data:`AUTO_NULL_GUIDES_PER_PSEUDO` of them, rounded up, within [:data:`AUTO_NULL_MIN`,
    :data:`AUTO_NULL_MAX`]."""
    if setting == "auto":
        return max(AUTO_NULL_MIN, min(AUTO_NULL_MAX, -(-n_guides // AUTO_NULL_GUIDES_PER_PSEUDO)))
    if isinstance(setting, (str, bool)) or int(setting) != setting:
        raise ValueError(f"classify.n_null_guides: expected a count or 'auto', got {setting!r}")
    if setting < 0:
        raise ValueError(f"classify.n_null_guides: must be >= 0, got {setting}")
    return int(setting)


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


def unit_names(table: pd.DataFrame, units: np.ndarray) -> list[str]:
    """The name of each unit of :func:`well_units` (its plate and well; its plate and row label
    without a ``Metadata_Well`` column), in unit order: what a unit is called whatever else the
    table holds, so a draw keyed on it does not change when another unit is removed."""
    label = table[WELL].astype(str) if WELL in table.columns else pd.Series(table.index.astype(str), index=table.index)
    names = pd.Series((table[PLATE].astype(str) + "\x1f" + label).to_numpy()).groupby(units).first()
    return names.tolist()


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


class NullLayoutChoice(NamedTuple):
    """Which layout the null takes on a table (``plain`` or ``position``) and why, in words;
    ``position_capacity`` is how many distinct position-aware pseudo-guides the table allows."""

    layout: str
    reason: str
    position_capacity: int


def _templates(table: pd.DataFrame) -> list[tuple[tuple[str, ...], int]]:
    """Each real guide's layout as (its sorted plates, its number of distinct positions), one per
    guide, sorted by guide."""
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
    sub = pd.DataFrame(
        {
            "guide": (table[GENE].astype(str) + "\x1f" + table[GUIDE].astype(str)).to_numpy()[pert],
            "plate": table[PLATE].astype(str).to_numpy()[pert],
            "well": table[WELL].astype(str).to_numpy()[pert],
        }
    )
    return [(tuple(sorted(set(g["plate"]))), int(g["well"].nunique())) for _, g in sub.groupby("guide", sort=True)]


def control_positions(table: pd.DataFrame) -> dict[str, list[str]]:
    """Each control construct's (``gene\x1fguide``) positions: the sorted ``Metadata_Well`` values
    of its wells, over all plates."""
    is_control = control_mask(table)
    keys = table[GENE].astype(str).to_numpy()[is_control] + "\x1f" + table[GUIDE].astype(str).to_numpy()[is_control]
    wells = pd.Series(table[WELL].astype(str).to_numpy()[is_control])
    return {k: sorted(set(v)) for k, v in wells.groupby(keys, sort=True)}


#: :func:`position_null_capacity` counts up to this many pseudo-guides (a count the rule compares
#: with a few hundred at most; a table of many control positions allows astronomically many).
CAPACITY_CAP = 10**9


def position_null_capacity(table: pd.DataFrame) -> int:
    """How many distinct position-aware pseudo-guides the table allows for its most common real
    guide layout: the sum over control constructs of C(positions, m), m that layout's positions
    (0 without a ``Metadata_Well`` column or without real guides), counted up to
    :data:`CAPACITY_CAP`."""
    if WELL not in table.columns or not (table[PERT_TYPE].astype(str) == PERTURBATION).any():
        return 0
    templates = _templates(table)
    m = pd.Series([t[1] for t in templates]).mode().min()
    return int(min(CAPACITY_CAP, sum(math.comb(len(p), int(m)) for p in control_positions(table).values())))


def null_layout_choice(table: pd.DataFrame, setting: str, n: int | str) -> NullLayoutChoice:
    """The layout of the null on ``table`` under ``classify.null_layout = setting`` with ``n``
    pseudo-guides asked for (``classify.n_null_guides``: a count, or ``auto``), and why (module
    doc: ``auto`` takes ``position`` where the control positions give at least
    :data:`POSITION_NULL_SHARE` x ``n`` distinct pseudo-guides). Under ``n = auto`` the layout is
    decided at :data:`AUTO_NULL_MIN` whatever the size resolves to: a larger null never trades a
    screen's position-aware null for the plain one (the position design stops at its capacity)."""
    if n == "auto":
        n, asked = AUTO_NULL_MIN, f"the {AUTO_NULL_MIN} at which classify.n_null_guides auto decides the layout"
    else:
        n = null_guide_count(n, table)
        asked = f"classify.n_null_guides = {n}"
    if setting not in NULL_LAYOUTS:
        raise ValueError(f"classify.null_layout: expected one of {NULL_LAYOUTS}, got {setting!r}")
    capacity = position_null_capacity(table)
    need = math.ceil(POSITION_NULL_SHARE * n)
    counted = (
        f"the control constructs' positions allow {capacity} distinct position-aware pseudo-guide(s) "
        f"({len(control_positions(table)) if WELL in table.columns else 0} construct(s))"
    )
    if setting == "plain":
        return NullLayoutChoice("plain", f"classify.null_layout is plain; {counted}", capacity)
    if setting == "position":
        if capacity == 0:
            raise ScreenError(
                f"classify.null_layout is position, but {counted}: the table needs {WELL} and control wells whose "
                "positions a real guide's layout fits (set classify.null_layout: plain or auto)"
            )
        return NullLayoutChoice("position", f"classify.null_layout is position; {counted}", capacity)
    if n > 0 and capacity >= need:
        return NullLayoutChoice("position", f"auto: {counted}, at least half of {asked}", capacity)
    return NullLayoutChoice("plain", f"auto: {counted}, fewer than half of {asked} ({need})", capacity)


def null_guide_design(
    table: pd.DataFrame, n: int | str, seed: int, log: logging.Logger | None = None, layout: str = "plain"
) -> list[GuideSamples]:
    """The ``n`` pseudo-guides of the null (``classify.n_null_guides``, a count or ``auto``:
    :func:`null_guide_count`) in the layout ``layout`` (``classify.null_layout``, resolved on the
    table by :func:`null_layout_choice`, which is logged): :func:`plain_null_design` or
    :func:`position_null_design`."""
    log = log or logging.getLogger(__name__)
    n_guides = len(guides_of(table)) if n == "auto" else 0
    count = null_count(n, n_guides)
    if n == "auto":
        log.info("null guides: classify.n_null_guides auto = %d (%d guides)", count, n_guides)
    if layout == "plain" or count == 0:
        return plain_null_design(table, count, seed, log)
    choice = null_layout_choice(table, layout, n)
    log.info("null guides: %s layout (%s)", choice.layout, choice.reason)
    if choice.layout == "plain":
        return plain_null_design(table, count, seed, log)
    return position_null_design(table, count, seed, log)


def _check_null_table(table: pd.DataFrame) -> None:
    """The columns a null needs, and no gene named as the pseudo-guides are."""
    for col in (GENE, GUIDE, PERT_TYPE, BATCH, PLATE):
        if col not in table.columns:
            raise ScreenError(f"null guides: missing required column {col}")
    if (table[GENE].astype(str) == NULL_GENE).any():
        raise ScreenError(f"null guides: column {GENE} already uses the name {NULL_GENE!r} reserved for pseudo-guides")
    if not (table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION).any():
        raise ScreenError("null guides: the table has no perturbation guides whose layout pseudo-guides could copy")


def position_null_design(
    table: pd.DataFrame, n: int, seed: int, log: logging.Logger | None = None
) -> list[GuideSamples]:
    """Up to ``n`` position-aware pseudo-guides: each copies a real guide drawn at random (its
    template: its plates and its number ``m`` of distinct positions) with one control construct at
    ``m`` of its positions, drawn at random: every well of that construct at those positions on the
    template's plates (all their sites). Every pseudo-guide is a distinct (construct, positions,
    plates) set: draws that repeat one are drawn again, and the design stops short of ``n`` when
    the positions allow no more (logged). Seeds: ``derive_seed(seed, "position_null", j)`` for the
    ``j``-th draw, so the first pseudo-guides do not change when ``n`` grows.

    Raises ScreenError when the table lacks ``Metadata_Well`` or a control construct whose
    positions fit a real guide's layout."""
    log = log or logging.getLogger(__name__)
    _check_null_table(table)
    if WELL not in table.columns:
        raise ScreenError(f"null guides: the position-aware null needs the column {WELL}")
    templates = _templates(table)
    positions = control_positions(table)
    is_control = control_mask(table)
    key = table[GENE].astype(str) + "\x1f" + table[GUIDE].astype(str) + "\x1f"
    cell = (key + table[WELL].astype(str) + "\x1f" + table[PLATE].astype(str)).to_numpy()
    rows_of = pd.Series(np.arange(len(table))[is_control]).groupby(cell[is_control]).indices
    index = np.flatnonzero(is_control)
    constructs = sorted(positions)
    seen: set[tuple[str, tuple[str, ...], tuple[str, ...]]] = set()
    out: list[GuideSamples] = []
    capacity = position_null_capacity(table)
    attempts, draw = max(20 * n, 200), 0
    while len(out) < min(n, capacity) and draw < attempts:
        rng = rng_for(seed, "position_null", draw)
        draw += 1
        plates, m = templates[int(rng.integers(len(templates)))]
        fits = [c for c in constructs if len(positions[c]) >= m]
        if not fits:
            continue
        construct = fits[int(rng.integers(len(fits)))]
        chosen = tuple(sorted(rng.choice(positions[construct], size=m, replace=False).tolist()))
        if (construct, chosen, plates) in seen:
            continue
        parts = [rows_of.get(f"{construct}\x1f{w}\x1f{p}") for w in chosen for p in plates]
        found = [index[r] for r in parts if r is not None]
        if not found:
            continue
        seen.add((construct, chosen, plates))
        j = len(out)
        out.append(GuideSamples(NULL_GENE, null_guide_name(j, n), np.sort(np.concatenate(found)), True))
    if len(out) < n:
        log.info(
            "null guides: the control positions allow %d distinct position-aware pseudo-guide(s) of the %d asked for "
            "(classify.n_null_guides); the null holds %d",
            capacity,
            n,
            len(out),
        )
    return out


def plain_null_design(table: pd.DataFrame, n: int, seed: int, log: logging.Logger | None = None) -> list[GuideSamples]:
    """``n`` pseudo-guides, each a set of whole control wells laid out like a real guide.

    Pseudo-guide ``j`` copies the layout of one real guide drawn at random (its template): for
    every plate where the template has ``k`` wells, ``k`` control wells of that plate, all their
    sites (rows). So pseudo-guides have the screen's own distribution of wells per plate and
    batch, and are spread over batches as real guides are. When a plate holds too few control
    wells (fewer than ``k + 1``: one must stay a control), the wells come from the controls of
    the template's batch on any plate. Draws are independent between pseudo-guides (two may
    share a well): each is scored by its own classifier, against every control except its own
    wells. Seeds: ``derive_seed(seed, "null_guide", j)`` draws pseudo-guide ``j``'s template, so it
    does not change when ``n`` grows; its wells on a plate are the ``k`` with the smallest
    numbers :func:`phenoica.utils.keyed_uniforms` gives their (plate, well) names for
    ``("null_guide", j)``, a consistent sample: a control well removed from the table (an
    outlier dropped, an empty well) changes only the pseudo-guides that held it, each by that
    well alone, instead of redrawing the whole null.

    Raises ScreenError naming the batch and counts when a batch holds too few control wells to
    build even one pseudo-guide, or when the table has no perturbation guides to copy.
    """
    log = log or logging.getLogger(__name__)
    if n < 0:
        raise ValueError(f"classify.n_null_guides: must be >= 0, got {n}")
    if n == 0:
        return []
    _check_null_table(table)
    units = well_units(table)
    is_control = control_mask(table)
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
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
    names = unit_names(table, units)
    ctrl_hashes = name_hashes([names[u] for u in ctrl_units])  # only control wells are drawn
    fallback_plates: set[str] = set()
    out = []
    for j in range(n):
        rng = rng_for(seed, "null_guide", j)
        template = templates[int(rng.integers(len(templates)))]
        priority = np.empty(len(names))
        priority[ctrl_units] = keyed_uniforms(ctrl_hashes, seed, "null_guide", j)
        chosen: list[np.ndarray] = []
        used: set[int] = set()
        for p, b, k in template:
            pool = ctrl_by_plate.get(p, np.empty(0, dtype=np.int64))
            if len(pool) < k + 1:
                fallback_plates.add(p)
                pool = ctrl_by_batch[b]
            pool = np.asarray([u for u in pool if u not in used], dtype=np.int64)
            pick = pool[np.argsort(priority[pool], kind="stable")[: min(k, len(pool) - 1)]]
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
