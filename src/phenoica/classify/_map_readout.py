"""The mAP readout: copairs mean average precision of each guide's wells against the controls."""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from phenoica.classify._features import feature_matrix
from phenoica.classify._map_null import permuted_null_counts, settled_null_counts
from phenoica.classify._map_permutation import WellPool, well_pool
from phenoica.classify._null import control_mask, well_units
from phenoica.contract import CONTROL, GENE, GUIDE, PERT_TYPE, PLATE, WELL, ScreenError, validate_profile_metadata
from phenoica.profiles import aggregate_wells
from phenoica.utils import bh_qvalues, derive_seed

MAP_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    GENE,
    GUIDE,
    "n_wells",
    "mean_average_precision",
    "map_p_value",
    "map_q_value",
    "map_null_draws",
)


def well_profiles(table: pd.DataFrame) -> pd.DataFrame:
    """Mean profile per (plate, well) (``profiles.wells.aggregate_wells``); a table that is already
    one row per well, or has no ``Metadata_Well`` column, is returned as it is."""
    if WELL not in table.columns or not table.duplicated([PLATE, WELL]).any():
        return table
    return aggregate_wells(table)


#: Where a plate's control values are clipped before they are averaged, in robust SDs (1.4826 x
#: the median absolute deviation) from their median: the Hampel identifier's usual threshold.
CLIP_MADN = 3.0


def control_centre(controls: np.ndarray) -> np.ndarray:
    """The centre of one plate's control rows, feature by feature: their mean after each value is
    clipped to the controls' median +- :data:`CLIP_MADN` robust SDs (a mean winsorized at
    median/MAD limits, Huber's metric winsorization).

    Why this centre. The mAP readout ranks each well of a guide against the control wells of its
    own plate, so the centre must not move with one control well: one well with a feature at
    1,000 SDs moves a mean of 16 controls by about 60 SDs in that feature, which then dominates
    every cosine similarity on the plate. Here that well is clipped to 3 robust SDs and moves the
    centre by at most 3/16 of one; the median and MAD that set the limits break down only when
    half the controls do. Where most controls hold the same value (a feature of a pycytominer
    export whose MAD is 0, with a few extreme wells), the limits close and the centre is the
    median. Where the controls are well behaved, few values are clipped (of 16 Gaussian controls,
    none in 78% of the features, and the centre then moves by less than its own noise elsewhere)
    and the centre is their mean, which matters: with the mean, the plate's control wells
    average exactly to the origin, so the negatives are balanced around every well of the plate;
    any other centre (the median itself) leaves them, on average, nearer the plate's own wells
    than its wells on other plates are, and costs the readout power (docs/hit-calling.md).
    """
    centre = np.median(controls, axis=0)
    spread = CLIP_MADN * stats.median_abs_deviation(controls, axis=0, scale="normal")
    return np.clip(controls, centre - spread, centre + spread).mean(axis=0)


def centered_on_plate_controls(
    X: np.ndarray, plate: np.ndarray, is_control: np.ndarray, log: logging.Logger | None = None
) -> np.ndarray:
    """Each row minus its plate's :func:`control_centre`, as float64 (rows of a plate without
    controls are left as they are: they have no negatives and get no average precision). A plate
    with fewer than 3 control wells has no centre that resists an outlier well (the median and
    the mean of 2 are one): it is logged."""
    log = log or logging.getLogger(__name__)
    out = X.astype(np.float64, copy=True)
    few = []
    for p in np.unique(plate):
        rows = plate == p
        ctrl = rows & is_control
        if ctrl.any():
            out[rows] -= control_centre(out[ctrl])
            if ctrl.sum() < 3:
                few.append(f"{p} ({int(ctrl.sum())})")
    if few:
        log.warning(
            "mAP readout: plate(s) with fewer than 3 control wells, whose centre one outlier well moves: %s",
            few[:10],
        )
    return out


#: copairs' columns of the mAP inputs: a well's group (its guide; each control well alone) and role.
GROUP, IS_CONTROL = "Metadata_MapGroup", "Metadata_MapIsControl"


