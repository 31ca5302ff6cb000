"""What each readout can score on a screen, computed from its layout before any job runs.

The classifier readout trains one model per guide and fold on the guide's rows outside the
fold's held-out batches, and scores it on the held-out rows: a (guide, fold) is scored only with
at least ``classify.min_train_samples`` training rows and ``classify.min_test_samples`` held-out
rows (:func:`phenoica.classify._skips.skip_reasons`). On an arrayed screen of one well per guide
per plate this binds: leave-one-batch-out over 2 batches of 4 replicate plates trains each guide
on 4 wells. The pseudo-guides of the empirical null copy real guides' layouts
(:func:`phenoica.classify.null_guide_design`), so they are skipped as often, and hit calls
need at least 3 scored pseudo-guides (the parametric null; 1 for the empirical one). The mAP
readout needs no training set: a guide with 2 wells or more, one of them on a plate with control
wells, gets a mAP and a p-value (:func:`phenoica.classify.guide_map`).

:func:`classifier_capacity` and :func:`map_capacity` count it on the screen's own table, exactly
as the jobs will (the same folds, the same pseudo-guide draw, the same skip rule), so the door can
say before any job which guides each readout will score, whether the classifier's null can be
built, and which setting would change it (:func:`phenoica.classify.readout_capacity` asks every
registered readout).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from phenoica.classify._engine import fold_masks
from phenoica.classify._lightgbm_params import LIGHTGBM_MIN_DATA_IN_LEAF
from phenoica.classify._map_depth import map_p_floors
from phenoica.classify._null import GuideSamples, control_mask, guide_samples, guides_of, null_guide_design, well_units
from phenoica.classify._options import ClassifyOptions, SplitOptions
from phenoica.classify._protocol import control_strata, sample_leaf, trainings
from phenoica.classify._skips import plate_control_reasons, skip_reasons
from phenoica.classify._splits import make_folds
from phenoica.contract import PLATE, WELL, ScreenError

#: Scored pseudo-guides each null model needs to call hits (as :class:`phenoica.hits.NullFit`).
NULL_NEEDS: dict[str, int] = {"pareto": 1, "parametric": 3, "empirical": 1}
#: How many names a note lists before "...".
FIRST_NAMES = 5


@dataclass(frozen=True)
class ReadoutCapacity:
    """What one readout can score: guides scored, the first unscored ones, and the counts behind it.

    ``calls`` says whether it can call hits (the classifier needs its null); ``reason`` says why
    not, with the setting that would change it; ``units`` summarises the rows each guide gets
    per fold (training and held-out, min / median / max over guides)."""

    readout: str
    n_guides: int
    n_scored: int
    unscored: list[str] = field(default_factory=list)
    calls: bool = True
    reason: str = ""
    units: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "readout": self.readout,
            "n_guides": self.n_guides,
            "n_scored": self.n_scored,
            "unscored_first": self.unscored[:FIRST_NAMES],
            "calls": self.calls,
            "reason": self.reason,
            "units": self.units,
        }


def _names(pairs: list[tuple[str, str]]) -> str:
    shown = ", ".join(f"{g}/{s}" for g, s in pairs[:FIRST_NAMES])
    return shown + (" ..." if len(pairs) > FIRST_NAMES else "")


def _fold_counts(
    targets: list[GuideSamples], table: pd.DataFrame, folds: list[Any], options: ClassifyOptions
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per target and fold: training rows, held-out rows, whether the pair is scored (the
    engine's rule, over the protocol's training sets), the training control rows its models train
    on (every training control of the fold, or under ``classify.control_scope: plates`` of the
    target's plates; at most the fast protocol's ``classify.fast_train_controls``) and the
    training controls they are drawn from, and whether its plates' controls alone keep it unscored
    (:func:`phenoica.classify._skips.plate_control_reasons`)."""
    sets = trainings(folds, fold_masks(folds, len(table)), options.max_fold_groups)
    n_folds = sum(len(t.members) for t in sets)
    train = np.zeros((len(targets), n_folds), dtype=np.int64)
    test = np.zeros_like(train)
    drawn_from = np.zeros_like(train)
    ok = np.zeros(train.shape, dtype=bool)
    short = np.zeros(train.shape, dtype=bool)
    controls = control_mask(table)
    scoped = options.control_scope == "plates"
    strata = control_strata(table)
    n_strata = int(strata.max()) + 1 if len(strata) else 0
    # the plates holding each target's rows, where they bound its controls
    plates_of = [np.unique(strata[t.rows]) for t in targets] if scoped else []
    m0 = 0
    for training in sets:
        per_plate = np.bincount(strata[training.train & controls], minlength=n_strata)
        held_out_per_plate = [np.bincount(strata[t & controls], minlength=n_strata) for _, t in training.members]
        n_all = int(per_plate.sum())
        for i, target in enumerate(targets):
            rows = target.rows
            in_train = rows[training.train[rows]]
            n_ctrl = int(per_plate[plates_of[i]].sum()) if scoped else n_all
            n_own = int(controls[in_train].sum()) if scoped else 0  # a pseudo-guide's own training wells
            for m, ((_, held_out), held) in enumerate(zip(training.members, held_out_per_plate), start=m0):
                in_test = rows[held_out[rows]]
                train[i, m], test[i, m], drawn_from[i, m] = len(in_train), len(in_test), n_ctrl
                lacking = []
                if scoped:  # its held-out negatives: the controls on its plates, less its own held-out wells
                    n_negatives = int(held[plates_of[i]].sum()) - int(controls[in_test].sum())
                    lacking = plate_control_reasons(n_ctrl - n_own, n_negatives, options)
                ok[i, m] = not skip_reasons(len(in_train), len(in_test), options) and not lacking
                short[i, m] = bool(lacking)
        m0 += len(training.members)
    cap = options.max_train_controls  # the fast protocol trains on at most this many
    negatives = drawn_from if cap is None else np.minimum(drawn_from, cap)
    return train, test, ok, negatives, drawn_from, short


