"""Where on the plate: each well's place, and the position effect measured on the control wells.

An arrayed screen puts a construct at the same well on every replicate plate, and its controls at
fixed positions. A plate's edges, rows and columns carry effects of their own (evaporation,
illumination, dispensing order), which a guide's readout then mixes with its phenotype. This module
measures, on the control wells alone (whose identity is known, so any structure left among them is
the plate's), whether positions matter on a screen:

- :func:`plate_wells`: one row per (plate, well) with its batch, construct, role, grid row and
  column, edge flag and cell count (the first of :data:`CELL_COUNT_COLUMNS` the table holds): what
  the report's plate maps draw;
- :func:`position_summary`: for each grouping of the control wells (``position``: the same
  construct at its different wells across the plates; ``edge``: edge against interior; ``row``;
  ``column``), the share of the control wells' variation it explains (``r2``), after each (plate,
  control construct) block's mean is taken out, so that neither plate offsets nor the constructs'
  own differences count. Its null is the same share with the grouping's labels permuted within
  those blocks (``r2_null``: the permutations' mean; ``p_value``: ``(1 + #{null >= r2}) / (B + 1)``).
  ``r2 - r2_null`` is the effect: the share that position explains beyond what any labelling of as
  many groups would;
- :func:`null_layout_table`: which layout the classifier's null takes on each model's table, and
  why (:func:`phenoica.classify.null_layout_choice`).

Wells are named like ``A01`` (letters for the row, a number for the column); a screen whose wells
are named otherwise gets its plate wells without rows and columns, and rows, columns and edges are
not measured (said in ``note``).
"""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from phenoica.classify import control_mask, grouping_share, null_layout_choice, well_profiles
from phenoica.contract import BATCH, CONTROL, GENE, GUIDE, PERT_TYPE, PLATE, WELL, feature_columns
from phenoica.hits._options import PositionOptions
from phenoica.utils import rng_for, write_parquet

#: Columns of a per-well export that hold the well's cell count, in the order they are looked for
#: (CellProfiler's image count of the ``Cells`` objects as pycytominer carries it, then
#: pycytominer's own object count).
CELL_COUNT_COLUMNS: tuple[str, ...] = ("Metadata_Count_Cells", "Metadata_Object_Count")
#: Columns of :func:`plate_wells`.
WELL_COLUMNS: tuple[str, ...] = (
    BATCH,
    PLATE,
    WELL,
    GENE,
    GUIDE,
    PERT_TYPE,
    "row",
    "column",
    "edge",
    "cell_count",
    "cell_count_column",
)
#: The groupings :func:`position_summary` measures, in its rows' order.
MEASURES: tuple[str, ...] = ("position", "edge", "row", "column")
#: Columns of :func:`position_summary`.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "model",
    "measure",
    "n_wells",
    "n_groups",
    "r2",
    "r2_null",
    "p_value",
    "note",
)
#: Columns of :func:`null_layout_table`.
NULL_LAYOUT_COLUMNS: tuple[str, ...] = ("model", "setting", "layout", "reason", "position_capacity")
#: Permutations of each grouping's null.
N_PERMUTATIONS = 999
_WELL_NAME = re.compile(r"^\s*([A-Za-z]+)0*(\d+)\s*$")


def well_grid_position(well: str) -> tuple[int, int] | None:
    """(row, column) from 0 of a well named like ``A01`` or ``AB12`` (rows ``A``..``Z``, then
    ``AA``..), None for any other name."""
    found = _WELL_NAME.match(str(well))
    if not found:
        return None
    row = 0
    for letter in found.group(1).upper():
        row = row * 26 + (ord(letter) - ord("A") + 1)
    return row - 1, int(found.group(2)) - 1


def plate_grid(rows: int, columns: int) -> tuple[int, int]:
    """The smallest standard plate (96, 384 or 1536 wells) that holds a grid of ``rows`` x
    ``columns`` wells; a larger grid is its own size."""
    for shape in ((8, 12), (16, 24), (32, 48)):
        if rows <= shape[0] and columns <= shape[1]:
            return shape
    return rows, columns


