"""The report's component-sweep section: how the answers move with the number of whitened
components (the sweep itself is :func:`phenoica.sweep.sweep_model`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from phenoica.report import _render as render
from phenoica.report._inputs import ReportInputs
from phenoica.report._sections import ReportContext, Section, SectionOutput, table_section

#: The sweep figure's rows: the column drawn and its axis label.
SWEEP_PANELS: tuple[tuple[str, str], ...] = (
    ("guide_hits", "guide hits, q < 0.1"),
    ("replicate_retrieval", "replicate retrieval across batches"),
)


def sweep_figure(sweep: pd.DataFrame, path: Path, base_retrieval: dict[str, float] | None = None) -> Path:
    """Guide hits (q < 0.1) and replicate retrieval against the component count, one column of
    panels per model, a line per variant, the chosen count circled (a panel whose column holds
    no value is left out); ``base_retrieval`` (model -> the profiles' own retrieval) is drawn as a
    dashed line, the level a whitening has to reach."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted(sweep["model"].unique())
    panels = [p for p in SWEEP_PANELS if p[0] in sweep.columns and np.isfinite(sweep[p[0]].astype(float)).any()]
    fig, axes = plt.subplots(len(panels), len(models), figsize=(4.2 * len(models), 3.2 * len(panels)), squeeze=False)
    for (column, label), row in zip(panels, axes):
        for ax, model in zip(row, models):
            sub = sweep[sweep["model"] == model]
            for variant, line in sub.groupby("variant", sort=False):
                line = line.sort_values("n_components")
                ax.plot(line["n_components"], line[column], marker="o", label=variant)
                mark = line[line["chosen"]]
                ax.scatter(mark["n_components"], mark[column], s=160, facecolors="none", edgecolors="black")
            if column == "replicate_retrieval" and base_retrieval and model in base_retrieval:
                ax.axhline(base_retrieval[model], color="grey", linestyle="--", label="base")
            ax.set_xscale("log", base=2)
            counts = sorted(int(c) for c in sub["n_components"].unique())
            ax.set_xticks(counts, [str(c) for c in counts])  # the grid's counts as numbers, not powers
            ax.minorticks_off()
            ax.set_xlabel("whitened components (circled: chosen)")
            ax.set_ylabel(label)
            ax.set_title(model)
            ax.legend(fontsize=8)
    fig.tight_layout()
    render.save_figure(fig, path)
    plt.close(fig)
    return path


#: What the section says when a row has no batch accuracy (see :func:`batch_notes`).
BATCH_NOTE = (
    "A row without a batch accuracy says why in `batch_note`: a screen of one batch (`batch_chance` 1) has "
    "no batch to tell apart, so no batch classifier is fitted; with two or more batches, a batch with fewer "
    "than two control wells leaves too few for its folds."
)


def batch_notes(sweep: pd.DataFrame) -> pd.Series:
    """Per sweep row, why it has no batch accuracy ("" where it has one): one batch (chance 1),
    or too few control wells per batch for two folds."""
    missing = ~np.isfinite(sweep["batch_accuracy"].astype(float))
    one_batch = sweep["batch_chance"].astype(float) == 1.0
    reasons = np.where(one_batch, "one batch: nothing to tell apart", "too few control wells per batch")
    return pd.Series(np.where(missing, reasons, ""), index=sweep.index)


def build_sweep(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """The sweep's table (the chosen row marked) and figure, from every model's sweep table."""
    sweep = inputs.table("sweep")
    if sweep is None:
        return SectionOutput()
    retrieval = inputs.table("retrieval")
    base = (
        retrieval[retrieval["variant"] == "base"].groupby("model")["retrieval"].mean().to_dict()
        if retrieval is not None
        else None
    )
    path = sweep_figure(sweep, ctx.figure_path("component_sweep"), base)
    caption = (
        "Guide hits at q < 0.1 and replicate retrieval across batches against the number of whitened "
        "components, per variant (dashed: `base`'s retrieval); circled: the chosen count."
    )
    note = (
        "Each whitened variant refitted at every count of the grid and the screen scored again: guide and "
        "gene hits at q < 0.1 (the same classifiers, folds and null as the run, without Table 4's "
        "concentration models), the share of guides active by copairs mAP (q < 0.1), and the accuracy of a "
        "batch classifier on control wells (chance in `batch_chance`), and replicate retrieval across batches "
        "(`replicate_retrieval`, the field's batch-correction measure: section 'Replicate retrieval across "
        "batches'). `chosen` marks the count the "
        "configured rule (transforms.n_components) kept: the run's own answers. `n_guides` is the guides a "
        "point scores: every guide, or on a screen of more than `sweep.max_genes` perturbed genes "
        "those of a seeded sample of that many genes, the same at every point; the hits and the mAP share "
        "are then counted among them, the batch accuracy and the retrieval on every well. Under a "
        "`sweep.protocol` other than the run's `classify.protocol` the points but the chosen one are "
        "classified under it. `seconds` is the cost of the point."
    )
    shown = sweep.assign(chosen=np.where(sweep["chosen"], "<- chosen", ""))
    notes = batch_notes(sweep)
    if notes.str.len().any():  # a column only where a batch accuracy is missing, with its reason
        shown = shown.assign(batch_note=notes)
        note += " " + BATCH_NOTE
    page = table_section(
        "How the answers move with the component count", note, shown, render.Figure(ctx.rel(path), caption)
    )
    return SectionOutput(figures={"component_sweep": path}, page=[page])


SWEEP = Section("sweep", ("sweep", "retrieval"), build_sweep)
