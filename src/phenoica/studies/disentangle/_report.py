"""The study's summary tables, paired differences, measured verdict, figures and report page."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy import stats

from phenoica.report import (
    Block,
    Links,
    Page,
    PageSection,
    Table,
    save_figure,
    write_page,
    write_verdict,
)
from phenoica.report import (
    Figure as PageFigure,
)
from phenoica.studies.disentangle._evaluate import DISENTANGLE_SCORES, EVALUATED, SCORE_RANGE
from phenoica.studies.disentangle._model import MODELS
from phenoica.studies.disentangle._options import DisentangleReportOptions
from phenoica.utils import write_csv

TITLE = "Disentanglement benchmark (Nelson et al. 2026 Table 2)"


MODEL_LABELS: dict[str, str] = {
    "ae": "AE",
    "beta_vae": "beta-VAE",
    "beta_tcvae": "beta-TCVAE",
    "bioae": "BioAE",
    "ae_ica": "AE + ICA",
    "ae_rand": "AE + random rotation (control)",
    "ae_oracle": "AE + factor-fitted rotation (uses labels)",
}


# Nelson et al. 2026 Table 2: (InfoM, InfoE, InfoC), aggregated over Shapes3D, MPI3D, Falcor3D, Isaac3D, and Shapes3D alone.
PAPER_TABLE2: dict[str, dict[str, tuple[float, float, float]]] = {
    "aggregate": {
        "ae": (0.39, 0.76, 0.25),
        "beta_vae": (0.59, 0.81, 0.55),
        "beta_tcvae": (0.58, 0.72, 0.59),
        "bioae": (0.54, 0.75, 0.36),
        "ae_ica": (0.65, 0.83, 0.40),
    },
    "shapes3d": {"ae": (0.34, 0.99, 0.16), "ae_ica": (0.79, 0.99, 0.52)},
}


ROTATION_GAP = 0.1  # MCC within this of the factor-fitted rotation counts as "about as aligned as a rotation gets"


READABLE_INFOE = 0.5  # below this mean InfoE the report calls InfoM/InfoC unreadable (read them beside InfoE, as Nelson et al. 2026 do)


SCORE_LABELS: dict[str, str] = {
    "infom": "InfoM",
    "infoe": "InfoE",
    "infoc": "InfoC",
    "mcc": "MCC",
    "r2": "R2",
    "dci_d": "DCI-D",
    "dci_c": "DCI-C",
    "dci_i": "DCI-I",
}


def _ordered_models(values: Sequence[str]) -> list[str]:
    return [m for m in EVALUATED if m in set(values)] + sorted(set(values) - set(EVALUATED))


def mean_interval(values: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval ``(mean, low, high)`` of the finite ``values``
    (seeds as independent replicates); the interval is NaN with fewer than two values."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(v.mean())
    if v.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return mean, mean - half, mean + half


def _sorted_rows(out: pd.DataFrame, datasets: Sequence[str]) -> pd.DataFrame:
    order = {m: i for i, m in enumerate(_ordered_models(out["model"].unique()))}
    out = out.assign(_d=out["dataset"].map({d: i for i, d in enumerate(datasets)}), _m=out["model"].map(order))
    return out.sort_values(["_d", "_m"]).drop(columns=["_d", "_m"]).reset_index(drop=True)


def summary_table(scores: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Table 2 shape: per dataset and ``all`` (per seed, the mean over datasets), over seeds.

    Columns: dataset, model, n_seeds, then per score ``<score>_mean``, ``<score>_sd`` and the
    ``level`` Student-t interval ``<score>_lo`` / ``<score>_hi`` (:func:`mean_interval`),
    truncated to :data:`SCORE_RANGE` (every score lies in [0, 1], so its mean does too; with
    3 seeds the t interval is wide enough to cross those bounds).
    """
    missing = {"dataset", "model", "seed", *DISENTANGLE_SCORES} - set(scores.columns)
    if missing:
        raise ValueError(f"scores: missing columns {sorted(missing)}")
    cols = list(DISENTANGLE_SCORES)
    per = scores[["dataset", "model", "seed", *cols]]
    if per["dataset"].nunique() > 1:
        agg = per.groupby(["model", "seed"], as_index=False)[cols].mean().assign(dataset="all")
        per = pd.concat([per, agg], ignore_index=True)
    rows = []
    for (dataset, model), t in per.groupby(["dataset", "model"], sort=False):
        row: dict[str, Any] = {"dataset": dataset, "model": model, "n_seeds": len(t)}
        for c in cols:
            mean, lo, hi = mean_interval(t[c].to_numpy(float), level)
            lo, hi = max(lo, SCORE_RANGE[0]), min(hi, SCORE_RANGE[1])  # NaN (one seed) stays NaN
            row.update(
                {
                    f"{c}_mean": mean,
                    f"{c}_sd": float(t[c].std(ddof=1)) if len(t) > 1 else math.nan,
                    f"{c}_lo": lo,
                    f"{c}_hi": hi,
                }
            )
        rows.append(row)
    datasets = list(scores["dataset"].unique()) + (["all"] if "all" in set(per["dataset"]) else [])
    return _sorted_rows(pd.DataFrame(rows), datasets)