def plate_wells(profiles: pd.DataFrame) -> pd.DataFrame:
    """One row per (plate, well) of a profile table (image rows of a well are one): its batch,
    construct and role, grid ``row`` and ``column`` (from 0; -1 when the name is not ``A01``-like),
    ``edge`` (on the outer ring of the plate's grid, :func:`plate_grid` of the screen's wells), and
    ``cell_count`` (mean over the well's rows of the first of :data:`CELL_COUNT_COLUMNS` the table
    holds, named in ``cell_count_column``; NaN and empty without one). Sorted by plate and well."""
    if WELL not in profiles.columns:
        return pd.DataFrame({c: [] for c in WELL_COLUMNS})
    counts = [c for c in CELL_COUNT_COLUMNS if c in profiles.columns]
    keys = [BATCH, PLATE, WELL, GENE, GUIDE, PERT_TYPE]
    table = profiles[keys + counts[:1]].copy()
    wells = table.groupby([PLATE, WELL], sort=True, observed=True).first().reset_index()
    if counts:
        mean = table.groupby([PLATE, WELL], sort=True, observed=True)[counts[0]].mean()
        wells["cell_count"] = pd.to_numeric(mean, errors="coerce").to_numpy(dtype=float)
    else:
        wells["cell_count"] = math.nan
    wells["cell_count_column"] = counts[0] if counts else ""
    grid = [well_grid_position(w) for w in wells[WELL].astype(str)]
    wells["row"] = [g[0] if g else -1 for g in grid]
    wells["column"] = [g[1] if g else -1 for g in grid]
    named = wells["row"] >= 0
    n_rows, n_columns = plate_grid(
        int(wells.loc[named, "row"].max()) + 1 if named.any() else 1,
        int(wells.loc[named, "column"].max()) + 1 if named.any() else 1,
    )
    wells["edge"] = named & (wells["row"].isin([0, n_rows - 1]) | wells["column"].isin([0, n_columns - 1]))
    return wells[list(WELL_COLUMNS)].reset_index(drop=True)


def _measure_labels(wells: pd.DataFrame, measure: str) -> tuple[np.ndarray | None, str]:
    """The labels of ``measure`` over the control wells, or None with why it cannot be measured."""
    if measure == "position":
        return wells[WELL].astype(str).to_numpy(), ""
    if (wells["row"] < 0).any():
        return None, f"not measured: well names not like A01 ({wells.loc[wells['row'] < 0, WELL].iloc[0]!r})"
    if measure == "edge":
        return wells["edge"].to_numpy(dtype=int), ""
    return wells[measure].to_numpy(dtype=int), ""


