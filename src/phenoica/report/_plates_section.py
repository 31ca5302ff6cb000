"""The report's "Plates" and "Reference" sections: where on the plate, and against which reference.

"Plates" (inputs ``plate_wells``, ``positions``, ``null_layout``; :mod:`phenoica.hits._positions`):
one plate map per batch under ``report/plates/{batch}.png`` (wells laid out as on the plate: each
well's role, its construct's held-out AUROC, or its mAP q-value where the mAP scored more constructs,
and its cell count where the export has one; a batch's replicate plates are drawn as one, each
well's values averaged over them), the position summary measured on the control wells with a
sentence per model saying whether positions matter on this screen, and which layout the
classifier's null took and why.

"Reference" (input ``reference``; :mod:`phenoica.hits._reference`): each construct against its
declared reference, by both readouts, when ``screen.reference`` declares one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from phenoica.contract import BATCH, CONTROL, GENE, GUIDE, PERT_TYPE, PLATE
from phenoica.hits import plate_grid
from phenoica.report import _render as render
from phenoica.report._inputs import ReportInputs
from phenoica.report._sections import ReportContext, Section, SectionOutput, table_section

#: The folder of the plate maps, below the report's folder.
PLATES_DIR = "plates"
#: The roles a plate map colours, in legend order.
ROLES: tuple[str, ...] = ("empty", "control", "perturbation", "reference")
#: A position grouping whose permutation p-value is below this is said to matter.
POSITION_ALPHA = 0.05


def construct_values(inputs: ReportInputs) -> tuple[pd.DataFrame, str]:
    """Per (gene, guide): the value a plate map shows and its label: the classifier's held-out
    AUROC, or the mAP readout's q-value where the mAP scored more constructs (as the hits are
    ranked by the readout that scored the most); of the first model and its ``base`` variant (the
    first variant without one). Empty without a hit table."""
    hits = inputs.table("hits")
    if hits is None:
        return pd.DataFrame(columns=[GENE, GUIDE, "value"]), ""
    model = sorted(hits["model"].astype(str).unique())[0]
    variants = sorted(hits.loc[hits["model"] == model, "variant"].astype(str).unique())
    variant = "base" if "base" in variants else variants[0]
    sub = hits[(hits["model"] == model) & (hits["variant"] == variant)]
    if sub["auroc"].notna().sum() >= sub["map_q_value"].notna().sum():
        column, label = "auroc", f"held-out AUROC ({model}/{variant})"
    else:
        column, label = "map_q_value", f"mAP q-value ({model}/{variant})"
    return sub[[GENE, GUIDE]].assign(value=sub[column].to_numpy(dtype=float)), label


def well_roles(wells: pd.DataFrame, references: set[str]) -> np.ndarray:
    """Each well's role: ``control``, ``reference`` (a construct some other is compared with),
    ``perturbation``."""
    control = wells[PERT_TYPE].astype(str).to_numpy() == CONTROL
    reference = wells[GUIDE].astype(str).isin(references).to_numpy()
    return np.where(control, "control", np.where(reference, "reference", "perturbation"))


def plate_map_figure(wells: pd.DataFrame, value_label: str, title: str, path: Path) -> Path:
    """One batch's plate map (module doc): three panels, role, the construct's value and the cell
    count, each well at its row and column (wells averaged over the batch's plates)."""
    named = wells[wells["row"] >= 0]
    per_well = named.groupby(["row", "column"], sort=True).agg(
        role=("role", lambda r: r.iloc[0] if r.nunique() == 1 else "perturbation"),
        value=("value", "mean"),
        cells=("cell_count", "mean"),
    )
    n_rows, n_columns = plate_grid(int(named["row"].max()) + 1, int(named["column"].max()) + 1)
    grids = {name: np.full((n_rows, n_columns), np.nan) for name in ("role", "value", "cells")}
    for (r, c), row in per_well.iterrows():
        grids["role"][r, c] = ROLES.index(row["role"])
        grids["value"][r, c], grids["cells"][r, c] = row["value"], row["cells"]
    grids["role"][np.isnan(grids["role"])] = 0
    has_cells = np.isfinite(grids["cells"]).any()
    panels = [("role", "role"), ("value", value_label)] + ([("cells", "cell count")] if has_cells else [])
    fig = Figure(figsize=(5.2 * len(panels), 4.0))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (name, label) in zip(axes, panels):
        if name == "role":
            cmap = ListedColormap(["#ffffff", "#7f7f7f", "#4c72b0", "#dd8452"])
            ax.imshow(grids["role"], cmap=cmap, vmin=-0.5, vmax=len(ROLES) - 0.5)
            for i, role in enumerate(ROLES):
                ax.scatter([], [], color=cmap(i), marker="s", label=role, edgecolors="k", linewidths=0.3)
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=len(ROLES), fontsize=7, frameon=False)
        else:
            shown = np.ma.masked_invalid(grids[name])
            image = ax.imshow(shown, cmap="viridis_r" if "q-value" in label else "viridis")
            fig.colorbar(image, ax=ax, shrink=0.7)
        ax.set_title(label, fontsize=9)
        ax.set_xticks(range(0, n_columns, max(1, n_columns // 12)))
        ax.set_xticklabels([str(c + 1) for c in range(0, n_columns, max(1, n_columns // 12))], fontsize=6)
        ax.set_yticks(range(n_rows))
        ax.set_yticklabels([_row_name(r) for r in range(n_rows)], fontsize=6)
    fig.suptitle(title, fontsize=10)
    return render.save_figure(fig, path)


def _row_name(row: int) -> str:
    """``A``..``Z``, then ``AA``.. for row ``row`` (from 0)."""
    name = ""
    row += 1
    while row:
        row, rest = divmod(row - 1, 26)
        name = chr(ord("A") + rest) + name
    return name


def position_sentences(positions: pd.DataFrame, wells: pd.DataFrame) -> list[str]:
    """Per model, whether positions matter on this screen, in numbers (module doc), and where the
    control wells sit."""
    lines = []
    control = wells[wells[PERT_TYPE].astype(str) == CONTROL]
    where = (
        f"{int(control['edge'].sum())} of {len(control)} control wells (over all plates) sit at the plate's edge"
        if len(control)
        else "no control wells"
    )
    for model, sub in positions.groupby("model", sort=True):
        measured = sub[sub["p_value"].notna()]
        found = measured[measured["p_value"] < POSITION_ALPHA]
        parts = [
            f"{r.measure} explains {r.r2:.3f} of the control wells' variation against {r.r2_null:.3f} with its "
            f"labels permuted (p = {r.p_value:.2g})"
            for r in found.itertuples(index=False)
        ]
        if parts:
            verdict = f"{model}: positions matter on this screen: " + "; ".join(parts) + "."
        elif len(measured):
            verdict = (
                f"{model}: no position effect found among the control wells (every measured grouping's "
                f"p >= {POSITION_ALPHA}: "
                + ", ".join(f"{r.measure} {r.p_value:.2g}" for r in measured.itertuples())
                + ")."
            )
        else:
            verdict = f"{model}: the position effect could not be measured on the control wells."
        unmeasured = sub[sub["p_value"].isna()]
        if len(unmeasured):
            verdict += " " + "; ".join(f"{r.measure}: {r.note}" for r in unmeasured.itertuples(index=False)) + "."
        lines.append(verdict)
    return lines + [f"{where.capitalize()}."]


def build_plates(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """Plate maps, the position summary and the null's layout (module doc)."""
    folder = ctx.out_dir / PLATES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    wells = inputs.table("plate_wells")
    if wells is None:
        return SectionOutput()
    values, label = construct_values(inputs)
    reference = inputs.table("reference")
    references = set(reference["reference"].astype(str)) if reference is not None else set()
    wells = wells.merge(values, on=[GENE, GUIDE], how="left")
    wells["role"] = well_roles(wells, references)
    figures: dict[str, Path] = {}
    blocks: list[render.Block] = []
    if (wells["row"] >= 0).any():
        for batch, sub in wells.groupby(BATCH, sort=True):
            name = _file_name(str(batch))
            plates = sub[PLATE].nunique()
            title = f"batch {batch}: {plates} plate(s) drawn as one"
            figures[f"plate_{name}"] = plate_map_figure(sub, label or "no readout", title, folder / f"{name}.png")
            blocks.append(render.Figure(ctx.rel(figures[f"plate_{name}"]), f"Plate map of batch {batch}."))
    lines = []
    positions = inputs.table("positions")
    if positions is not None:
        lines += position_sentences(positions, wells)
    layouts = inputs.table("null_layout")
    if layouts is not None:
        lines += [f"{r.model}: the classifier's null is {r.layout} ({r.reason})." for r in layouts.itertuples()]
    note = " ".join(lines) + f" Plate maps: `{ctx.rel(folder)}/`."
    tables = {"positions": positions} if positions is not None else {}
    shown = positions.drop(columns=["note"]) if positions is not None else pd.DataFrame()
    return SectionOutput(tables, figures, [table_section("Plates", note, shown, *blocks)])


def _file_name(text: str) -> str:
    """``text`` with every character but letters, digits, ``-``, ``_`` and ``.`` replaced by ``_``."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text) or "batch"


def build_reference(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """Each declared construct against its reference (module doc)."""
    table = inputs.table("reference")
    if table is None:
        return SectionOutput()
    called = table.groupby(["model", "variant"]).agg(
        pairs=(GUIDE, "size"),
        auroc_hits=("auroc_hit", "sum"),
        map_hits=("map_hit", "sum"),
        n_null=("n_null", "first"),
        floor=("auroc_p_floor", "first"),
        map_floor=("map_p_floor", "first"),
        scored=("auroc", lambda a: int(np.isfinite(a.to_numpy(dtype=float)).sum())),
        folds=("n_folds_ok", "sum"),
        flat=("n_folds_no_split", "sum"),
    )
    lines = [
        f"{m}/{v}: {int(r.pairs)} construct(s) against their reference; {int(r.auroc_hits)} called by the classifier "
        f"({int(r.scored)} scored), {int(r.map_hits)} by the mAP, at q < {ctx.options.q_threshold:g}, against "
        f"{int(r.n_null)} null contrast(s) of control wells at other positions (p no lower than "
        f"{r.floor:.2g} for the classifier, {r.map_floor:.2g} for the mAP: 1/(n_null + 1), or a Pareto tail "
        "fitted beyond the null contrasts)."
        + (
            f" The classifier made no split in {int(r.flat)} of its {int(r.folds + r.flat)} folds (too few wells a "
            "side for LightGBM's leaves); those folds answer nothing and are left out of its AUROC."
            if r.flat
            else ""
        )
        for (m, v), r in called.iterrows()
    ]
    shown = table.sort_values(["model", "variant", "map_q_value", GENE, GUIDE]).head(40)
    note = " ".join(lines) + f" Every pair: `{ctx.rel(ctx.table_path('reference'))}`."
    return SectionOutput({"reference": table}, page=[table_section("Reference", note, shown)])


PLATES = Section("plates", ("plate_wells", "positions", "null_layout", "hits", "reference"), build_plates)
REFERENCE = Section("reference", ("reference",), build_reference)