def fold_leaves(negatives: np.ndarray, drawn_from: np.ndarray, options: ClassifyOptions, leaf: int) -> np.ndarray:
    """The ``min_data_in_leaf`` each (target and) fold's models use
    (:func:`phenoica.classify._protocol.sample_leaf`), of the same shape as ``negatives``: ``leaf``
    (the configured value) where every training control is kept or ``classify.fast_leaf`` is
    ``configured``, scaled by the share drawn where it is ``scaled``."""
    negatives, drawn_from = np.asarray(negatives), np.asarray(drawn_from)
    flat = [sample_leaf(leaf, int(n), int(of), options.scale_leaf) for n, of in zip(negatives.flat, drawn_from.flat)]
    return np.array(flat, dtype=np.int64).reshape(negatives.shape)


def no_split_note(
    train: np.ndarray, ok: np.ndarray, negatives: np.ndarray, leaf: int | np.ndarray, configured: int | None = None
) -> str:
    """Why LightGBM can make no split in any scored (guide, fold), or "": a split needs
    ``min_data_in_leaf`` training rows on each side, so a training set (the guide's rows and the
    fold's training controls) of fewer than twice that many gives a model without a split, whose
    every score is 0.5, for the guides and the null alike: no answer, though it reads as one.
    ``negatives`` are the training controls, one per fold or one per target and fold; ``leaf`` is
    the ``min_data_in_leaf`` the models use, one value or one per fold or per target and fold
    (:func:`fold_leaves`); ``configured``: the configured one
    (:func:`phenoica.classify._lightgbm_params.min_data_in_leaf_of`), said where a fold's is smaller."""
    if not ok.any():
        return ""
    rows = train + np.broadcast_to(np.asarray(negatives, dtype=np.int64), train.shape)
    leaves = np.broadcast_to(np.asarray(leaf, dtype=np.int64), train.shape)
    room = np.where(ok, rows - 2 * leaves, np.iinfo(np.int64).min)
    if room.max() >= 0:
        return ""
    i, m = np.unravel_index(int(np.argmax(room)), room.shape)
    largest, used = int(rows[i, m]), int(leaves[i, m])
    scaled = configured is not None and used < configured
    source = (
        f"{configured} scaled by the share of the controls drawn" if scaled else "classify.lightgbm.min_data_in_leaf"
    )
    return (
        f"the classifier can make no split: its largest training set against that leaf holds {largest} rows (the "
        f"guide's and the fold's training controls), under twice the min_data_in_leaf its models use, {used} "
        f"({source}), so every "
        f"model is a constant and every AUROC 0.5 (no answer). Set classify.lightgbm.min_data_in_leaf to at most "
        f"{max(1, largest // 2)} (LightGBM's leaves on so few rows; docs/per-well-profiles.md), or add control "
        "wells or replicate plates"
    )


def _spread(values: np.ndarray) -> dict[str, float]:
    if values.size == 0:
        return {}
    return {"min": int(values.min()), "median": float(np.median(values)), "max": int(values.max())}