def position_summary(
    profiles: pd.DataFrame, model: str, seed: int, n_permutations: int = N_PERMUTATIONS
) -> pd.DataFrame:
    """One row per :data:`MEASURES` grouping of the control wells of ``profiles`` (module doc):
    ``n_wells`` (control wells measured), ``n_groups``, ``r2``, ``r2_null``, ``p_value`` and a
    ``note`` saying why a grouping is not measured (no ``Metadata_Well``, fewer than 2 groups
    within any block, grid names not like ``A01``). Seeds: ``rng_for(seed, "positions", model,
    measure)``."""
    rows = []
    if WELL not in profiles.columns or not control_mask(profiles).any():
        why = (
            "not measured: no Metadata_Well column"
            if WELL not in profiles.columns
            else "not measured: no control wells"
        )
        return pd.DataFrame([_row(model, m, 0, 0, why) for m in MEASURES], columns=list(SUMMARY_COLUMNS))
    controls = well_profiles(profiles[control_mask(profiles)]).reset_index(drop=True)
    wells = plate_wells(controls)
    controls = controls.merge(wells[[PLATE, WELL, "row", "column", "edge"]], on=[PLATE, WELL], how="left")
    X = controls[feature_columns(profiles)].to_numpy(dtype=np.float64)
    blocks = (
        controls[PLATE].astype(str) + "\x1f" + controls[GENE].astype(str) + "\x1f" + controls[GUIDE].astype(str)
    ).to_numpy()
    for measure in MEASURES:
        labels, why = _measure_labels(controls, measure)
        if labels is None:
            rows.append(_row(model, measure, len(controls), 0, why))
            continue
        n_groups = int(pd.Series(labels).nunique())
        varies = pd.DataFrame({"b": blocks, "l": labels}).groupby("b")["l"].nunique().gt(1).any()
        if n_groups < 2 or not varies:
            where = {
                "edge": "no control well at an edge" if not controls["edge"].any() else "every control well at an edge"
            }
            why = where.get(measure, f"every (plate, control construct) holds one {measure}")
            if measure == "position" and n_groups >= 2:
                why = "each control construct holds its wells at one position per plate only"
            rows.append(_row(model, measure, len(controls), n_groups, f"not measured: {why}"))
            continue
        if measure == "position" and controls.groupby(WELL)[PLATE].nunique().max() < 2:
            rows.append(_row(model, measure, len(controls), n_groups, "not measured: every position is on one plate "
                             "(a position's effect cannot be told from its well's own noise)"))  # fmt: skip
            continue
        rng = rng_for(seed, "positions", model, measure)
        r2, r2_null, p = grouping_share(X, labels, blocks, rng, n_permutations)
        rows.append({**_row(model, measure, len(controls), n_groups, ""), "r2": r2, "r2_null": r2_null, "p_value": p})
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def _row(model: str, measure: str, n_wells: int, n_groups: int, note: str) -> dict[str, object]:
    return {"model": model, "measure": measure, "n_wells": n_wells, "n_groups": n_groups, "r2": math.nan,
            "r2_null": math.nan, "p_value": math.nan, "note": note}  # fmt: skip


def null_layout_table(profiles: Mapping[str, pd.DataFrame], setting: str, n_null_guides: int | str) -> pd.DataFrame:
    """Per model: the null's layout on its table under ``classify.null_layout = setting`` and why
    (:func:`phenoica.classify.null_layout_choice`)."""
    rows = []
    for model, table in profiles.items():
        if (table[PERT_TYPE].astype(str) == CONTROL).any():
            choice = null_layout_choice(table, setting, n_null_guides)
            rows.append({"model": model, "setting": setting, "layout": choice.layout, "reason": choice.reason,
                         "position_capacity": choice.position_capacity})  # fmt: skip
    return pd.DataFrame(rows, columns=list(NULL_LAYOUT_COLUMNS))


def plate_position_files(
    profiles: Mapping[str, Path | str],
    outputs: Mapping[str, Path | str],
    options: PositionOptions,
    log: logging.Logger | None = None,
) -> None:
    """The plate's positions of the screen (``profiles``: model -> its profile table), written
    atomically to ``outputs``: ``wells`` (:func:`plate_wells` of the first model's table; every
    model holds the same wells), ``positions`` (:func:`position_summary` per model) and
    ``null_layout`` (:func:`null_layout_table`)."""
    log = log or logging.getLogger(__name__)
    tables = {model: pd.read_parquet(path) for model, path in profiles.items()}
    first = next(iter(tables.values()))
    write_parquet(plate_wells(first), outputs["wells"])
    summary = pd.concat([position_summary(t, m, options.seed) for m, t in tables.items()], ignore_index=True)
    write_parquet(summary, outputs["positions"])
    layouts = null_layout_table(tables, options.null_layout, options.n_null_guides)
    write_parquet(layouts, outputs["null_layout"])
    for row in summary.itertuples(index=False):
        log.info("%s, %s: r2 %.3f (permutations %.3f), p %.3g %s", row.model, row.measure, row.r2, row.r2_null,
                 row.p_value, row.note)  # fmt: skip
    for row in layouts.itertuples(index=False):
        log.info("%s: the classifier's null is %s (%s)", row.model, row.layout, row.reason)