def copairs_wells(wells: pd.DataFrame, is_control: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """copairs' metadata of the well table (``GROUP``, ``PLATE``, ``IS_CONTROL``; every control
    well its own group, so controls never pair up as positives) and the guides it scores: one
    row per guide (gene, guide, ``GROUP``, ``n_wells``), sorted by gene and guide."""
    gene = wells[GENE].astype(str).to_numpy()
    guide = wells[GUIDE].astype(str).to_numpy()
    key = np.char.add(np.char.add(gene, "\x1f"), guide)
    meta = pd.DataFrame(
        {
            GROUP: np.where(is_control, np.char.add("\x1econtrol", np.arange(len(wells)).astype(str)), key),
            PLATE: wells[PLATE].astype(str).to_numpy(),
            IS_CONTROL: is_control,
        }
    )
    guides = pd.DataFrame({GENE: gene[~is_control], GUIDE: guide[~is_control], GROUP: key[~is_control]})
    n_wells = guides.groupby(GROUP).size().rename("n_wells")
    guides = guides.drop_duplicates(GROUP).merge(n_wells.reset_index(), on=GROUP)
    return meta, guides.sort_values([GENE, GUIDE]).reset_index(drop=True)


def guide_pools(X: np.ndarray, meta: pd.DataFrame) -> Callable[[str], WellPool]:
    """The within-plate permutation pool of each guide of copairs' metadata ``meta`` (wells of
    centred profiles ``X``): on every plate of the guide, its wells and the plate's control
    wells (:func:`phenoica.classify._map_permutation.well_pool`), keyed by its ``GROUP``."""
    unit = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), np.finfo(np.float64).tiny)
    plate = meta[PLATE].to_numpy()
    is_control = meta[IS_CONTROL].to_numpy(dtype=bool)
    controls = {p: np.flatnonzero(is_control & (plate == p)) for p in np.unique(plate)}
    rows_of = pd.Series(np.arange(len(meta))).groupby(meta[GROUP].to_numpy()).apply(np.asarray)

    def pool(group: str) -> WellPool:
        rows = rows_of[group]
        plates = sorted(set(plate[rows]))
        own = [rows[plate[rows] == p] for p in plates]
        return well_pool(unit, [np.r_[g, controls[p]] for g, p in zip(own, plates, strict=True)], own)

    return pool


