"""The screen against the analysis it will get, checked by the door
(:func:`phenoica.workflow._validate.contract_problems`): perturbations to score, the folds of
``splits.scheme``, what each readout can score and whether the classifier's null can be built
(:mod:`phenoica.classify._capacity`), and how heavily the null's pseudo-guides share control wells."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from phenoica.contract import BATCH, CONTROL, GUIDE, PERT_TYPE, PERTURBATION, PLATE, SITE, WELL, ScreenError

#: The classify keys the door's readout counts read (besides n_null_guides, splits and seed).
READOUT_KEYS: tuple[str, ...] = (
    "min_train_samples",
    "min_test_samples",
    "protocol",
    "fast_fold_groups",
    "map_readout",
)
#: Above this many pseudo-guides per control well of a batch (classify.n_null_guides x a guide's
#: wells there / the batch's control wells), the null's pseudo-guides share their wells so
#: heavily that their AUROCs are far from independent draws: a warning (stated in advance, not
#: tuned; the demo's default, 100 pseudo-guides over 32 control wells with 2 wells a guide, is 6).
NULL_REUSE_WARNING = 10


def scoring_problems(
    table: pd.DataFrame, config: Mapping[str, Any], source: str
) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """(problems, notes, readouts) of a screen table against the analysis it will get:
    perturbations to score, the folds of ``splits.scheme`` (leave-one-batch-out: two batches or
    more, controls in each, every guide in two batches or more; built here as the ``splits`` job
    builds them), what each readout can score and whether the classifier's null can be built
    (:func:`phenoica.classify.readout_capacity`, on the rows the jobs will classify:
    wells under ``profiles.level: well``), and a warning when ``classify.n_null_guides``
    pseudo-guides must share control wells heavily (:data:`NULL_REUSE_WARNING`)."""
    from phenoica.classify import SplitOptions, make_folds, readout_capacity

    problems: list[str] = []
    if not (table[PERT_TYPE] == PERTURBATION).any():
        problems.append(
            f"no row has {PERT_TYPE} {PERTURBATION!r}: the screen holds only controls, so there is no "
            "guide or gene to score; expected perturbation rows beside the controls"
        )
        return problems, [], []
    per_well = WELL in table.columns and config["profiles"]["level"] == "well"
    units = (table.drop_duplicates([PLATE, WELL]) if per_well else table).reset_index(drop=True)
    units_known = per_well or SITE in table.columns or config["screen"]["source"] == "embeddings"
    scheme = config["splits"]["scheme"]
    try:  # on the rows the splits job will split: images, or wells under profiles.level well
        folds = make_folds(units, SplitOptions.from_config(config))
    except ScreenError as exc:
        problems.append(f"under splits.scheme {scheme}: {str(exc).removeprefix('profiles: ')}")
        return problems, [], []
    capacities, found, notes = readout_capacity(units, config, units_known, folds)
    problems += found
    notes += _null_size_notes(table, config["classify"]["n_null_guides"])
    wells, refused = without_wells(table, config)
    notes, problems = wells + notes, refused + problems
    if scheme == "in_distribution":  # leave-one-batch-out holds a batch's plates out together
        notes += shared_plate_maps(table)
    return problems, notes, [c.as_dict() for c in capacities]


#: Two plates of a batch hold one plate map when at least this share of the wells they share hold
#: the same construct (one plate imaged twice loses a well or two to a failed image).
SAME_MAP = 0.95


def shared_plate_maps(table: pd.DataFrame) -> list[str]:
    """A note per batch whose plates hold one plate map (the same construct in the same well,
    :data:`SAME_MAP`): replicate plates of one map, or one plate imaged more than once (image
    sets). Under in-distribution splits a held-out well then has wells at its position in
    training on the other plates; for image sets those are the same physical wells (the same
    cells), and the held-out scores are inflated."""
    if WELL not in table.columns:
        return []
    wells = table.drop_duplicates([PLATE, WELL])
    notes = []
    for batch, rows in wells.groupby(BATCH, sort=True):
        maps = {p: r.set_index(WELL)[GUIDE] for p, r in rows.groupby(PLATE, sort=True)}
        groups: list[list[str]] = []
        shared: dict[str, tuple[int, int]] = {}
        for plate, layout in maps.items():
            for group in groups:
                first = maps[group[0]]
                common = layout.index.intersection(first.index)
                same = int((layout[common] == first[common]).sum())
                if len(common) and same >= SAME_MAP * len(common):
                    group.append(plate)
                    shared[plate] = (same, len(common))
                    break
            else:
                groups.append([plate])
        for group in (g for g in groups if len(g) > 1):
            same = min(shared[p][0] for p in group[1:])
            total = min(shared[p][1] for p in group[1:])
            names = ", ".join(group[:4]) + (" ..." if len(group) > 4 else "")
            notes.append(
                f"batch {batch!r}: {len(group)} plates hold one plate map ({names}; at least {same} of {total} shared "
                "wells hold the same construct): replicate plates of one map, or one plate imaged more than once (image "
                "sets). Under splits.scheme in_distribution a held-out well has wells at its position in training "
                "on the other plate(s); if they are image sets of the same physical wells, those are its twins (the "
                "same cells) and held-out scores are inflated: keep one image set (screen.rows)"
            )
    return notes


def _null_size_notes(table: pd.DataFrame, setting: int | str) -> list[str]:
    """The null's size where ``classify.n_null_guides`` is ``auto`` and resolves above its floor on
    this screen (a screen of up to 1,000 guides keeps the floor, said by the schema), and
    :func:`_null_reuse`'s notes."""
    from phenoica.classify import AUTO_NULL_MAX, AUTO_NULL_MIN, guides_of, null_count

    n_guides = len(guides_of(table)) if setting == "auto" else 0
    n_null = null_count(setting, n_guides)
    notes = []
    if setting == "auto" and n_null > AUTO_NULL_MIN:
        notes.append(
            f"classify.n_null_guides auto: {n_null} pseudo-guides for {n_guides} guides (a tenth of "
            f"the guides, at least {AUTO_NULL_MIN} and at most {AUTO_NULL_MAX}; docs/hit-calling.md)"
        )
    return notes + _null_reuse(table, n_null)