def paired_differences(
    scores: pd.DataFrame,
    model: str,
    baseline: str,
    columns: Sequence[str] = ("infom", "infoe", "infoc", "mcc"),
    level: float = 0.95,
) -> pd.DataFrame:
    """Per dataset and score: ``model - baseline`` paired by seed (same AE for the AE-derived
    rows), mean difference with its Student-t interval, seeds, and seeds where ``model`` is higher."""
    rows = []
    for dataset, t in scores.groupby("dataset", sort=False):
        a = t[t["model"] == model].set_index("seed")
        b = t[t["model"] == baseline].set_index("seed")
        seeds = a.index.intersection(b.index)
        if seeds.empty:
            continue
        for c in columns:
            diff = (a.loc[seeds, c] - b.loc[seeds, c]).to_numpy(float)
            mean, lo, hi = mean_interval(diff, level)
            rows.append(
                {
                    "dataset": dataset,
                    "comparison": f"{MODEL_LABELS.get(model, model)} - {MODEL_LABELS.get(baseline, baseline)}",
                    "score": SCORE_LABELS.get(c, c),
                    "mean_diff": mean,
                    "ci_low": lo,
                    "ci_high": hi,
                    "n_seeds": int(seeds.size),
                    "seeds_higher": int((diff > 0).sum()),
                }
            )
    return pd.DataFrame(
        rows, columns=["dataset", "comparison", "score", "mean_diff", "ci_low", "ci_high", "n_seeds", "seeds_higher"]
    )


def factor_infoe(scores: pd.DataFrame) -> pd.DataFrame:
    """Explicitness of each factor (mean over seeds) per dataset and trained model: which
    factors the latents carry linearly. (Invariant to the AE-derived rotations, so AE only.)"""
    rows = []
    for (dataset, model), t in scores[scores["model"].isin(MODELS)].groupby(["dataset", "model"], sort=False):
        names = json.loads(t["factor_names"].iloc[0])
        values = np.array([json.loads(v) for v in t["infoe_sources"]], dtype=float)
        rows.append(
            {
                "dataset": dataset,
                "model": MODEL_LABELS.get(model, model),
                **{n: float(v) for n, v in zip(names, values.mean(axis=0))},
            }
        )
    return pd.DataFrame(rows)


def _interval_text(mean: float, lo: float, hi: float) -> str:
    return f"{mean:.2f} [{lo:.2f}, {hi:.2f}]" if np.isfinite(lo) else f"{mean:.2f}"


