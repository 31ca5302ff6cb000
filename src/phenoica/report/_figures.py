"""The report's figures: guide scores per variant, volcano, null calibration (QQ), paired gene
AUROCs and identifiability, each a PNG written atomically (``phenoica.report.save_figure``).

Every figure is always written; a panel without data says so, so the set of files is fixed.
Inputs are the tables ``phenoica.report._summaries`` checks.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from scipy import stats

from phenoica.contract import GENE, GUIDE
from phenoica.report import _render as render
from phenoica.report._checks import check_genes, check_guides, check_truth, ordered_variants, variant_label
from phenoica.utils import finite_values

FIGURE_DPI = 120
AUROC_LABEL = "Held-out AUROC, guide vs controls (unitless; 0.5 = chance)"
SPARSITY_LABEL = "Sparsity of feature use (unitless; 0 = all features equal)"
CONCENTRATION_LABEL = "Concentration: AUROC(top k) / AUROC(rest) - 1 (unitless)"


def _spread(n: int, width: float) -> np.ndarray:
    """Deterministic horizontal offsets in [-width/2, width/2] for n points (golden-ratio sequence)."""
    return ((np.arange(n) * 0.6180339887) % 1.0 - 0.5) * width


def _variant_panel(
    ax: Axes,
    real: Mapping[str, np.ndarray],
    null: Mapping[str, np.ndarray] | None,
    ylabel: str,
    chance: float | None,
    effect: Mapping[str, np.ndarray] | None = None,
) -> None:
    """Box plot + points per variant of real guides; null pseudo-guides as grey crosses beside.

    With ``effect`` (per variant, one flag per value of ``real``: does the guide's gene have a
    simulated effect), the points of guides of genes with an effect are blue and the others orange.
    """
    variants = list(real)
    positions = np.arange(len(variants), dtype=float)
    data = [real[v] for v in variants]
    boxed = [i for i, d in enumerate(data) if d.size]
    if boxed:
        ax.boxplot(
            [data[i] for i in boxed],
            positions=positions[boxed],
            widths=0.45,
            showfliers=False,
            medianprops={"color": "black"},
            boxprops={"color": "0.3"},
        )
    for pos, v, values in zip(positions, variants, data):
        colors = np.where(effect[v], "tab:blue", "tab:orange") if effect is not None else "tab:blue"
        ax.scatter(pos + _spread(values.size, 0.35), values, s=14, c=colors, alpha=0.75, zorder=3)
    if effect is None:
        handles = [Line2D([], [], marker="o", ls="", color="tab:blue", label="real guides")]
    else:
        handles = [
            Line2D([], [], marker="o", ls="", color="tab:blue", label="guides, gene with an effect (truth)"),
            Line2D([], [], marker="o", ls="", color="tab:orange", label="guides, gene without effect (truth)"),
        ]
    if null is not None and any(null[v].size for v in variants if v in null):
        for pos, v in zip(positions, variants):
            values = null.get(v, np.empty(0))
            ax.scatter(pos + 0.34 + _spread(values.size, 0.12), values, s=18, marker="x", color="0.45", zorder=3)
        handles.append(Line2D([], [], marker="x", ls="", color="0.45", label="null pseudo-guides (controls)"))
    if chance is not None:
        ax.axhline(chance, ls="--", lw=1, color="tab:red")
        handles.append(Line2D([], [], ls="--", color="tab:red", label="chance (0.5)"))
    ax.set_xticks(positions, [variant_label(v) for v in variants])
    ax.set_xlim(-0.6, len(variants) - 0.4 + (0.3 if null is not None else 0.0))
    ax.set_xlabel("Embedding variant")
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(handles=handles, fontsize=8, loc="best")


def _no_data(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=10, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _models(df: pd.DataFrame) -> list[str]:
    models = sorted(df["model"].unique()) if len(df) else []
    return models or [""]


def _per_variant_figure(
    guides: pd.DataFrame,
    metric: str,
    ylabel: str,
    title: str,
    path: Path,
    dpi: int,
    show_null: bool,
    chance: float | None,
    truth: pd.DataFrame | None = None,
) -> Path:
    """One panel per model: the guide-level ``metric`` per variant (real guides coloured by
    whether their gene has a simulated effect when ``truth`` is given)."""
    effect_of = truth.groupby(GENE)["has_effect"].any() if truth is not None else None
    models = _models(guides)
    n_var = max((len(ordered_variants(guides.loc[guides["model"] == m, "variant"])) for m in models), default=1)
    fig = Figure(figsize=(max(5.0, 1.5 * n_var + 1.5) * len(models), 4.8))
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    for ax, model in zip(axes, models):
        sub = guides[guides["model"] == model]
        variants = ordered_variants(sub["variant"])
        scored = sub[~sub["is_null_guide"] & np.isfinite(sub[metric].to_numpy(dtype=float))]
        real = {v: scored.loc[scored["variant"] == v, metric].to_numpy(dtype=float) for v in variants}
        null = {v: finite_values(sub.loc[(sub["variant"] == v) & sub["is_null_guide"], metric]) for v in variants}
        effect = None
        if effect_of is not None:
            genes_of = {v: scored.loc[scored["variant"] == v, GENE] for v in variants}
            effect = {v: genes_of[v].map(effect_of).eq(True).to_numpy() for v in variants}
        if not any(a.size for a in real.values()):
            _no_data(ax, f"no guide has a {metric} score")
        else:
            _variant_panel(ax, real, null if show_null else None, ylabel, chance, effect)
        ax.set_title(f"{title}\nmodel: {model}" if model else title, fontsize=10)
    return render.save_figure(fig, path, dpi)


def _paired_figure(
    genes: pd.DataFrame,
    truth: pd.DataFrame | None,
    path: Path,
    dpi: int,
    variant: str = "pca_ica",
    reference: str = "pca",
) -> Path:
    """Gene-level AUROC, ``variant`` (y) vs ``reference`` (x), one panel per model, diagonal y = x."""
    models = _models(genes)
    fig = Figure(figsize=(5.2 * len(models), 5.0))
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    gene_effect = truth.groupby(GENE)["has_effect"].any() if truth is not None else None
    for ax, model in zip(axes, models):
        sub = genes[genes["model"] == model]
        a = sub[sub["variant"] == variant].set_index(GENE)["auroc"]
        b = sub[sub["variant"] == reference].set_index(GENE)["auroc"]
        joined = pd.concat({"y": a, "x": b}, axis=1, join="inner").dropna()
        title = f"Gene AUROC: {variant_label(variant)} vs {variant_label(reference)}"
        ax.set_title(f"{title}\nmodel: {model}" if model else title, fontsize=10)
        if joined.empty:
            _no_data(ax, f"no gene scored in both {variant} and {reference}")
            continue
        lo = float(min(joined.min().min(), 0.5)) - 0.02
        hi = float(max(joined.max().max(), 0.5)) + 0.02
        ax.plot([lo, hi], [lo, hi], ls="--", lw=1, color="0.4", label="y = x (no change)")
        if gene_effect is not None:
            effect = joined.index.map(gene_effect).to_series(index=joined.index).fillna(False).astype(bool)
            for flag, color, label in (
                (True, "tab:orange", "gene with true effect"),
                (False, "tab:blue", "gene without effect"),
            ):
                pts = joined[effect == flag]
                if len(pts):
                    ax.scatter(pts["x"], pts["y"], s=28, color=color, label=label, zorder=3)
        else:
            ax.scatter(joined["x"], joined["y"], s=28, color="tab:blue", label="gene", zorder=3)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        ax.set_xlabel(f"{variant_label(reference)}: mean held-out AUROC (unitless)")
        ax.set_ylabel(f"{variant_label(variant)}: mean held-out AUROC (unitless)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    return render.save_figure(fig, path, dpi)


def identifiability_figure(
    table1: pd.DataFrame | None, structural: pd.DataFrame | None, path: Path, dpi: int = FIGURE_DPI
) -> Path:
    """Left: Table 1 errors (mean over model pairs) per variant and map; right: MCC and InfoM
    of factor recovery per variant (mean over models). A missing side says so."""
    fig = Figure(figsize=(11.0, 4.6))
    left, right = fig.subplots(1, 2)
    maps = [("perm", "permutation"), ("rigid", "rigid"), ("linear", "linear"), ("ica", "ICA")]
    if table1 is not None and len(table1):
        variants = ordered_variants(table1["variant"])
        means = table1.groupby("variant")[[m for m, _ in maps]].mean()
        width = 0.8 / len(maps)
        for i, (col, label) in enumerate(maps):
            left.bar(
                np.arange(len(variants)) + (i - 1.5) * width, [means.loc[v, col] for v in variants], width, label=label
            )
        left.set_xticks(np.arange(len(variants)), [variant_label(v) for v in variants])
        left.set_ylabel("held-out mean l2 error / diameter of B")
        left.set_title("Alignment between models (Table 1)")
        left.legend(title="map", fontsize=8)
    else:
        left.text(0.5, 0.5, "one model only: no alignment", ha="center", va="center", transform=left.transAxes)
        left.set_axis_off()
    if structural is not None and len(structural):
        variants = ordered_variants(structural["variant"])
        means = structural.groupby("variant")[["mcc", "infom", "infoe"]].mean()
        width = 0.8 / 3
        for i, (col, label) in enumerate([("mcc", "MCC"), ("infom", "InfoM"), ("infoe", "InfoE")]):
            right.bar(
                np.arange(len(variants)) + (i - 1) * width, [means.loc[v, col] for v in variants], width, label=label
            )
        right.set_xticks(np.arange(len(variants)), [variant_label(v) for v in variants])
        right.set_ylim(0, 1)
        right.set_ylabel("score (1 = factors recovered one-to-one)")
        right.set_title("Recovery of the simulated factors")
        right.legend(fontsize=8)
    else:
        right.text(0.5, 0.5, "no ground-truth factors", ha="center", va="center", transform=right.transAxes)
        right.set_axis_off()
    return render.save_figure(fig, path, dpi)


VARIANT_COLORS: dict[str, str] = {"base": "tab:gray", "pca": "tab:blue", "pca_ica": "tab:red", "pca_rand": "tab:green"}


def _volcano_figure(guides: pd.DataFrame, truth: pd.DataFrame | None, path: Path, dpi: int, q_threshold: float) -> Path:
    """Per model (rows) and variant (columns): AUROC above the null's median vs -log10 q."""
    models = _models(guides)
    variants = ordered_variants(guides["variant"])
    fig = Figure(figsize=(3.6 * max(1, len(variants)), 3.4 * len(models)), layout="constrained")
    axes = fig.subplots(len(models), max(1, len(variants)), squeeze=False)
    effect = truth.set_index([GENE, GUIDE])["has_effect"].astype(bool) if truth is not None else None
    for r, model in enumerate(models):
        for c, variant in enumerate(variants):
            ax = axes[r][c]
            ax.set_title(f"{variant_label(variant)}" + (f" - {model}" if model else ""), fontsize=9)
            sub = guides[(guides["model"] == model) & (guides["variant"] == variant)]
            real = sub[~sub["is_null_guide"]]
            null = finite_values(sub.loc[sub["is_null_guide"], "auroc"])
            q = pd.to_numeric(real.get("q_value", pd.Series(np.nan, index=real.index)), errors="coerce")
            ok = np.isfinite(q.to_numpy(dtype=float)) & np.isfinite(real["auroc"].to_numpy(dtype=float))
            if not ok.any() or not null.size:
                _no_data(ax, "no q-values (no null)")
                continue
            pts = real[ok]
            x = pts["auroc"].to_numpy(dtype=float) - float(np.median(null))
            y = -np.log10(np.maximum(q.to_numpy(dtype=float)[ok], 1e-300))
            hit = y > -math.log10(q_threshold)
            if effect is not None:
                truth_flag = np.array([bool(effect.get((g, s), False)) for g, s in zip(pts[GENE], pts[GUIDE])])
                for flag, marker, label in ((True, "o", "true effect"), (False, "X", "no true effect")):
                    m = truth_flag == flag
                    ax.scatter(
                        x[m & hit], y[m & hit], s=22, marker=marker, color="tab:red", label=f"hit, {label}", zorder=3
                    )
                    ax.scatter(
                        x[m & ~hit],
                        y[m & ~hit],
                        s=22,
                        marker=marker,
                        color="0.6",
                        label=f"not called, {label}",
                        zorder=2,
                    )
            else:
                ax.scatter(x[hit], y[hit], s=22, color="tab:red", label="hit", zorder=3)
                ax.scatter(x[~hit], y[~hit], s=22, color="0.6", label="not called", zorder=2)
            ax.axhline(-math.log10(q_threshold), ls="--", lw=1, color="0.3", label=f"q = {q_threshold:g}")
            ax.axvline(0.0, ls=":", lw=1, color="0.5")
            ax.set_xlabel("AUROC - null median AUROC (unitless)", fontsize=8)
            ax.set_ylabel("-log10 q (BH)", fontsize=8)
            ax.grid(alpha=0.3)
            if r == 0 and c == 0:
                ax.legend(fontsize=6, loc="upper left")
    return render.save_figure(fig, path, dpi)