def guide_map(
    table: pd.DataFrame,
    variant: str,
    model: str,
    seed: int,
    null_size: int = 10000,
    max_null_size: int = 10_000_000,
    q_threshold: float = 0.05,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """Phenotypic activity per guide: copairs mean average precision of its wells vs controls.

    As the field's recipes do it (jump-profiling-recipe, Kalinin et al. 2025): on well-level
    profiles (sites averaged), each well of a guide ranks the guide's other wells (positives)
    among the control wells of its own plate (negatives) by cosine similarity; the guide's
    mAP averages its wells' average precision. Cosine similarity depends on the origin, and the
    recipes measure it on profiles normalized against the plate's controls: here each plate's
    wells are taken from its control wells' centre (:func:`control_centre`: their mean, robust to
    outlier control wells), so every variant is compared from the same place, whatever centre
    its transform leaves (a whitening fitted on all rows leaves the controls off the origin, and
    mAP then loses its power). Controls are never positives of each other.

    p-values come from copairs' null of random rank lists, drawn until the guide's call at
    ``q_threshold`` is settled (:func:`phenoica.classify.settled_null_counts`):
    ``null_size`` draws per configuration for every guide, more (up to ``max_null_size``) for
    the guides whose Benjamini-Hochberg call the Monte Carlo error still leaves open, seeded by
    ``derive_seed(seed, "map", model, variant)``; :func:`guide_map_within_plate` (``classify.map_null:
    within_plate``; not the default: docs/hit-calling.md) gives the guides
    whose random-rank p-value is at or below ``q_threshold`` the within-plate permutation
    null instead, drawn until settled the same way (:func:`phenoica.classify.permuted_null_counts`),
    so that a strong guide reaches below the random-rank null's atom;
    ``map_null_draws`` is how many draws a guide's p-value rests on,
    and the guides still open at ``max_null_size`` are logged. ``map_q_value`` is the
    Benjamini-Hochberg correction over the guides of this (model, variant). A guide with a
    single well has no positive pair: NaN (logged). Returns ``MAP_COLUMNS``.
    """
    return _guide_map(table, variant, model, seed, (null_size, max_null_size, q_threshold), log, within_plate=False)


def guide_map_within_plate(
    table: pd.DataFrame,
    variant: str,
    model: str,
    seed: int,
    null_size: int = 10000,
    max_null_size: int = 10_000_000,
    q_threshold: float = 0.05,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """:func:`guide_map` with the within-plate permutation null for the guides whose random-rank
    p-value is at or below ``q_threshold`` (:func:`phenoica.classify.permuted_null_counts`; valid
    where a guide's wells on different plates are independent: docs/hit-calling.md)."""
    return _guide_map(table, variant, model, seed, (null_size, max_null_size, q_threshold), log, within_plate=True)


def _guide_map(
    table: pd.DataFrame,
    variant: str,
    model: str,
    seed: int,
    null: tuple[int, int, float],
    log: logging.Logger | None,
    within_plate: bool,
) -> pd.DataFrame:
    """:func:`guide_map`'s work; ``null`` its (null_size, max_null_size, q_threshold)."""
    null_size, max_null_size, q_threshold = null
    from copairs.map import average_precision

    log = log or logging.getLogger(__name__)
    source = f"mAP table ({model or 'model'}/{variant})"
    validate_profile_metadata(table, source=source)
    wells = well_profiles(table).reset_index(drop=True)
    X, _ = feature_matrix(wells, source, log)
    is_control = control_mask(wells)
    if not is_control.any():
        raise ScreenError(f"{source}: no control rows ({PERT_TYPE} == {CONTROL!r}) to compare guides against")
    X = centered_on_plate_controls(X, wells[PLATE].astype(str).to_numpy(), is_control, log)
    meta, guides = copairs_wells(wells, is_control)
    if guides.empty:
        return pd.DataFrame({c: [] for c in MAP_COLUMNS})
    ap = average_precision(meta, X, [GROUP], [], [PLATE], [IS_CONTROL], distance="cosine", progress_bar=False)
    ap = ap[~ap[IS_CONTROL].astype(bool) & np.isfinite(ap["average_precision"].to_numpy(dtype=float))]
    counts = pd.DataFrame({GROUP: [], "mean_average_precision": [], "p_value": [], "draws": [], "open_call": []})
    if len(ap):
        map_seed = derive_seed(seed, "map", model, variant)
        if within_plate:
            pools = guide_pools(X, meta)
            counts = permuted_null_counts(
                ap, [GROUP], lambda key: pools(key[0]), null_size, max_null_size, q_threshold, map_seed, log
            )
        else:
            counts = settled_null_counts(ap, [GROUP], null_size, max_null_size, q_threshold, map_seed, log)
    out = guides.merge(counts, on=GROUP, how="left")
    for rows, why in (
        (out["open_call"].fillna(False).astype(bool), f"lie within the Monte Carlo error of {max_null_size} null "
         f"draws of the BH cut (q {q_threshold}); their calls can change with the seed (more draws: "
         "classify.map_max_null_size, or sweep.map_max_null_size for a component sweep's points)"),
        (out["mean_average_precision"].isna(), "have no positive pair (a single well, or no control well on their "
         "plates) and get no mAP"),
    ):  # fmt: skip
        if rows.any():
            log.warning("%s: %d guide(s) %s: %s", source, int(rows.sum()), why, out.loc[rows, GUIDE].tolist()[:10])
    out = out.rename(columns={"p_value": "map_p_value", "draws": "map_null_draws"})
    out["map_null_draws"] = out["map_null_draws"].fillna(0).astype(np.int64)
    out["map_p_value"] = out["map_p_value"].astype(np.float64)
    out["map_q_value"] = bh_qvalues(out["map_p_value"].to_numpy())
    out["mean_average_precision"] = out["mean_average_precision"].astype(np.float64)
    out["n_wells"] = out["n_wells"].astype(np.int64)
    out["model"], out["variant"] = model, variant
    return out[list(MAP_COLUMNS)].reset_index(drop=True)


#: copairs' column of a reference contrast's number (:func:`reference_map`).
CONTRAST = "Metadata_MapContrast"


def _well_means(X: np.ndarray, units: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The mean of ``X`` over each well (``units``) of ``rows``, wells in order."""
    codes, inverse = np.unique(units[rows], return_inverse=True)
    sums = np.zeros((len(codes), X.shape[1]))
    np.add.at(sums, inverse, X[rows])
    return sums / np.bincount(inverse, minlength=len(codes))[:, None]


def reference_map(
    table: pd.DataFrame, contrasts: Sequence[Any], X: np.ndarray, log: logging.Logger | None = None
) -> np.ndarray:
    """The mAP of each contrast (``rows`` against ``reference_rows``, positional rows of ``table``
    whose features are ``X``; :class:`phenoica.hits._reference.Contrast`): copairs' mean average
    precision of the wells of ``rows`` (positives of each other) against the wells of
    ``reference_rows`` as negatives, on well means (sites averaged). As :func:`guide_map`, each
    plate is first taken from its control wells' centre (:func:`control_centre`); then each
    contrast's wells from the mean of its reference's wells, so that cosine similarity reads the
    construct's difference from its reference, not the shift both share from the controls (a wild
    type's own phenotype). NaN for a contrast with a single well on a side."""
    from copairs.map import average_precision

    out = np.full(len(contrasts), np.nan)
    if not len(contrasts):
        return out
    centred = centered_on_plate_controls(X, table[PLATE].astype(str).to_numpy(), control_mask(table), log)
    units = well_units(table)
    blocks, metas = [], []
    for i, contrast in enumerate(contrasts):
        side = _well_means(centred, units, np.asarray(contrast.rows))
        reference = _well_means(centred, units, np.asarray(contrast.reference_rows))
        if len(side) < 2 or len(reference) < 1:
            continue
        centre = reference.mean(axis=0)
        blocks += [side - centre, reference - centre]
        metas.append(
            pd.DataFrame(
                {
                    GROUP: [f"{i}"] * len(side) + [f"{i}\x1ereference{k}" for k in range(len(reference))],
                    CONTRAST: i,
                    IS_CONTROL: [False] * len(side) + [True] * len(reference),
                }
            )
        )
    if not metas:
        return out
    meta = pd.concat(metas, ignore_index=True)
    ap = average_precision(
        meta, np.vstack(blocks), [GROUP], [], [CONTRAST], [IS_CONTROL], distance="cosine", progress_bar=False
    )
    ap = ap[~ap[IS_CONTROL].astype(bool)]
    means = ap.groupby(CONTRAST)["average_precision"].mean()
    out[means.index.to_numpy(dtype=int)] = means.to_numpy(dtype=float)
    return out