def display_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Table 2 as shown: ``mean [95% CI]`` per score, the paper's InfoM/InfoE/InfoC beside ours.

    ``paper (agg.)`` = the paper's aggregate (Nelson et al. 2026) over four datasets; ``paper (Shapes3D)`` where it
    reports one.
    """
    out = pd.DataFrame(
        {
            "Dataset": summary["dataset"],
            "Model": summary["model"].map(lambda m: MODEL_LABELS.get(m, m)),
            "Seeds": summary["n_seeds"],
        }
    )
    for c in DISENTANGLE_SCORES:
        out[SCORE_LABELS[c]] = [
            _interval_text(m, lo, hi) for m, lo, hi in zip(summary[f"{c}_mean"], summary[f"{c}_lo"], summary[f"{c}_hi"])
        ]
    for source, label in (("aggregate", "paper (agg.)"), ("shapes3d", "paper (Shapes3D)")):
        paper = PAPER_TABLE2[source]
        out[f"{label} M/E/C"] = [
            " / ".join(f"{v:.2f}" for v in paper[m]) if m in paper else "" for m in summary["model"]
        ]
    return out


def _direction(lo: float, hi: float, higher: str, lower: str, same: str) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return same + " (too few seeds for an interval)"
    return higher if lo > 0 else lower if hi < 0 else same


def _infoe_sentences(dataset: str, t: pd.DataFrame, level: float) -> str:
    """Is the AE's InfoE high enough to read InfoM/InfoC, and which factors it carries linearly."""
    ae = t[t["model"] == "ae"]
    e_mean, e_lo, e_hi = mean_interval(ae["infoe"], level)
    fi = factor_infoe(t)
    fi = fi[fi["model"] == "AE"].drop(columns=["dataset", "model"]).iloc[0]
    good = [n for n, v in fi.items() if v >= READABLE_INFOE]
    text = (
        f"{dataset}: the AE's InfoE is {_interval_text(e_mean, e_lo, e_hi)} (paper: 0.76 aggregated, "
        f"0.99 on Shapes3D); factors it carries linearly (per-factor InfoE >= {READABLE_INFOE}): "
        f"{', '.join(good) if good else 'none'}"
        + (f"; not: {', '.join(n for n in fi.index if n not in good)}" if len(good) < len(fi) else "")
        + ". "
    )
    if not e_mean >= READABLE_INFOE:  # a NaN InfoE is not readable either
        text += (
            "With InfoE this low InfoM and InfoC are ratios of small mutual informations and do not "
            "measure disentanglement (Nelson et al. 2026), so the AE + ICA comparison below is not a test of the paper's claim. "
        )
    return text


def _ica_against_ae(t: pd.DataFrame) -> tuple[str, bool]:
    """AE + ICA - AE, paired by seed with intervals; and whether ICA wins on InfoM."""
    d = paired_differences(t, "ae_ica", "ae").set_index("score")
    m_, c_ = d.loc["InfoM"], d.loc["MCC"]
    text = (
        f"AE + ICA - AE: InfoM {m_['mean_diff']:+.2f} [{m_['ci_low']:+.2f}, {m_['ci_high']:+.2f}], "
        f"InfoC {d.loc['InfoC', 'mean_diff']:+.2f} [{d.loc['InfoC', 'ci_low']:+.2f}, {d.loc['InfoC', 'ci_high']:+.2f}], "
        f"MCC {c_['mean_diff']:+.2f} [{c_['ci_low']:+.2f}, {c_['ci_high']:+.2f}] over {int(m_['n_seeds'])} seeds "
        f"(ICA higher on InfoM in {int(m_['seeds_higher'])} of them): AE + ICA is "
        + _direction(
            m_["ci_low"],
            m_["ci_high"],
            "above the AE on InfoM, as the paper reports",
            "below the AE on InfoM, the opposite of the paper's result",
            "not distinguishable from the AE on InfoM",
        )
        + ". "
    )
    ica_wins = bool(np.isfinite(m_["ci_low"]) and m_["ci_low"] > 0)
    if not ica_wins:
        per_seed = {m: t.loc[t["model"] == m, "infom"] for m in ("ae", "ae_ica")}
        text += (
            f"Per seed, the AE's InfoM spans {per_seed['ae'].min():.2f}-{per_seed['ae'].max():.2f} and "
            f"AE + ICA's {per_seed['ae_ica'].min():.2f}-{per_seed['ae_ica'].max():.2f}. "
        )
    return text, ica_wins