def _advice(splits: SplitOptions, min_train: int, most: int) -> str:
    """What would let the unscored guides be scored on this layout, never the setting in force:
    a lower ``classify.min_train_samples`` where the guides have some training rows, more
    replicates, and the in-distribution scheme where another scheme is set."""
    ways = []
    if 1 <= most < min_train:
        ways.append(f"lower classify.min_train_samples to {most} (a classifier trained on {most} rows per guide)")
    ways.append("add batches or replicate plates (more wells per guide)")
    if splits.scheme != "in_distribution":
        ways.append("use splits.scheme: in_distribution")
    return ("Ways to score them: " if len(ways) > 1 else "To score them: ") + "; or ".join(ways)


def classifier_capacity(
    table: pd.DataFrame,
    splits: SplitOptions,
    options: ClassifyOptions,
    null_model: str,
    seed: int,
    folds: Sequence[Any] | None = None,
    min_data_in_leaf: int = LIGHTGBM_MIN_DATA_IN_LEAF,
) -> ReadoutCapacity:
    """The classifier readout on ``table`` (one row per classified unit: image or well, as the
    jobs will classify it): which guides get at least one scored fold, and whether the null's
    pseudo-guides (``options.n_null_guides``, drawn as the jobs draw them) leave enough scored
    ones to call hits with ``null_model``, and whether LightGBM can split at all with
    ``min_data_in_leaf`` rows a leaf. ``folds`` are the table's folds when the caller built
    them already (else made here from ``splits``)."""
    table = table.reset_index(drop=True)
    folds = make_folds(table, splits) if folds is None else list(folds)
    guides = guides_of(table)
    real = guide_samples(table, guides)
    train, test, ok, negatives, drawn_from, short = _fold_counts(real, table, folds, options)
    scored = ok.any(axis=1)
    unscored = [guides[i] for i in np.flatnonzero(~scored)]
    units = {"train_per_fold": _spread(train.max(axis=1)), "held_out_per_fold": _spread(test.min(axis=1))}
    if options.control_scope == "plates":
        units["train_controls_per_fold"] = _spread(drawn_from.min(axis=1))
    reason = ""
    if short.any():
        reason = (
            f"{int(short.any(axis=1).sum())} guide(s) are skipped in {int(short.sum())} (guide, fold) pair(s) "
            f"({int((short.any(axis=1) & ~scored).sum())} of them in every fold) for want of controls on their own "
            f"plates (classify.control_scope plates: fewer than classify.min_train_samples = "
            f"{options.min_train_samples} training controls there, or no held-out control): give their plates "
            "control wells, or use classify.control_scope: fold"
        )
    if unscored:
        lo_train, lo_test = options.min_train_samples, options.min_test_samples
        short_train = int((train[~scored] < lo_train).all(axis=1).sum())
        most = int(train[~scored].max()) if train.size else 0  # the most training rows an unscored guide has
        reason = (reason + ". " if reason else "") + (
            f"{len(unscored)} of {len(guides)} guides get no scored fold under splits.scheme "
            f"{splits.scheme} ({short_train} have fewer than "
            f"classify.min_train_samples = {lo_train} training rows in every fold: at most {most}; held-out rows at "
            f"least {lo_test} = classify.min_test_samples): {_names(unscored)}. {_advice(splits, lo_train, most)}"
        )
    calls = True
    need = NULL_NEEDS[null_model]
    if options.n_null_guides == 0:
        calls, null_reason = False, "classify.n_null_guides is 0: no null, so no classifier hit calls"
    else:
        try:
            nulls = null_guide_design(table, options.n_null_guides, seed, layout=options.null_layout)
        except ScreenError as exc:
            nulls, null_reason = [], str(exc)
            calls = False
        if calls:
            n_null_ok = int(_fold_counts(nulls, table, folds, options)[2].any(axis=1).sum())
            units["null_scored"] = n_null_ok
            units["null_drawn"] = len(nulls)
            if n_null_ok < need:
                calls = False
                null_reason = (
                    f"the null would have {n_null_ok} scored pseudo-guide(s) of {len(nulls)} drawn (they copy the real "
                    f"guides' layouts, so they are skipped for the same reason); the {null_model} null needs at "
                    f"least {need}"
                )
    leaves = fold_leaves(negatives, drawn_from, options, min_data_in_leaf)
    no_split = no_split_note(train, ok, negatives, leaves, configured=min_data_in_leaf)
    if no_split and calls:
        calls, null_reason = False, no_split
    if not calls:
        reason = f"no classifier hit calls: {null_reason}" + (f". {reason}" if reason else "")
    return ReadoutCapacity("classifier", len(guides), int(scored.sum()), unscored, calls, reason, units)


