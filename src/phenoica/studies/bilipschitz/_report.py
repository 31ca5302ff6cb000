"""The study's figures, measured verdict and report page."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from phenoica.report import Figure as PageFigure
from phenoica.report import Links, Page, PageSection, Table, save_figure, write_page, write_verdict
from phenoica.studies._plan import ALL_GROUP
from phenoica.studies.bilipschitz._cross_seed import alpha_summary, spearman_table
from phenoica.utils import write_csv

TITLE = "Bi-Lipschitz control and identifiability (Nelson et al. 2026 Figure 2)"


def _save(fig: Figure, path: Path) -> Path:
    return save_figure(fig, path)


def _alpha_colors(alphas: Sequence[float]) -> dict[float, Any]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    al = sorted(set(float(a) for a in alphas))
    return {a: cmap(i / max(len(al) - 1, 1)) for i, a in enumerate(al)}


def figure_distributions(samples: pd.DataFrame, path: Path) -> Path:
    """B(z) distributions per alpha (box plots), one panel per dataset (group all)."""
    s = samples[(samples["group"] == ALL_GROUP) & np.isfinite(samples["bilipschitz"])]
    datasets = sorted(s["dataset"].unique()) or ["(none)"]
    fig = Figure(figsize=(5 * len(datasets), 4), layout="constrained")
    for i, ds in enumerate(datasets):
        ax = fig.add_subplot(1, len(datasets), i + 1)
        t = s[s["dataset"] == ds]
        alphas = sorted(t["alpha"].unique())
        if alphas:
            ax.boxplot([t.loc[t["alpha"] == a, "bilipschitz"].to_numpy() for a in alphas], showfliers=True)
            ax.set_xticks(range(1, len(alphas) + 1), [f"{a:g}" for a in alphas])
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set(
            title=f"{ds}: per-sample B(z)", xlabel="alpha (leaky-ReLU slope 1 - alpha)", ylabel="B(z) = s_max / s_min"
        )
    return _save(fig, path)


def figure_identifiability(pairs: pd.DataFrame, path: Path, per_digit: bool = False) -> Path:
    """Identifiability error (rigid, linear) vs mean and vs max B, one row per dataset."""
    p = pairs[(pairs["group"] != ALL_GROUP) if per_digit else (pairs["group"] == ALL_GROUP)]
    datasets = sorted(p["dataset"].unique()) or ["(none)"]
    colors = _alpha_colors(p["alpha"].unique()) if not p.empty else {}
    fig = Figure(figsize=(11, 4.5 * len(datasets)), layout="constrained")
    for i, ds in enumerate(datasets):
        t = p[p["dataset"] == ds]
        for j, stat in enumerate(("b_mean", "b_max")):
            ax = fig.add_subplot(len(datasets), 2, 2 * i + j + 1)
            for a, c in colors.items():
                u = t[(t["alpha"] == a) & np.isfinite(t[stat])]
                if u.empty:
                    continue
                ax.scatter(u[stat], u["rigid"], color=c, marker="o", label=f"rigid, alpha={a:g}")
                ax.scatter(u[stat], u["linear"], color=c, marker="x", label=f"linear, alpha={a:g}")
            what = "mean" if stat == "b_mean" else "max"
            kind = "digit-specific models" if per_digit else "all samples"
            ax.set(
                title=f"{ds} ({kind}): error vs {what} B",
                xlabel=f"{what} bi-Lipschitz estimate of the pair",
                ylabel="alignment error (l2 / diameter)",
            )
            if j == 1 and not t.empty:
                ax.legend(fontsize=7, loc="best")
    return _save(fig, path)


def figure_reconstruction(models: pd.DataFrame, path: Path) -> Path:
    """Reconstruction error vs alpha and vs mean B (group all), one line per dataset."""
    m = models[models["group"] == ALL_GROUP]
    fig = Figure(figsize=(10, 4), layout="constrained")
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for ds, t in m.groupby("dataset", sort=True):
        g = t.groupby("alpha").agg(recon=("recon_error", "mean"), b=("b_mean", "mean")).reset_index()
        ax1.plot(g["alpha"], g["recon"], marker="o", label=ds)
        ax2.scatter(t["b_mean"], t["recon_error"], label=ds)
    ax1.set(
        title="Reconstruction error vs alpha", xlabel="alpha (leaky-ReLU slope 1 - alpha)", ylabel="mean squared error"
    )
    ax2.set(
        title="Reconstruction error vs mean B",
        xlabel="mean bi-Lipschitz estimate of the model",
        ylabel="mean squared error",
    )
    for ax in (ax1, ax2):
        ax.set_yscale("log")
        if not m.empty:
            ax.legend()
    return _save(fig, path)


def _direction(lo: float, hi: float) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "undetermined (too few pairs)"
    if lo > 0:
        return "positive: error rises with B, as the paper claims"
    if hi < 0:
        return "negative: error falls as B rises, the opposite of the paper's claim"
    return "not distinguishable from zero: the interval includes 0"


def verdict(models: pd.DataFrame, pairs: pd.DataFrame, rho: pd.DataFrame) -> str:
    """One paragraph, computed from the results: per dataset, B at the near-linear and the
    nonlinear end, and the rank correlation of the rigid error with the pair's mean B."""
    if models.empty:
        return "No models were trained."
    parts = []
    for ds, m in models.groupby("dataset", sort=True):
        a = m[m["group"] == ALL_GROUP].groupby("alpha")
        b = a["b_mean"].mean()
        rec = a["recon_error"].mean()
        lo_a, hi_a = float(b.index.min()), float(b.index.max())
        text = (
            f"{ds}: mean B(z) {b.loc[lo_a]:.3f} at alpha = {lo_a:g} and {b.loc[hi_a]:.3f} at alpha = {hi_a:g} "
            f"(reconstruction error {rec.loc[lo_a]:.3g} -> {rec.loc[hi_a]:.3g})"
        )
        for kind in ("all", "per-digit"):
            r = rho[
                (rho["dataset"] == ds)
                & (rho["models"] == kind)
                & (rho["map"] == "rigid")
                & (rho["statistic"] == "b_mean")
            ]
            if r.empty:
                continue
            r = r.iloc[0]
            what = "models of all samples" if kind == "all" else "digit-specific models (pooled)"
            text += (
                f"; {what}: Spearman rho(mean B, rigid error) = {r['spearman_rho']:+.2f} "
                f"[95% CI {r['ci_low']:+.2f}, {r['ci_high']:+.2f}] over {int(r['n_pairs'])} seed pairs, "
                f"{_direction(r['ci_low'], r['ci_high'])}"
            )
        if "late_improvement" in m:
            late = m["late_improvement"].to_numpy(float)
            text += (
                f"; loss change over the last 10% of epochs: median {100 * np.median(np.abs(late)):.2g}%, "
                f"largest {100 * np.max(np.abs(late)):.2g}% ({int(m['epochs_run'].min())}-{int(m['epochs_run'].max())} epochs)"
            )
        parts.append(text + ".")
    near = models[(models["alpha"] == models["alpha"].min()) & (models["group"] == ALL_GROUP)]
    head = (
        f"At the near-linear end (alpha = {float(models['alpha'].min()):g}) the encoders' mean B(z) is "
        f"{near['b_mean'].min():.3f}-{near['b_mean'].max():.3f} across datasets and seeds. "
    )
    return head + " ".join(parts)