def _against_random_rotation(t: pd.DataFrame) -> str:
    """AE + ICA and the AE's own axes, each against a random rotation of the whitened latents."""
    q = paired_differences(t, "ae_ica", "ae_rand").set_index("score").loc["InfoM"]
    text = (
        f"AE + ICA against a random rotation of the same whitened latents: InfoM "
        f"{q['mean_diff']:+.2f} [{q['ci_low']:+.2f}, {q['ci_high']:+.2f}] ("
        + _direction(
            q["ci_low"],
            q["ci_high"],
            "ICA finds axes that a random rotation does not",
            "ICA's axes are worse than a random rotation",
            "ICA's axes are not distinguishable from a random rotation",
        )
        + "). "
    )
    r = paired_differences(t, "ae", "ae_rand").set_index("score").loc["InfoM"]
    text += (
        f"The AE's own axes against a random rotation of its whitened latents: InfoM "
        f"{r['mean_diff']:+.2f} [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}] ("
        + _direction(
            r["ci_low"],
            r["ci_high"],
            "the AE's latent is already partly axis-aligned, so a rotation must beat that",
            "the AE's axes are worse than a random rotation",
            "no evidence of axis alignment",
        )
        + "). "
    )
    return text


def _against_factor_rotation(t: pd.DataFrame) -> str:
    """How far the rotation fitted with the labels gets, against ICA and the AE, and why."""
    means = {
        (m, c): float(t.loc[t["model"] == m, c].mean()) for m in ("ae_oracle", "ae_ica", "ae") for c in ("mcc", "infom")
    }
    o_mcc, o_m = means["ae_oracle", "mcc"], means["ae_oracle", "infom"]
    i_mcc, i_m = means["ae_ica", "mcc"], means["ae_ica", "infom"]
    a_mcc, a_m = means["ae", "mcc"], means["ae", "infom"]
    if o_mcc - a_mcc < ROTATION_GAP:
        why = (
            "no rotation makes these latents much more factor-aligned than the AE's own axes, so ICA has little to find"
        )
    elif o_mcc - i_mcc < ROTATION_GAP:
        why = (
            f"ICA gets within {ROTATION_GAP} MCC of the rotation fitted with the labels, so it finds about as "
            "factor-aligned a rotation as the labels give"
        )
    else:
        why = (
            "a better rotation exists that ICA does not find (the whitened latents are not independent "
            "components aligned with the factors)"
        )
    return (
        f"The factor-fitted rotation (uses labels) reaches MCC {o_mcc:.2f} and InfoM {o_m:.2f}, against "
        f"{i_mcc:.2f} and {i_m:.2f} for ICA and {a_mcc:.2f} and {a_m:.2f} for the AE: {why}."
    )


def verdict(scores: pd.DataFrame, level: float = 0.95) -> str:
    """One paragraph per dataset, computed from the scores: is the AE's InfoE high enough to
    read InfoM/InfoC; AE + ICA against AE (paired by seed, with intervals); and, where ICA does
    not win, why (low InfoE, the AE's own axes versus the random-rotation control, and how far
    the factor-fitted rotation gets)."""
    parts = []
    for dataset, t in scores.groupby("dataset", sort=False):
        have = set(t["model"])
        if "ae" not in have:
            parts.append(f"{dataset}: no AE trained, so AE + ICA is not evaluated.")
            continue
        text = _infoe_sentences(dataset, t, level)
        if "ae_ica" in have:
            ica_text, ica_wins = _ica_against_ae(t)
            text += ica_text
            if not ica_wins and "ae_rand" in have:
                text += _against_random_rotation(t)
            if not ica_wins and "ae_oracle" in have:
                text += _against_factor_rotation(t)
        parts.append(text.strip())
    return " ".join(parts)


def verdict_line(scores: pd.DataFrame, level: float = 0.95) -> str:
    """The verdict in one line (for pages that link to the study): per dataset, AE + ICA - AE on
    InfoM with its interval over seeds and what it means, beside the AE's InfoE."""
    parts = []
    for dataset, t in scores.groupby("dataset", sort=False):
        have = set(t["model"])
        if not {"ae", "ae_ica"} <= have:
            parts.append(f"{dataset}: AE + ICA not evaluated")
            continue
        m_ = paired_differences(t, "ae_ica", "ae").set_index("score").loc["InfoM"]
        e_mean = mean_interval(t.loc[t["model"] == "ae", "infoe"], level)[0]
        parts.append(
            f"{dataset}: AE + ICA - AE InfoM {m_['mean_diff']:+.2f} [{m_['ci_low']:+.2f}, "
            f"{m_['ci_high']:+.2f}] over {int(m_['n_seeds'])} seeds, "
            + _direction(
                m_["ci_low"],
                m_["ci_high"],
                "ICA above the AE (as the paper reports)",
                "ICA below the AE (the opposite of the paper)",
                "not distinguishable",
            )
            + f" (AE InfoE {e_mean:.2f}"
            + ("" if e_mean >= READABLE_INFOE else ", too low to read InfoM")
            + ")"
        )
    return "; ".join(parts) + "." if parts else "No scores."


