"""The report's gene-map section: tables and figures of the gene maps, known-relationship recall
and batch metrics.

:data:`GENE_MAPS` (:func:`build_gene_maps`) turns the gathered biomap tables into CSVs, figures
and page sections, like every other section of the report. :func:`heatmap_figure` draws one
(model, variant)'s clustered gene-gene cosine heatmap; :func:`batch_biology_figure` puts batch
removal on one axis and biology kept on the other, one point per (model, variant).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.cluster import hierarchy  # noqa: E402
from scipy.spatial.distance import squareform  # noqa: E402

from phenoica.biomap import (
    TRUTH_SOURCE,  # noqa: E402
    similarity_matrix,  # noqa: E402
)
from phenoica.report import _render as render  # noqa: E402
from phenoica.report._inputs import ReportInputs  # noqa: E402
from phenoica.report._render import save_figure  # noqa: E402
from phenoica.report._sections import ReportContext, Section, SectionOutput, figure_blocks, table_section  # noqa: E402
from phenoica.transforms import VARIANTS, WHITENED_VARIANTS  # noqa: E402

MARKERS = ("o", "s", "^", "D", "v", "P")


def heatmap_figure(
    X: np.ndarray,
    names: Sequence[str],
    q_values: Sequence[float],
    path: Path | str,
    *,
    max_genes: int = 60,
    title: str = "",
) -> Path:
    """Clustered heatmap (average linkage on 1 - cosine) of at most ``max_genes`` of the map's
    genes, the lowest q-values first; gene names shown up to 60 genes."""
    q = np.asarray(q_values, dtype=float)
    order = np.argsort(np.where(np.isfinite(q), q, np.inf), kind="stable")[:max_genes]
    X = np.asarray(X)[order]
    labels = [str(names[i]) for i in order]
    fig, ax = plt.subplots(figsize=(7, 6))
    if len(labels) < 2:
        ax.text(0.5, 0.5, f"{len(labels)} gene(s) in the map: no similarity to show", ha="center", va="center")
        ax.set_axis_off()
    else:
        S = similarity_matrix(X)
        D = np.clip(1.0 - S, 0.0, 2.0)
        np.fill_diagonal(D, 0.0)
        leaves = hierarchy.leaves_list(hierarchy.linkage(squareform((D + D.T) / 2, checks=False), "average"))
        im = ax.imshow(S[np.ix_(leaves, leaves)], cmap="RdBu_r", vmin=-1, vmax=1)
        fig.colorbar(im, ax=ax, label="cosine similarity of gene profiles (unitless)")
        if len(labels) <= 60:
            shown = [labels[i] for i in leaves]
            ax.set_xticks(range(len(shown)), shown, rotation=90, fontsize=6)
            ax.set_yticks(range(len(shown)), shown, fontsize=6)
        ax.set_xlabel("gene (clustered)")
        ax.set_ylabel("gene (clustered)")
    ax.set_title(title or "Gene-gene cosine similarity", fontsize=9)
    fig.tight_layout()
    out = save_figure(fig, path)
    plt.close(fig)
    return out


def _ordered(df: pd.DataFrame) -> pd.DataFrame:
    rank = {v: i for i, v in enumerate(VARIANTS)}
    key = df["variant"].map(lambda v: rank.get(v, len(rank)))
    return df.assign(_k=key).sort_values(["model", "_k", "variant"]).drop(columns="_k").reset_index(drop=True)


def biomap_summary(
    recall: pd.DataFrame,
    batch: pd.DataFrame,
    consistency: pd.DataFrame,
    gene_calls: pd.DataFrame | None = None,
    map_df: pd.DataFrame | None = None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """One row per (model, variant): batch removal (controls and all profiles), the biology kept
    (recall per source at the first threshold pair, the simulated complexes' recall where the
    demo has them, guide consistency, activity) side by side."""
    keys = sorted(
        set(map(tuple, batch[["model", "variant"]].to_numpy()))
        | set(map(tuple, recall[["model", "variant"]].to_numpy()))
    )
    rows = []
    first = recall[["lower", "upper"]].drop_duplicates().head(1)
    for model, variant in keys:
        row: dict[str, Any] = {"model": model, "variant": variant}
        for subset in ("controls", "all"):
            sel = batch[(batch["model"] == model) & (batch["variant"] == variant) & (batch["subset"] == subset)]
            for col in ("asw_batch", "ilisi_norm", "batch_accuracy", "batch_chance", "batch_removal"):
                row[f"{col}_{subset}"] = float(sel[col].iloc[0]) if len(sel) else math.nan
        rec = recall[(recall["model"] == model) & (recall["variant"] == variant)]
        if len(first):
            rec = rec[(rec["lower"] == first["lower"].iloc[0]) & (rec["upper"] == first["upper"].iloc[0])]
        con = consistency[(consistency["model"] == model) & (consistency["variant"] == variant)]
        mapped = bool(len(rec) or len(con))  # a model the readouts do not score has no gene map
        row["n_map_genes"] = int(rec["n_map_genes"].iloc[0]) if len(rec) else (0 if mapped else None)
        annotated = []
        for r in rec.itertuples():
            row[f"recall_{r.source}"] = r.recall
            if r.source != TRUTH_SOURCE and r.status == "ok":
                annotated.append(r.recall)
        row["recall_annotations"] = float(np.mean(annotated)) if annotated else math.nan
        row["recall_expected"] = float(rec["recall_expected"].iloc[0]) if len(rec) else math.nan
        scored = con[np.isfinite(con["p_value"].to_numpy(float))]
        row["genes_consistent"] = int((scored["p_value"] < alpha).sum()) if mapped else None
        row["genes_consistency_scored"] = len(scored) if mapped else None
        row["consistency_median"] = float(scored["consistency"].median()) if len(scored) else math.nan
        if gene_calls is not None and len(gene_calls):
            g = gene_calls[(gene_calls["model"] == model) & (gene_calls["variant"] == variant)]
            row["genes_active"] = int(g["hit"].fillna(False).astype(bool).sum()) if "hit" in g and len(g) else None
            row["genes_active_fraction"] = float(row["genes_active"] / len(g)) if len(g) else math.nan
        if map_df is not None and len(map_df):
            m = map_df[(map_df["model"] == model) & (map_df["variant"] == variant)]
            row["mean_map"] = float(m["mean_average_precision"].mean()) if len(m) else math.nan
        rows.append(row)
    if not rows:
        return pd.DataFrame()
    out = pd.DataFrame(rows)
    counts = [c for c in ("n_map_genes", "genes_consistent", "genes_consistency_scored", "genes_active") if c in out]
    return _ordered(out.astype({c: "Int64" for c in counts}))


def batch_biology_figure(summary: pd.DataFrame, path: Path | str) -> Path:
    """Batch removal (controls) against biology kept, one point per (model, variant): left, the
    recall of known relationships (the simulated complexes where the demo has them, else the
    mean over annotation sources); right, the share of genes called active."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    truth_col = f"recall_{TRUTH_SOURCE}"
    y_recall = truth_col if truth_col in summary and summary[truth_col].notna().any() else "recall_annotations"
    panels = [
        (axes[0], y_recall, "recall of known pairs at the first threshold (fraction)"),
        (axes[1], "genes_active_fraction", "genes called active (fraction of perturbed genes)"),
    ]
    models = sorted(summary["model"].unique()) if len(summary) else []
    for ax, col, label in panels:
        if col not in summary or not summary[col].notna().any():
            ax.text(0.5, 0.5, f"no {col}", ha="center", va="center", transform=ax.transAxes)
        for i, model in enumerate(models):
            sel = summary[summary["model"] == model]
            if col not in sel:
                continue
            ax.scatter(sel["batch_removal_controls"], sel[col], marker=MARKERS[i % len(MARKERS)], s=50, label=model)
            for r in sel.itertuples():
                ax.annotate(
                    r.variant,
                    (getattr(r, "batch_removal_controls"), getattr(r, col)),
                    fontsize=8,
                    xytext=(4, 3),
                    textcoords="offset points",
                )
        if col == y_recall and "recall_expected" in summary and summary["recall_expected"].notna().any():
            ax.axhline(
                float(summary["recall_expected"].dropna().iloc[0]),
                color="grey",
                ls="--",
                lw=1,
                label="recall expected by chance",
            )
        ax.set_xlabel("batch removal on controls (0 = batches separated, 1 = mixed)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    if models:
        axes[0].legend(fontsize=8)
    fig.suptitle("Batch removed vs biology kept, per variant")
    fig.tight_layout()
    out = save_figure(fig, path)
    plt.close(fig)
    return out


def heatmap_caption(model: str, variant: str) -> str:
    """The caption of a (model, variant)'s gene-map heatmap (plain text: the page escapes it)."""
    return f"Clustered gene-gene cosine map, {model} / {variant}"


def build_gene_maps(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """The gene-map section from the gathered biomap tables (:data:`BIOMAP_TABLES`) and the
    heatmaps: the CSVs, the batch-vs-biology figure, each (model, variant)'s heatmap copied
    under the figures folder, and the page sections."""
    if inputs.biomap_tables is None:
        return SectionOutput()
    read = inputs.biomap_tables
    recall, coverage, consistency, neighbors = (read[k] for k in ("recall", "coverage", "consistency", "neighbors"))
    batch = read["batch_metrics"]
    summary = biomap_summary(recall, batch, consistency, inputs.genes, inputs.table("maps"))
    out = SectionOutput(
        tables={
            "biomap_summary": summary,
            "biomap_recall": _ordered(recall),
            "biomap_coverage": _ordered(coverage),
            "biomap_batch_metrics": _ordered(batch),
            "biomap_consistency": consistency,
            "biomap_neighbors": neighbors,
        }
    )
    captions: dict[str, str] = {}
    if len(summary):
        name = "biomap_batch_vs_biology"
        out.figures[name] = batch_biology_figure(summary, ctx.figure_path(name))
        captions[name] = "Batch removed (controls) vs biology kept, one point per model and variant"
    for (model, variant), src in sorted(inputs.biomap_heatmaps.items()):
        name = f"biomap_heatmap_{model}_{variant}"
        dest = ctx.figure_path(name)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        out.figures[name] = dest
        captions[name] = heatmap_caption(model, variant)
    out.page = _gene_map_pages(summary, recall, coverage, consistency, neighbors, ctx)
    out.page[0].blocks += figure_blocks(out.figures, captions, ctx)
    return out


def _gene_map_pages(
    summary: pd.DataFrame,
    recall: pd.DataFrame,
    coverage: pd.DataFrame,
    consistency: pd.DataFrame,
    neighbors: pd.DataFrame,
    ctx: ReportContext,
) -> list[render.PageSection]:
    """The gene-map page sections: batch vs biology, recall, coverage, consistency, neighbours
    and the recall sources skipped."""

    def rel(name: str) -> str:
        return ctx.rel(ctx.table_path(name))

    skipped = recall[recall["status"] != "ok"].drop_duplicates(["model", "variant", "source"])
    top = neighbors[neighbors["rank"] == 1] if len(neighbors) else neighbors
    rotations = ", ".join(v for v in WHITENED_VARIANTS if v != "tvn")
    sections = [
        (
            "Gene maps: batch removed vs biology kept",
            (
                "Per model and variant. Batch metrics on well profiles (controls; and all profiles): ASW-batch "
                "(1 - |silhouette by batch| within genes, scIB), normalized kNN iLISI, out-of-fold balanced accuracy "
                "of a batch classifier (chance = 1 / batches); batch_removal = mean(ASW-batch, iLISI_norm, 1 - excess "
                "accuracy). Biology: recall of known pairs (EFAAR protocol, first threshold pair) per source, genes "
                "whose guides agree (consistency p < 0.05), genes called active, mean mAP. Reported as measured. "
                f"Cosine maps, ASW-batch and kNN iLISI are invariant to rotations: {rotations} (one "
                "whitened space, rotated) can differ here only through the genes the classifier calls active."
            ),
            summary,
        ),
        (
            "Known-relationship recall",
            (
                "The null is every pairwise cosine between the map's genes; a pair is recalled when its cosine lies "
                "beyond the lower or upper quantile of that null. recall_expected = recall with no structure. "
                "Intervals: Wilson over pairs (pairs share genes: optimistic). "
                f"All rows, with skips and their counts: `{rel('biomap_recall')}`; coverage: `{rel('biomap_coverage')}`."
            ),
            _ordered(recall[recall["status"] == "ok"]),
        ),
        (
            "Annotation coverage",
            "How many of the screen's and of the map's genes each source knows.",
            _ordered(coverage),
        ),
        (
            "Guide consistency",
            (
                "Mean pairwise cosine between a gene's guide profiles against random guide sets drawn from different "
                f"genes; p = (1 + #null >= x) / (1 + n_null); no FDR (as EFAAR). All genes: `{rel('biomap_consistency')}`."
            ),
            consistency.sort_values(["model", "variant", "p_value"]).head(60),
        ),
        (
            "Nearest neighbours",
            f"Nearest gene of each map gene; all top-k lists: `{rel('biomap_neighbors')}`.",
            top.head(60),
        ),
    ]
    if len(skipped):
        columns = ["model", "variant", "source", "n_map_genes", "n_entities", "reason"]
        note = "Sources that share too few genes with the map, with the counts."
        sections.append(("Skipped recall sources", note, skipped[columns]))
    return [table_section(heading, note, df) for heading, note, df in sections]


GENE_MAPS = Section("gene_maps", ("biomap_tables", "biomap_heatmaps", "genes", "maps"), build_gene_maps)
