"""The report's sections on the screen's scores: the headline, hit calls, the checks against a
simulated truth, the paper's tables, phenotypic activity, costs, identifiability, skips and the
score figures. Each is a :class:`~phenoica.report.Section`; the tables come from
:mod:`phenoica.report._summaries` and :mod:`phenoica.report._truth_tables`, the headline's sentences
from :mod:`phenoica.report._headline`, the figures from :mod:`phenoica.report._figures`.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from phenoica.classify import Readout, registered_readouts
from phenoica.contract import GENE, GUIDE, OK
from phenoica.hits import DISTANCE_COLUMNS, SATURATION_SHARE, hit_counts, readout_agreement, recall_fdr, saturation
from phenoica.report import _render as render
from phenoica.report._checks import check_truth, ordered_variants, variant_label
from phenoica.report._depth import depth_headline
from phenoica.report._figures import identifiability_figure, make_figures
from phenoica.report._headline import any_readout_called, control_headline, headline, readout_status
from phenoica.report._inputs import ReportInputs
from phenoica.report._retrieval_section import retrieval_headline, retrieval_summary
from phenoica.report._sections import ReportContext, Section, SectionOutput, figure_blocks, table_section
from phenoica.report._summaries import (
    classifier_cost,
    fit_report_table,
    has_calls,
    lightgbm_table,
    map_summary,
    paired_tests,
    skip_counts,
    skipped_rows,
    table1_summary,
    table3,
    table4,
    variant_summary,
    variant_widths,
)
from phenoica.report._truth_tables import truth_checks, truth_recovery

SCORES = ("guide_folds", "guides", "genes")
#: The gene table's columns the report shows (those present), in order.
GENE_HIT_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    "rank",
    GENE,
    "n_guides",
    "n_guides_hit",
    "auroc",
    *DISTANCE_COLUMNS,
    "mean_average_precision",
    "p_value",
    "p_beyond_null",
    "q_value",
    "hit",
    "ranked_by",
)
P_VALUE_NOTE = (
    "p-values are reported no finer than the null supports: a null of n_null pseudo-guides observes nothing below "
    "1/(n_null + 1); beyond it the default null model (`pareto`) reads p-values from a generalized Pareto tail "
    "fitted to the pseudo-guides' upper exceedances where a goodness-of-fit test accepts it (down to 1e-10; "
    "checked against a 10x larger held-out null: calibrated at 1e-3, up to about 3x optimistic at 1e-4 and 4x at "
    "1e-5), and elsewhere reports the bound with `p_beyond_null` true (read: p below it). The normal tail's "
    "value (`p_tail` under `parametric`) is never used: it was 3 to 10 times anti-conservative beyond the null "
    "(docs/hit-calling.md)."
)
RANKING_NOTE = (
    "Hits are ranked by an effect size that does not stop at a ceiling: the held-out distance from the controls "
    "in control SDs (`distance_sd`: per fold, the guide's direction from the controls is learnt on the training "
    "rows and its held-out rows are measured along it, in SDs of the held-out controls; the mean over folds with "
    "its 95% interval over the replicate wells of each fold and the spread between folds: it covers the guide's "
    "distance in these batches), or the mAP where the mAP readout scored "
    "more guides than the classifier (`ranked_by`). A "
    f"readout saturates when more than {SATURATION_SHARE:.0%} of its scored guides sit at 1.000: AUROC, p and q "
    "then leave them unordered."
)


def in_rank_order(table: pd.DataFrame) -> pd.DataFrame:
    """A hit or gene table sorted by model, variant and ``rank`` (unranked rows last), or by q-value
    where it has no rank."""
    if "rank" not in table.columns:
        return table.sort_values(["model", "variant", "q_value"], kind="stable").reset_index(drop=True)
    key = pd.to_numeric(table["rank"], errors="coerce").astype("float64").fillna(np.inf)
    return (
        table.assign(_r=key)
        .sort_values(["model", "variant", "_r"], kind="stable")
        .drop(columns="_r")
        .reset_index(drop=True)
    )


def _thresholds(q_threshold: float) -> tuple[float, ...]:
    return tuple(sorted({q_threshold, 0.05, 0.1}))


def _intro(ctx: ReportContext, models: Iterable[str] = ()) -> str:
    """What was scored; ``models``, every model of the run, names those the readouts did not
    score (``classify.models``)."""
    rows, guides, genes = ctx.rows, ctx.guides, ctx.genes
    n_ok = int((rows["status"] == OK).sum())
    variants = ordered_variants(pd.concat([rows["variant"], guides["variant"], genes["variant"]]))
    scored = sorted(set(guides["model"]) | set(rows["model"]))
    unscored = sorted(set(models) - set(scored))
    also = (
        f" (and {', '.join(render.md_text(m) for m in unscored)}: profiled, transformed and aligned, not scored "
        "by the readouts: `classify.models`)"
        if unscored
        else ""
    )
    return (
        f"Models: {', '.join(render.md_text(m) for m in scored)}{also}. "
        f"Variants: {', '.join(f'`{v}` ({variant_label(v)})' for v in variants)}. "
        f"Guide-folds: {n_ok} scored, {len(rows) - n_ok} skipped. "
        f"Real guides: {guides.loc[~guides['is_null_guide'], GUIDE].nunique()}; "
        f"genes: {genes[GENE].nunique()}; null pseudo-guides: "
        f"{guides.loc[guides['is_null_guide'], GUIDE].nunique()}."
    )


def build_headline(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """What was scored, then per model its best variant, hit counts and the paired comparisons;
    writes ``variant_summary`` and ``paired_tests`` (shown under "Variants")."""
    q = ctx.options.q_threshold
    tables = {
        "variant_summary": variant_summary(ctx.guides, (q, 0.1) if q != 0.1 else (0.05, 0.1)),
        "paired_tests": paired_tests(ctx.genes, seed=ctx.options.seed),
    }
    status = readout_status(inputs.table("hits"), inputs.table("null"))
    items = headline(tables["variant_summary"], tables["paired_tests"], q, status)
    items += control_headline(inputs.table("controls"), tables["variant_summary"], q)
    items += depth_headline(inputs.table("null"), inputs.table("hits"), q)
    retrieval = inputs.table("retrieval")
    if retrieval is not None:  # the section 'Replicate retrieval across batches' shows this table
        tables["retrieval"] = retrieval_summary(retrieval, ctx.options.seed)
        items += retrieval_headline(tables["retrieval"])
    blocks: list[render.Block] = [
        _intro(ctx, inputs.fit_reports or {}),
        render.Bullets(items) if items else "No scores.",
    ]
    return SectionOutput(tables=tables, page=[render.PageSection("Headline", blocks)])


def _labels(readouts: tuple[Readout, ...]) -> str:
    """The readouts' labels as a phrase: "classifier and mAP"."""
    labels = [r.label for r in readouts]
    return ", ".join(labels[:-1]) + f" and {labels[-1]}" if len(labels) > 1 else "".join(labels)