def verdict_line(rho: pd.DataFrame) -> str:
    """The verdict in one line (for pages that link to the study): per dataset, the Spearman
    correlation of the rigid error with the pair's mean B (models of all samples), its interval
    and what it means."""
    r = rho[(rho["models"] == "all") & (rho["map"] == "rigid") & (rho["statistic"] == "b_mean")]
    parts = [
        f"{row['dataset']}: Spearman rho(mean B, rigid error) {row['spearman_rho']:+.2f} "
        f"[{row['ci_low']:+.2f}, {row['ci_high']:+.2f}] over {int(row['n_pairs'])} seed pairs, "
        f"{_direction(row['ci_low'], row['ci_high'])}"
        for _, row in r.iterrows()
    ]
    return "; ".join(parts) + "." if parts else "No models were trained."


def write_report(
    out_dir: Path | str,
    models: pd.DataFrame,
    pairs: pd.DataFrame,
    samples: pd.DataFrame,
    *,
    n_boot: int,
    seed: int,
) -> dict[str, Path]:
    """Figures, CSV tables, ``report.md`` and ``index.html`` of the study under ``out_dir``
    (one page through :mod:`phenoica.report._render`); the Spearman intervals draw ``n_boot``
    bootstrap replicates seeded by ``seed`` (config ``bilipschitz.n_bootstrap`` and ``seed``)."""
    out = Path(out_dir)
    fig_dir, tab_dir = out / "figures", out / "tables"
    files: dict[str, Path] = {
        "distributions": figure_distributions(samples, fig_dir / "bilipschitz_distributions.png"),
        "identifiability": figure_identifiability(pairs, fig_dir / "identifiability_vs_bilipschitz.png"),
        "reconstruction": figure_reconstruction(models, fig_dir / "reconstruction.png"),
    }
    has_digits = bool((pairs["group"] != ALL_GROUP).any()) if not pairs.empty else False
    if has_digits:
        files["per_digit"] = figure_identifiability(pairs, fig_dir / "identifiability_per_digit.png", per_digit=True)
    summary = alpha_summary(models, pairs)
    rho = spearman_table(pairs, n_boot=n_boot, seed=seed)
    for name, df in (("alpha_summary", summary), ("spearman", rho), ("pairs", pairs), ("models", models)):
        files[f"table_{name}"] = write_csv(df, tab_dir / f"{name}.csv")
    params = sorted(set(models["parametrization"])) if "parametrization" in models else ["none"]
    intro = (
        "Leaky-ReLU MLP autoencoders with negative-side slope 1 - alpha (alpha = 0: exactly linear; "
        f"alpha = 1: ReLU); weight matrices parametrized as: {', '.join(params)} "
        "(orthogonal = torch.nn.utils.parametrizations.orthogonal, Cayley map: every layer semi-orthogonal, "
        "so at alpha = 0 the encoder is a product of semi-orthogonal maps and B(z) = 1 where the row spaces "
        "line up; each leaky ReLU scales directions by 1 or 1 - alpha). B(z) = ratio of the largest to the "
        "smallest singular value of the encoder's Jacobian at each sample (for the isometric data, through "
        "the generator). Identifiability error: held-out mean l2 error / diameter of rigid and linear maps "
        "between two seeds' latents (phenoica.identifiability). Spearman intervals resample models (seeds), not pairs."
    )
    shown_rho = rho.rename(columns={"spearman_rho": "rho", "ci_low": "CI low", "ci_high": "CI high"})
    figure_blocks = [
        PageFigure(f"figures/{files[k].name}", cap)
        for k, cap in (
            ("distributions", "Per-sample B(z) per alpha (models of all samples)."),
            ("identifiability", "Cross-seed alignment error against the pair's mean and max B."),
            ("per_digit", "The same for digit-specific models."),
            ("reconstruction", "Reconstruction error against alpha and against mean B."),
        )
        if k in files
    ]
    page = Page(
        TITLE,
        lead=[intro],
        sections=[
            PageSection("Verdict (measured)", [verdict(models, pairs, rho)]),
            PageSection(
                "Spearman rank correlation: B vs identifiability error",
                [Table(shown_rho, float_format="{:.3g}")],
            ),
            PageSection("Per alpha", [Table(summary, float_format="{:.4g}")]),
            PageSection("Figures", figure_blocks),
            PageSection(
                "Tables",
                [Links([(f"{n}.csv", f"tables/{n}.csv") for n in ("alpha_summary", "spearman", "pairs", "models")])],
            ),
        ],
    )
    written = write_page(page, out)
    files["report.md"], files["index.html"] = written["report.md"], written["index.html"]
    files["verdict"] = write_verdict(out, page.title, verdict_line(rho))
    return files
