"""The report's replicate-retrieval section and headline line: which variant brings a construct's
wells together across batches best, with intervals (the measure is
:func:`phenoica.classify.guide_retrieval`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from phenoica.classify import mean_retrieval, retrieval_difference
from phenoica.contract import BATCH, PLATE
from phenoica.report import _render as render
from phenoica.report._checks import ordered_variants
from phenoica.report._inputs import ReportInputs
from phenoica.report._sections import ReportContext, Section, SectionOutput, table_section

#: The variant every other is compared with: the profiles as they came.
REFERENCE = "base"

#: How the headline names what replicates were retrieved across.
ACROSS_WORDS: dict[str, str] = {BATCH: "batches", PLATE: "plates"}

#: Columns of the report's retrieval table.
RETRIEVAL_SUMMARY_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    "across",
    "n_guides",
    "retrieval",
    "ci_low",
    "ci_high",
    "ratio_to_base",
    "diff_vs_base",
    "diff_ci_low",
    "diff_ci_high",
)

NOTE = (
    "Replicate retrieval across batches (Arevalo et al. 2024, the field's measure of batch correction): each "
    "non-control well ranks the wells of the other batches by cosine similarity, after each plate is taken from "
    "its control wells' centre, and scores the average precision of its own construct's wells; a construct's "
    "value is the mean over its wells, a variant's the mean over constructs, with a 95% bootstrap interval over "
    "constructs. Differences from `base` are paired over constructs. With one batch the same measure is taken "
    "across plates (`across`). A screen of more constructs than classify.retrieval_max_guides ranks a seeded "
    "sample of them, the same for every variant. Higher is better: replicates find each other whatever batch "
    "they were imaged in."
)


def retrieval_summary(per_guide: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Per (model, variant): the mean retrieval and its interval, and its paired difference from
    :data:`REFERENCE` with an interval (NaN where the model has no ``base``)."""
    rows = []
    for model, sub in per_guide.groupby("model", sort=True):
        base = sub[sub["variant"] == REFERENCE]
        for variant in ordered_variants(sub["variant"]):
            own = sub[sub["variant"] == variant]
            r = mean_retrieval(own, seed)
            row = {
                "model": model,
                "variant": variant,
                "across": str(own["across"].iloc[0]),
                "n_guides": r.n_guides,
                "retrieval": r.mean,
                "ci_low": r.low,
                "ci_high": r.high,
                "ratio_to_base": np.nan,
                "diff_vs_base": np.nan,
                "diff_ci_low": np.nan,
                "diff_ci_high": np.nan,
            }
            if len(base) and variant != REFERENCE:
                diff, low, high, _ = retrieval_difference(own, base, seed)
                mean_base = float(base["retrieval"].mean())
                row.update(
                    ratio_to_base=r.mean / mean_base if mean_base > 0 else np.nan,
                    diff_vs_base=diff,
                    diff_ci_low=low,
                    diff_ci_high=high,
                )
            rows.append(row)
    return pd.DataFrame(rows, columns=list(RETRIEVAL_SUMMARY_COLUMNS))


def retrieval_headline(summary: pd.DataFrame) -> list[str]:
    """One sentence per model: the variant that retrieves replicates best across batches, with its
    interval, beside ``base`` and the paired difference."""
    out = []
    for model, sub in summary.groupby("model", sort=True):
        best = sub.loc[sub["retrieval"].idxmax()]
        across = ACROSS_WORDS.get(str(best["across"]), str(best["across"]))
        line = (
            f"Model {render.md_text(model)}: replicates retrieved across {across} (the field's batch-correction "
            f"measure) best with `{best['variant']}`: {best['retrieval']:.3f} "
            f"[{best['ci_low']:.3f}, {best['ci_high']:.3f}] over {int(best['n_guides'])} guides"
        )
        if best["variant"] != REFERENCE and np.isfinite(best["diff_vs_base"]):
            line += (
                f"; `{REFERENCE}` {sub.loc[sub['variant'] == REFERENCE, 'retrieval'].iloc[0]:.3f}, difference "
                f"{best['diff_vs_base']:+.3f} [{best['diff_ci_low']:+.3f}, {best['diff_ci_high']:+.3f}] "
                f"({best['ratio_to_base']:.2f}x)"
            )
        elif best["variant"] == REFERENCE:
            others = sub[sub["variant"] != REFERENCE]
            line += "; no post-processing variant does better than the profiles as they came"
            if len(others) and np.isfinite(others["retrieval"]).any():
                second = others.loc[others["retrieval"].idxmax()]
                line += (
                    f" (the best, `{second['variant']}`, {second['retrieval']:.3f}: "
                    f"{second['diff_vs_base']:+.3f} [{second['diff_ci_low']:+.3f}, {second['diff_ci_high']:+.3f}])"
                )
        out.append(line + ".")
    return out


def build_retrieval(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """The section of the retrieval table the headline wrote (``retrieval.csv``:
    :func:`retrieval_summary`)."""
    table = ctx.tables.get("retrieval")
    if table is None:
        return SectionOutput()
    return SectionOutput(page=[table_section("Replicate retrieval across batches", NOTE, table)])


RETRIEVAL = Section("retrieval", ("retrieval",), build_retrieval)