def _null_qq_figure(guides: pd.DataFrame, path: Path, dpi: int) -> Path:
    """Per model: QQ plot of the pseudo-guides' leave-one-out p-values (observed vs uniform),
    one line per variant, with the 95% band of uniform order statistics."""
    models = _models(guides)
    fig = Figure(figsize=(4.8 * len(models), 4.6))
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    for ax, model in zip(axes, models):
        sub = guides[(guides["model"] == model) & guides["is_null_guide"]]
        ax.set_title("Null calibration: pseudo-guides' p-values" + (f"\nmodel: {model}" if model else ""), fontsize=10)
        drawn = False
        n_max = 0
        column = "p_tail" if "p_tail" in sub.columns else "p_value"  # the fit's own values, its tail included
        for variant in ordered_variants(sub["variant"]):
            p = finite_values(
                pd.to_numeric(sub.loc[sub["variant"] == variant].get(column, pd.Series(dtype=float)), errors="coerce")
            )
            if not p.size:
                continue
            n = p.size
            n_max = max(n_max, n)
            expected = -np.log10((np.arange(1, n + 1) - 0.5) / n)
            observed = -np.log10(np.sort(np.maximum(p, 1e-300)))
            ax.plot(
                expected,
                observed,
                marker="o",
                ms=3,
                lw=1,
                color=VARIANT_COLORS.get(variant),
                label=f"{variant_label(variant)} (n = {n})",
            )
            drawn = True
        if not drawn:
            _no_data(ax, "no pseudo-guide p-values")
            continue
        k = np.arange(1, n_max + 1)
        lo, hi = stats.beta.ppf(0.975, k, n_max - k + 1), stats.beta.ppf(0.025, k, n_max - k + 1)
        ex = -np.log10((k - 0.5) / n_max)
        ax.fill_between(ex, -np.log10(lo), -np.log10(hi), color="0.85", label="95% band (uniform)")
        top = float(ex.max()) * 1.05
        ax.plot([0, top], [0, top], ls="--", lw=1, color="0.3", label="y = x (calibrated)")
        ax.set_xlabel("expected -log10 p (uniform)")
        ax.set_ylabel("observed -log10 p (leave-one-out)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    return render.save_figure(fig, path, dpi)


def make_figures(
    out_dir: Path | str,
    guides: pd.DataFrame,
    genes: pd.DataFrame,
    truth: pd.DataFrame | None = None,
    dpi: int = FIGURE_DPI,
    q_threshold: float = 0.05,
) -> dict[str, Path]:
    """Write the report's PNG figures into ``out_dir``; return them by name.

    ``auroc_by_variant`` (guide AUROC per variant, null pseudo-guides beside, chance line; guides
    coloured by true effect when ``truth`` is given),
    ``paired_pca_ica_vs_pca`` (gene AUROC, coloured by true effect when ``truth`` is given),
    ``sparsity_by_variant`` and ``concentration_by_variant`` (guide level), ``volcano`` (AUROC
    above the null vs -log10 q per variant, hits in red, true effects by marker when ``truth``
    is given) and ``null_qq`` (calibration of the null). Every figure is always written; a
    panel without data says so, so the set of outputs is fixed.
    """
    out_dir = Path(out_dir)
    guides = check_guides(guides)
    genes = check_genes(genes)
    truth = check_truth(truth) if truth is not None else None
    return {
        "auroc_by_variant": _per_variant_figure(
            guides,
            "auroc",
            AUROC_LABEL,
            "Guide AUROC per variant",
            out_dir / "auroc_by_variant.png",
            dpi,
            show_null=True,
            chance=0.5,
            truth=truth,
        ),
        "volcano": _volcano_figure(guides, truth, out_dir / "volcano.png", dpi, q_threshold),
        "null_qq": _null_qq_figure(guides, out_dir / "null_qq.png", dpi),
        "paired_pca_ica_vs_pca": _paired_figure(genes, truth, out_dir / "paired_pca_ica_vs_pca.png", dpi),
        "sparsity_by_variant": _per_variant_figure(
            guides,
            "sparsity",
            SPARSITY_LABEL,
            "Classifier sparsity per variant (real guides)",
            out_dir / "sparsity_by_variant.png",
            dpi,
            show_null=False,
            chance=None,
        ),
        "concentration_by_variant": _per_variant_figure(
            guides,
            "concentration",
            CONCENTRATION_LABEL,
            "Concentration per variant (real guides)",
            out_dir / "concentration_by_variant.png",
            dpi,
            show_null=False,
            chance=None,
        ),
    }