def summary_figure(summary: pd.DataFrame, dataset: str) -> Figure:
    """InfoM, InfoE, InfoC and MCC per model on ``dataset`` with 95% intervals; the paper's
    aggregate InfoM/E/C as black markers where it reports the model."""
    rows = summary[summary["dataset"] == dataset].reset_index(drop=True)
    shown = ("infom", "infoe", "infoc", "mcc")
    fig = Figure(figsize=(max(6.0, 1.3 * len(rows) * 1.2), 3.8), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(shown)
    x = np.arange(len(rows))
    for k, c in enumerate(shown):
        mean = rows[f"{c}_mean"].to_numpy(float)
        err = np.vstack([mean - rows[f"{c}_lo"].to_numpy(float), rows[f"{c}_hi"].to_numpy(float) - mean])
        ax.bar(x + (k - 1.5) * width, mean, width, yerr=np.nan_to_num(err), capsize=2, label=SCORE_LABELS[c])
        if c != "mcc":
            paper = [
                PAPER_TABLE2["aggregate"].get(m, (math.nan,) * 3)[("infom", "infoe", "infoc").index(c)]
                for m in rows["model"]
            ]
            ax.scatter(
                x + (k - 1.5) * width,
                paper,
                color="black",
                marker="_",
                s=120,
                zorder=3,
                label="paper (aggregate)" if k == 0 else None,
            )
    ax.set_xticks(x, [MODEL_LABELS.get(m, m).replace(" (", "\n(") for m in rows["model"]], fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score (mean, 95% CI over seeds)")
    ax.set_title(f"{dataset}: Table 2 scores")
    ax.legend(fontsize=7, ncols=5, loc="upper center")
    return fig


def nmi_figure(scores: pd.DataFrame, dataset: str) -> Figure:
    """NMI heatmaps (factors x latents) of each model on ``dataset`` for its lowest seed.

    Latent columns are ordered by their most-informed factor, then by NMI, for readability.
    """
    rows = scores[scores["dataset"] == dataset]
    models = _ordered_models(rows["model"].unique())
    fig = Figure(figsize=(3.2 * len(models), 3.4), layout="constrained")
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    image = None
    for ax, m in zip(axes, models):
        row = rows[rows["model"] == m].sort_values("seed").iloc[0]
        nmi = np.array(json.loads(row["nmi"]), dtype=float)
        names = json.loads(row["factor_names"])
        order = np.lexsort((-nmi.max(axis=0), nmi.argmax(axis=0)))
        image = ax.imshow(nmi[:, order], vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_title(f"{MODEL_LABELS.get(m, m)} (seed {int(row['seed'])})")
        ax.set_xlabel("latent (sorted)")
        ax.set_xticks(range(nmi.shape[1]))
        ax.set_xticklabels([str(i) for i in order], fontsize=7)
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names if ax is axes[0] else [""] * len(names), fontsize=8)
    axes[0].set_ylabel("factor")
    if image is not None:
        fig.colorbar(image, ax=list(axes), label="NMI  I(s;z)/H(s)", shrink=0.9)
    fig.suptitle(f"{dataset}: normalized mutual information, factors x latents")
    return fig


def write_report(
    scores: pd.DataFrame, out_dir: str | Path, options: DisentangleReportOptions | None = None
) -> dict[str, Path]:
    """Tables (CSV), figures (PNG), ``report.md`` and ``index.html`` in ``out_dir``, through
    :mod:`phenoica.report._render`; the page states the training setup of ``options`` (None: no
    setup line)."""
    out_dir = Path(out_dir)
    written: dict[str, Path] = {}
    summary = summary_table(scores)
    diffs = pd.concat(
        [
            paired_differences(scores, a, b)
            for a, b in (("ae_ica", "ae"), ("ae_ica", "ae_rand"), ("ae", "ae_rand"), ("ae_oracle", "ae"))
        ],
        ignore_index=True,
    )
    per_factor = factor_infoe(scores) if "infoe_sources" in scores else pd.DataFrame()
    for name, df in (
        ("table2.csv", summary),
        ("differences.csv", diffs),
        ("factor_infoe.csv", per_factor),
        ("scores.csv", scores.drop(columns=["nmi"])),
    ):
        written[name] = write_csv(df, out_dir / name)
    figures: list[Block] = []
    for ds in scores["dataset"].unique():
        written[f"scores_{ds}"] = save_figure(summary_figure(summary, ds), out_dir / "figures" / f"scores_{ds}.png")
        written[f"nmi_{ds}"] = save_figure(nmi_figure(scores, ds), out_dir / "figures" / f"nmi_{ds}.png")
        figures += [
            PageFigure(
                f"figures/scores_{ds}.png",
                f"{ds}: scores per model with 95% intervals over seeds; black marks: the paper's aggregate.",
            ),
            PageFigure(f"figures/nmi_{ds}.png", f"{ds}: NMI of each factor with each latent (lowest seed)."),
        ]
    speed = (
        scores[scores["model"].isin(MODELS)]
        .groupby(["dataset", "model"])[[c for c in ("images_per_s", "train_seconds") if c in scores]]
        .mean()
        .reset_index()
    )
    speed["model"] = speed["model"].map(lambda m: MODEL_LABELS.get(m, m))
    setup = ", ".join(f"{k} = {v}" for k, v in options._asdict().items()) if options is not None else ""
    intro = (
        "Disentanglement on factor datasets (Nelson et al. 2026 Table 2), every model trained in the same harness "
        "(same encoder/decoder, data, seeds and budget). AE + ICA = the AE's latents PCA-whitened and ICA-rotated "
        "with phenoica.transforms (the screen's pca_ica); AE + random rotation = whitened and Haar-rotated (the "
        "control for 'any rotation'); AE + factor-fitted rotation = whitened and rotated onto the factors by "
        "orthogonal Procrustes (uses the labels: a reference, not a method). Factors are label-encoded with all "
        "their values. Intervals: 95% Student-t over seeds; differences are paired by seed. InfoM and InfoC are "
        "ratios of NMIs and stay high for uninformative latents: read them beside InfoE. "
        + (f"Setup: {setup}." if setup else "")
    )
    paper = (
        "Paper (Nelson et al. 2026 Table 2; InfoM / InfoE / InfoC): aggregated over Shapes3D, MPI3D, Falcor3D, Isaac3D: "
        "AE 0.39 / 0.76 / 0.25, beta-VAE 0.59 / 0.81 / 0.55, beta-TCVAE 0.58 / 0.72 / 0.59, BioAE 0.54 / 0.75 / 0.36, "
        "AE + ICA 0.65 / 0.83 / 0.40; Shapes3D alone: AE 0.34 / 0.99 / 0.16, AE + ICA 0.79 / 0.99 / 0.52. "
        "Baselines quoted from Hsu et al. 2023."
    )
    page = Page(
        TITLE,
        lead=[intro],
        sections=[
            PageSection("Verdict (measured)", [verdict(scores)]),
            PageSection("Table 2 (this run, mean [95% CI]) beside the paper", [Table(display_table(summary)), paper]),
            PageSection("Paired differences (by seed)", [Table(diffs, float_format="{:+.3f}")]),
            PageSection(
                "Explicitness of each factor (InfoE per factor, mean over seeds)",
                [Table(per_factor, float_format="{:.2f}")],
            ),
            PageSection("Figures", figures),
            PageSection("Training", [Table(speed, float_format="{:.0f}")]),
            PageSection(
                "Tables",
                [Links([(n, n) for n in ("table2.csv", "differences.csv", "factor_infoe.csv", "scores.csv")])],
            ),
        ],
    )
    pages = write_page(page, out_dir)
    written["report_md"], written["index_html"] = pages["report.md"], pages["index.html"]
    written["verdict"] = write_verdict(out_dir, page.title, verdict_line(scores))
    return written