def build_hit_calls(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """Hit counts, the hit table, gene calls, the null's calibration and the readouts' agreement."""
    out = SectionOutput()
    q, genes, hits, maps = ctx.options.q_threshold, ctx.genes, inputs.table("hits"), inputs.table("maps")
    readouts = registered_readouts()
    if has_calls(ctx.guides):
        out.tables["hit_counts"] = hit_counts(ctx.guides, genes, _thresholds(q))
        out.tables["gene_hits"] = in_rank_order(genes[[c for c in GENE_HIT_COLUMNS if c in genes.columns]])
        note = (
            "A guide's p-value is its held-out AUROC against the AUROCs of the null pseudo-guides (whole control "
            "wells laid out like real guides, scored by the same classifier) of the same model and variant; "
            "q-values are Benjamini-Hochberg over guides. A gene's p-value combines its guides' (Cauchy "
            f"combination, ACAT); `n_guides_hit` counts its guides with q < {q:g}. {P_VALUE_NOTE}"
        )
        out.page.append(table_section("Hit calls", note, out.tables["hit_counts"]))
    if hits is not None:
        out.tables["hits"] = in_rank_order(hits)
        if maps is not None:
            out.tables["readout_agreement"] = readout_agreement(hits)
        if "distance_sd" in hits.columns:
            out.tables["ranking"] = saturation(hits)
            out.page.append(table_section("Ranking and saturation", RANKING_NOTE, out.tables["ranking"]))
        if "gene_hits" in out.tables:
            shown = out.tables["hits"]
            out.page.append(
                table_section(
                    f"Hit table (guides called by {'either' if len(readouts) == 2 else 'any'} readout)",
                    f"In rank order (`rank`, by `ranked_by`; see 'Ranking and saturation'). Every guide with "
                    f"{'both' if len(readouts) == 2 else 'all'} readouts is in `{ctx.rel(ctx.table_path('hits'))}`; "
                    f"`agreement` compares the calls of the {_labels(readouts)} readouts.",
                    shown[any_readout_called(shown)].head(200),
                )
            )
    if "gene_hits" in out.tables:
        gene_hits = out.tables["gene_hits"]
        note = (
            f"In rank order; a gene's distance is the mean over folds of its guides' distances in each fold, with "
            f"the 95% interval over replicate wells and folds. All genes: `{ctx.rel(ctx.table_path('gene_hits'))}`."
        )
        out.page.append(table_section("Gene calls", note, gene_hits[gene_hits["hit"]].head(200)))
    if inputs.table("null") is not None:
        out.tables["null_calibration"] = inputs.null.copy()
        note = (
            "The null per model and variant: pseudo-guides scored and skipped, their logit-AUROC fit, "
            "Shapiro-Wilk normality of the logit AUROCs, and the uniformity (Kolmogorov-Smirnov) of "
            "their leave-one-out p-values; see the QQ figure. `tail`: a Pareto tail reads beyond the "
            "pseudo-guides (its threshold, shape, scale, exceedances and goodness-of-fit p beside it); `p_floor` is "
            "the smallest p-value reported (1/(n_null + 1) without a tail, 1e-10 with one) and `p_reach` that of "
            "AUROC 1; `n_beyond_null` guides lie beyond `p_floor` (reported at it, flagged `p_beyond_null`); "
            "q-values and calls are made on the reported p-values; `n_tail_only_calls` guides would be called on "
            "the model's unbounded values (docs/hit-calling.md)."
        )
        out.page.append(table_section("Null calibration", note, out.tables["null_calibration"]))
    if inputs.table("controls") is not None:
        out.tables["control_constructs"] = inputs.controls.copy()
        note = (
            "Each control construct classified against the remaining controls exactly as a guide is, its held-out "
            "AUROC called against the same pseudo-guide null (q over the constructs of a model and variant), and "
            "the features whose means separate it most from the other controls (in SDs of the other controls, "
            "after each batch's control mean is taken out). A construct called a hit is not inert."
        )
        out.page.append(table_section("Control constructs", note, out.tables["control_constructs"]))
    if "readout_agreement" in out.tables:
        called_by = ", ".join(f"{r.label} (`{r.hit}`, on `{r.statistic}`)" for r in readouts)
        note = (
            f"Guides called by each readout: {called_by}; per pair of readouts, Cohen's kappa of their calls and "
            "the Spearman correlation of their statistics."
        )
        out.page.append(table_section("Agreement between the readouts", note, out.tables["readout_agreement"]))
    return out


def build_truth(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """Demo screens: the calls, scores and factors against the simulated truth, as measured."""
    out = SectionOutput()
    if inputs.truth is None:
        return out
    truth, structural = inputs.truth, inputs.structural
    out.tables["truth_checks"] = truth_checks(ctx.guides, truth)
    out.tables.update(truth_recovery(ctx.guides, truth, structural, seed=ctx.options.seed))
    if has_calls(ctx.guides):
        recall = recall_fdr(ctx.guides, check_truth(truth), _thresholds(ctx.options.q_threshold))
        out.tables["recall_fdr"] = recall
        note = (
            "Recall of the guides (genes) with a true effect and the observed false discovery rate "
            "among the calls, at each q threshold. Reported as measured."
        )
        out.page.append(table_section("Hit calls against the simulated truth (demo)", note, recall))
    notes = {
        "truth_checks": (
            "Checks against the simulated truth (demo)",
            "Reported as measured. Effect guides vs guides of genes without effect (one-sided "
            "Mann-Whitney); no-effect guides vs 0.5 (t-test) and vs the null pseudo-guides.",
        ),
        "truth_recovery": (
            "Recovery of the simulated truth (demo)",
            "Probe R^2: held-out (5-fold) ridge probe from the latents to the factors genes shift. Separation: "
            "mean AUROC of effect guides minus no-effect guides, 95% bootstrap interval over genes; "
            "auc_effect_vs_no_effect = P(effect guide > no-effect guide); one-sided Mann-Whitney p over guides.",
        ),
        "variant_contrasts": (
            "Variant contrasts against the truth (demo)",
            "delta_separation: change in effect - no-effect separation, variant minus reference (paired "
            "bootstrap over genes); delta_effect_auroc: mean paired difference over effect genes, its "
            "interval, Cohen's d_z and Wilcoxon p. Reported as measured.",
        ),
    }
    out.page += [table_section(heading, note, out.tables[name]) for name, (heading, note) in notes.items()]
    return out


def build_variants(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """The variant summary, the paper's Tables 3 and 4 and the paired comparisons."""
    widths = variant_widths(inputs.fit_reports)  # (model, variant) -> D, the features its classifiers see
    out = SectionOutput(tables={"table3": table3(ctx.genes, widths), "table4": table4(ctx.rows, widths)})
    shown = [
        (
            "Variant summary",
            "Guide-level means per variant, the null's size and mean, and hits per q threshold.",
            ctx.tables["variant_summary"],
        ),
        (
            "Table 3: mean AUROC and sparsity per gene",
            "Gene scores are means over the gene's guides; the `mean` row averages the genes scored in every variant. "
            "`D_<variant>` is the number of features the variant's classifiers see; sparsity's scale depends on D, "
            "so compare it only between variants of equal D (`sparsity_note` flags rows where D differs).",
            out.tables["table3"],
        ),
        (
            "Table 4: concentration per variant",
            "Over scored guide-folds of real guides: AUROC(top-k features) / AUROC(rest) - 1; `k_features` is the "
            "top set as a count of the variant's D features (`d_note` flags models whose variants differ in D).",
            out.tables["table4"],
        ),
        (
            "Comparisons between variants (over genes)",
            "Effect size = mean gene-level difference (variant - reference) with a 95% percentile-bootstrap interval "
            "over genes; two-sided Wilcoxon signed-rank p; no multiple-testing correction.",
            ctx.tables["paired_tests"],
        ),
    ]
    out.page = [table_section(*s) for s in shown]
    return out


def build_activity(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """Phenotypic activity: each guide's copairs mAP against the controls."""
    maps = inputs.table("maps")
    if maps is None:
        return SectionOutput()
    summary = map_summary(maps, ctx.options.q_threshold)
    note = (
        "Mean average precision of each guide's wells against the control wells of their plates; "
        "p-values from copairs' null, BH q-values over guides."
    )
    return SectionOutput(
        {"map_summary": summary}, page=[table_section("Phenotypic activity (copairs mAP)", note, summary)]
    )


def build_cost(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """What classification cost, the LightGBM parameters used and the transforms' fit."""
    out = SectionOutput(tables={"classifier_cost": classifier_cost(ctx.rows)})
    note = (
        "LightGBM models trained per model and variant: 3 per scored guide-fold with concentration "
        "(full, top-k, rest), 1 otherwise; the null's pseudo-guides train 1. `null_share` is the null's "
        "share of the classification work."
    )
    out.page.append(table_section("Classification cost", note, out.tables["classifier_cost"]))
    out.tables["lightgbm_parameters"] = lightgbm_table(ctx.options.lightgbm)
    note = "Nelson et al. (ICLR 2026) Table 6; every parameter not listed is at LightGBM's own default."
    out.page.append(table_section("LightGBM parameters used", note, out.tables["lightgbm_parameters"]))
    if inputs.fit_reports is not None:
        out.tables["transform_fit"] = fit_report_table(inputs.fit_reports)
        out.page.append(table_section("Transform fit", "", out.tables["transform_fit"]))
    return out


def build_identifiability(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """Model-to-model alignment (Table 1) and the recovery of the simulated factors, one figure."""
    out = SectionOutput()
    table1, structural = inputs.table("table1"), inputs.table("structural")
    if table1 is not None:
        out.tables["table1_alignment"] = table1_summary(table1)
    if structural is not None:
        out.tables["structural"] = structural.copy()
    if not out.tables:
        return out
    path = identifiability_figure(
        out.tables.get("table1_alignment"), out.tables.get("structural"), ctx.figure_path("identifiability")
    )
    out.figures["identifiability"] = path
    figure = render.Figure(
        ctx.rel(path), "Identifiability: model-to-model alignment error and factor recovery per variant"
    )
    if "table1_alignment" in out.tables:
        note = (
            "Held-out mean l2 error of A's embeddings mapped onto B's, divided by the diameter of "
            "B's; ICA efficiency = (perm - ica) / (perm - rigid). Expected on a real pair: "
            "linear <= rigid <= ICA <= permutation."
        )
        out.page.append(table_section("Table 1: alignment between models", note, out.tables["table1_alignment"]))
    if "structural" in out.tables:
        note = (
            "MCC = mean |correlation| after Hungarian matching; R^2 of a linear map latents -> "
            "factors; InfoM/InfoE/InfoC of Hsu et al. (read InfoM/InfoC only beside a high InfoE)."
        )
        if "table1_alignment" not in out.tables:
            note += (
                " No Table 1 in this run: it aligns two or more models (`identifiability.align`); on the "
                "demo, `--configfile config.yaml config/second_seed.yaml` adds a second seed of its MAE."
            )
        shown = structural[[c for c in structural.columns if "r2_factor" not in str(c)]]
        out.page.append(table_section("Structural identifiability: recovery of the simulated factors", note, shown))
    out.page[-1].blocks.append(figure)
    return out


def build_skips(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """The skipped guide-folds, counted by reason; every row in ``skips.csv``."""
    tables = {"skips": skipped_rows(ctx.rows), "skip_counts": skip_counts(ctx.rows)}
    note = f"Counts by reason; every skipped row is in `{ctx.rel(ctx.table_path('skips'))}`."
    return SectionOutput(tables, page=[table_section("Skipped guide-folds", note, tables["skip_counts"])])


def build_figures(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """The score figures of :func:`phenoica.report._figures.make_figures`."""
    q = ctx.options.q_threshold
    out_dir = ctx.out_dir / ctx.layout.figures_dir
    figures = make_figures(out_dir, ctx.guides, ctx.genes, truth=inputs.truth, q_threshold=q)
    captions = {
        "auroc_by_variant": "Guide AUROC per variant (null pseudo-guides as grey crosses)",
        "volcano": f"Hits per variant: AUROC above the null's median vs -log10 q (dashed: q = {q:g})",
        "null_qq": "Calibration: the pseudo-guides' leave-one-out p-values against the uniform",
        "paired_pca_ica_vs_pca": "Gene AUROC, PCA + ICA vs PCA",
        "sparsity_by_variant": "Classifier sparsity per variant",
        "concentration_by_variant": "Concentration per variant",
    }
    page = render.PageSection("Figures", figure_blocks(figures, captions, ctx))
    return SectionOutput(figures=figures, page=[page])


HEADLINE = Section("headline", (*SCORES, "hits", "null", "controls", "retrieval"), build_headline)
HIT_CALLS = Section("hit_calls", ("guides", "genes", "hits", "maps", "null", "controls"), build_hit_calls)
TRUTH = Section("truth", ("guides", "truth", "structural"), build_truth)
VARIANTS = Section("variants", (*SCORES, "fit_reports"), build_variants)
ACTIVITY = Section("activity", ("maps",), build_activity)
COST = Section("cost", ("guide_folds", "fit_reports"), build_cost)
IDENTIFIABILITY = Section("identifiability", ("table1", "structural"), build_identifiability)
SKIPS = Section("skips", ("guide_folds",), build_skips)
FIGURES = Section("figures", ("guides", "genes", "truth"), build_figures)