def map_depth_note(table: pd.DataFrame, q_threshold: float, max_null_size: int, map_null: str) -> tuple[str, dict]:
    """How deep the mAP readout's calls can go on ``table``'s layout (:func:`map_p_floors`): the
    smallest p-value of its best-placed guide under each null, and among how many guides BH calls
    such a lone guide at q < ``q_threshold`` (q / p). A note (else '') where the null that
    ``map_null`` takes cannot call a lone hit among the screen's guides (for ``auto``, the
    random-rank null's figure: the choice is made in the job, from the control wells); the figures
    as a dict for the door's counts."""
    floors = map_p_floors(table, max_null_size)
    if floors.empty:
        return "", {}
    rr, wp = float(floors["random_rank"].min()), float(floors["within_plate"].min())
    reach = {name: max(0, math.ceil(q_threshold / p) - 1) for name, p in (("random_rank", rr), ("within_plate", wp))}
    depth = {"p_min_random_rank": rr, "p_min_within_plate": wp, "lone_reach_random_rank": reach["random_rank"],
             "lone_reach_within_plate": reach["within_plate"]}  # fmt: skip
    n = len(guides_of(table))
    taken = "within_plate" if map_null == "within_plate" else "random_rank"
    if reach[taken] >= n:
        return "", depth
    cannot = "cannot call, even with the within-plate null," if map_null == "within_plate" else "cannot call"
    note = (
        f"the mAP readout {cannot} a lone hit among this screen's {n:,} guides (BH needs p < {q_threshold:g} / "
        f"{n:,}): its smallest p-value here is {rr:.2g} under the random-rank null (one random ranking putting all "
        f"of the best-placed guide's {int(floors.loc[floors['random_rank'].idxmin(), 'n_wells']) - 1} positives "
        f"first; a lone hit among up to {reach['random_rank']:,} guides) and {wp:.2g} under the within-plate null "
        f"(a lone hit among up to {reach['within_plate']:,}; classify.map_max_null_size caps both), which is valid "
        "only where a guide's wells on different plates are independent: repeated positions with a position effect, "
        "or image sets of one plate, break it"
    )
    if map_null == "auto":
        note += "; classify.map_null: auto takes it where no guide repeats a position or the control wells show no "
        note += "position effect across plates, decided in the mAP job"
    return note, depth


def map_capacity(
    table: pd.DataFrame, q_threshold: float = 0.05, max_null_size: int = 10_000_000, map_null: str = "random_rank"
) -> ReadoutCapacity:
    """The mAP readout on ``table``: a guide is scored with 2 wells or more (the positives of
    each other) and at least one of them on a plate that holds control wells (its negatives).
    Without a ``Metadata_Well`` column every row is a well, as the readout takes it. Its depth
    (:func:`map_depth_note`) joins the counts, and the reason where the configured null cannot
    call a lone hit among the screen's guides."""
    units = well_units(table)
    is_control = control_mask(table)
    plate = table[PLATE].astype(str).to_numpy()
    control_plates = set(plate[is_control])
    guides = guides_of(table)
    unscored, wells = [], []
    for pair, target in zip(guides, guide_samples(table, guides)):
        wells.append(len(np.unique(units[target.rows])))
        if wells[-1] < 2 or control_plates.isdisjoint(plate[target.rows]):
            unscored.append(pair)
    reason = ""
    if unscored:
        reason = (
            f"{len(unscored)} of {len(guides)} guides have fewer than 2 wells, or none on a plate with control wells, "
            f"and get no mAP: {_names(unscored)}"
        )
    bare = sorted(set(plate) - control_plates)
    if bare:
        more = f" and {len(bare) - 5} more" if len(bare) > 5 else ""
        reason += (". " if reason else "") + (
            f"{len(bare)} plate(s) hold no control well: {', '.join(bare[:5])}{more}; the mAP readout centres each "
            "plate on its own control wells, so their wells get no average precision of their own (a guide is scored "
            "by its wells on plates with control wells); the classifier takes its controls per batch and scores them"
        )
    note, depth = map_depth_note(table, q_threshold, max_null_size, map_null)
    if note:
        reason += (". " if reason else "") + note
    return ReadoutCapacity(
        "map",
        len(guides),
        len(guides) - len(unscored),
        unscored,
        calls=len(unscored) < len(guides),
        reason=reason,
        units=({"wells_per_guide": _spread(np.asarray(wells))} if WELL in table.columns else {}) | depth,
    )