def _null_reuse(table: pd.DataFrame, n_null: int) -> list[str]:
    """A note per batch where each control well would sit in more than
    :data:`NULL_REUSE_WARNING` pseudo-guides on average."""
    if n_null <= 0 or WELL not in table.columns:
        return []
    wells = table.drop_duplicates([PLATE, WELL])
    notes = []
    for batch, rows in wells.groupby(BATCH, sort=True):
        controls = int((rows[PERT_TYPE] == CONTROL).sum())
        pert = rows[rows[PERT_TYPE] == PERTURBATION]
        if not controls or pert.empty:
            continue
        per_guide = float(pert.groupby(GUIDE).size().mean())
        reuse = n_null * per_guide / controls
        if reuse > NULL_REUSE_WARNING:
            notes.append(
                f"classify.n_null_guides {n_null}: batch {batch!r} has {controls} control wells and a guide holds "
                f"{per_guide:.1f} wells there, so each control well sits in about {reuse:.0f} pseudo-guides: the null's "
                "AUROCs share wells and are far from independent (fewer pseudo-guides, or more control wells)"
            )
    return notes


def without_wells(table: pd.DataFrame, config: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(notes, problems) of a screen table without a ``Metadata_Well`` column (an export whose
    ``screen.columns`` maps no well): every row is taken as one well, and what needs wells cannot
    apply (the check of one perturbation per well and of a well given twice, the report's plate
    maps and position summary, the position-aware null): a note saying so; a problem when
    ``classify.null_layout`` asks for the position-aware null, which needs well positions."""
    if WELL in table.columns:
        return [], []
    note = (
        f"no {WELL} column (screen.columns maps no well): each row is analysed as one well, and what needs "
        "wells cannot apply: the check that a well holds one perturbation and is given once, the report's plate maps "
        "and position summary, and the position-aware null (classify.null_layout auto takes the plain one); map "
        "screen.columns.well to the file's well column if it has one"
    )
    if config["classify"]["null_layout"] == "position":
        return [], [f"classify.null_layout is position, which lays pseudo-guides out on well positions, but {note}"]
    return [note], []
