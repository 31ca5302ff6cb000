"""The report page: every table of ``phenoica.report.summaries`` as CSV, the figures of
``phenoica.report.figures``, and one page (``report.md`` + ``index.html``) through ``phenoica.report.render``.

``write_report`` computes the tables, writes them and the figures, then assembles the page from
a list of ``(heading, note, table)`` sections (append to it to add a section) after a headline
and the links to the study pages that exist.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from phenoica import hits as H
from phenoica.contract import OK
from phenoica.report import render
from phenoica.report.checks import check_genes, check_guides, check_rows, check_truth, ordered_variants, variant_label
from phenoica.report.figures import identifiability_figure, make_figures
from phenoica.report.summaries import (
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
from phenoica.report.truth_tables import truth_checks, truth_recovery
from phenoica.screen import GENE, GUIDE


def headline(summary: pd.DataFrame, tests: pd.DataFrame, q_threshold: float = 0.05) -> list[str | render.Bullets]:
    """Short sentences with the numbers a reader wants first: one bullet per model, its variants
    and comparisons nested under it (a list for :class:`phenoica.report.render.Bullets`)."""
    items: list[str | render.Bullets] = []
    hit_col = f"hits_q<{q_threshold:g}"
    for model in sorted(summary["model"].unique()):
        sub = summary[summary["model"] == model]
        scored = sub[np.isfinite(sub["auroc_mean"].to_numpy(dtype=float))]
        if scored.empty:
            items.append(f"Model `{model}`: no guide was scored.")
            continue
        best = scored.loc[scored["auroc_mean"].idxmax()]
        items.append(
            f"Model `{model}`: highest mean guide AUROC with **{variant_label(best['variant'])}** "
            f"(`{best['variant']}`, {best['auroc_mean']:.3f} over {best['n_guides_scored']} guides)."
        )
        nested: list[str | render.Bullets] = []
        for _, r in sub.iterrows():
            n_hits = r[hit_col] if hit_col in r.index else pd.NA
            hits = (
                "no null pseudo-guides, no hit calls"
                if pd.isna(n_hits)
                else f"**{n_hits}/{r['n_guides_scored']} guides are hits at q < {q_threshold:g}** "
                f"(null: {r['n_null_guides']} pseudo-guides, mean AUROC {r['null_auroc_mean']:.3f})"
            )
            nested.append(
                f"`{r['variant']}`: mean AUROC {r['auroc_mean']:.3f}, median {r['auroc_median']:.3f}, "
                f"{r['n_guides_skipped']} skipped; {hits}."
            )
        t = tests[(tests["model"] == model) & (tests["metric"] == "auroc")]
        for _, r in t.iterrows():
            if r["n"] == 0:
                continue
            p = "no test" if pd.isna(r["p_value"]) else f"Wilcoxon p = {r['p_value']:.2g}"
            ci = "" if pd.isna(r["ci_low"]) else f", 95% CI [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
            nested.append(
                f"gene AUROC `{r['variant']}` - `{r['reference']}` over {r['n']} genes: "
                f"mean {r['mean_diff']:+.3f}{ci} ({p})."
            )
        items.append(render.Bullets(nested))
    return items


def p_value_formats(df: pd.DataFrame) -> dict[str, str]:
    """Display formats of a report table: p-values (columns ending ``_p`` or ``p_value``) to 2
    significant digits (the other floats are shown to 3 decimals)."""
    return {str(c): "{:.2g}" for c in df.columns if str(c).endswith("_p") or str(c).endswith("p_value")}


@dataclass(frozen=True)
class StudyLink:
    """A study page the report links to: its title, its one-line verdict and where it is."""

    title: str
    verdict: str
    page: str


def study_blocks(studies: Sequence[StudyLink], out_dir: Path) -> list[render.Block]:
    """One line per study: a link to its page (relative to the report's folder) and its verdict."""
    return [
        f"[{s.title}]({Path(os.path.relpath(Path(s.page).absolute(), out_dir.absolute())).as_posix()}): {s.verdict}"
        for s in studies
    ]


def write_report(
    out_dir: Path | str,
    rows: pd.DataFrame,
    guides: pd.DataFrame,
    genes: pd.DataFrame,
    map_df: pd.DataFrame | None = None,
    truth: pd.DataFrame | None = None,
    fit_report: Mapping[str, Any] | None = None,
    table1: pd.DataFrame | None = None,
    structural: pd.DataFrame | None = None,
    hits: pd.DataFrame | None = None,
    null: pd.DataFrame | None = None,
    lightgbm: Mapping[str, Any] | None = None,
    q_threshold: float = 0.05,
    seed: int = 0,
    title: str = "phenoica report",
    tables_dir: str = "tables",
    figures_dir: str = "figures",
    studies: Sequence[StudyLink] = (),
    extra: tuple[list[tuple[str, str, pd.DataFrame]], Mapping[str, tuple[Path, str]]] | None = None,
    pages: Sequence[render.Section] = (),
) -> dict[str, Path]:
    """Write every report file (atomically) and return them by name.

    ``out_dir/report.md`` and ``out_dir/index.html`` link to CSVs in ``out_dir/{tables_dir}``
    and PNGs in ``out_dir/{figures_dir}`` (empty names put everything in ``out_dir``).
    Always: table3, table4, variant_summary, paired_tests, classifier_cost, skips, skip_counts
    (.csv) and the figures of ``make_figures``. When ``guides`` carry hit calls (``q_value``):
    hit_counts and gene_hits; with ``hits`` (``phenoica.hits.hit_table``): the hit table and,
    with ``map_df``, readout_agreement; with ``null``: null_calibration; with ``truth``:
    truth_checks and (with calls) recall_fdr; with ``map_df``: map_summary; with
    ``lightgbm``: the parameters used; with ``fit_report``: transform_fit; with ``table1``
    (model-to-model alignment) and/or ``structural`` (factor recovery): those tables and the
    ``identifiability`` figure. ``studies`` (pages of the studies that exist) are linked near the
    top, each with its one-line verdict; ``pages`` (sections written elsewhere: the link to the
    interactive page, the hit gallery) follow them. The page goes through :mod:`phenoica.report.render`.
    """
    out_dir = Path(out_dir)
    rows, guides, genes = check_rows(rows), check_guides(guides), check_genes(genes)
    calls = has_calls(guides)
    tables: dict[str, pd.DataFrame] = {
        "variant_summary": variant_summary(guides, (q_threshold, 0.1) if q_threshold != 0.1 else (0.05, 0.1)),
        "table3": table3(genes, variant_widths(fit_report)),  # each variant's D (issue 21)
        "table4": table4(rows, variant_widths(fit_report)),
        "paired_tests": paired_tests(genes, seed=seed),
        "classifier_cost": classifier_cost(rows),
        "skips": skipped_rows(rows),
        "skip_counts": skip_counts(rows),
    }
    if calls:
        tables["hit_counts"] = H.hit_counts(guides, genes, tuple(sorted({q_threshold, 0.05, 0.1})))
        gene_cols = ["model", "variant", GENE, "n_guides", "n_guides_hit", "auroc", "p_value", "q_value", "hit"]
        tables["gene_hits"] = (
            genes[[c for c in gene_cols if c in genes.columns]]
            .sort_values(["model", "variant", "q_value"], kind="stable")
            .reset_index(drop=True)
        )
    if hits is not None and len(hits):
        tables["hits"] = hits.sort_values(["model", "variant", "q_value"], kind="stable").reset_index(drop=True)
        if map_df is not None and len(map_df):
            tables["readout_agreement"] = H.readout_agreement(hits)
    if null is not None and len(null):
        tables["null_calibration"] = null.copy()
    if map_df is not None and len(map_df):
        tables["map_summary"] = map_summary(map_df, q_threshold)
    if truth is not None:
        tables["truth_checks"] = truth_checks(guides, truth)
        tables.update(truth_recovery(guides, truth, structural, seed=seed))
        if calls:
            tables["recall_fdr"] = H.recall_fdr(guides, check_truth(truth), tuple(sorted({q_threshold, 0.05, 0.1})))
    if lightgbm is not None:
        tables["lightgbm_parameters"] = lightgbm_table(lightgbm)
    if fit_report is not None:
        tables["transform_fit"] = fit_report_table(fit_report)
    if table1 is not None and len(table1):
        tables["table1_alignment"] = table1_summary(table1)
    if structural is not None and len(structural):
        tables["structural"] = structural.copy()

    written: dict[str, Path] = {
        name: render.write_csv(df, out_dir / tables_dir / f"{name}.csv") for name, df in tables.items()
    }
    figures = make_figures(out_dir / figures_dir, guides, genes, truth=truth, q_threshold=q_threshold)
    if "table1_alignment" in tables or "structural" in tables:
        figures["identifiability"] = identifiability_figure(
            tables.get("table1_alignment"), tables.get("structural"), out_dir / figures_dir / "identifiability.png"
        )
    written.update(figures)

    def rel(path: Path) -> str:
        return path.relative_to(out_dir).as_posix()

    n_ok = int((rows["status"] == OK).sum())
    variants = ordered_variants(pd.concat([rows["variant"], guides["variant"], genes["variant"]]))
    intro = (
        f"Models: {', '.join(f'`{m}`' for m in sorted(set(guides['model']) | set(rows['model'])))}. "
        f"Variants: {', '.join(f'`{v}` ({variant_label(v)})' for v in variants)}. "
        f"Guide-folds: {n_ok} scored, {len(rows) - n_ok} skipped. "
        f"Real guides: {guides.loc[~guides['is_null_guide'], GUIDE].nunique()}; "
        f"genes: {genes[GENE].nunique()}; null pseudo-guides: "
        f"{guides.loc[guides['is_null_guide'], GUIDE].nunique()}."
    )
    sections: list[tuple[str, str, pd.DataFrame]] = []
    if calls:
        sections.append(
            (
                "Hit calls",
                (
                    f"A guide's p-value is its held-out AUROC against the AUROCs of the null pseudo-guides (whole control "
                    f"wells laid out like real guides, scored by the same classifier) of the same model and variant; "
                    f"q-values are Benjamini-Hochberg over guides. A gene's p-value combines its guides' (Cauchy "
                    f"combination, ACAT); `n_guides_hit` counts its guides with q < {q_threshold:g}."
                ),
                tables["hit_counts"],
            )
        )
        shown = tables.get("hits", pd.DataFrame())
        if len(shown):
            called = shown[shown["hit"] | shown["map_hit"]]
            sections.append(
                (
                    "Hit table (guides called by either readout)",
                    f"Every guide with both readouts is in `{rel(written['hits'])}`; "
                    f"`agreement` compares the classifier's call with the mAP readout's.",
                    called.head(200),
                )
            )
        sections.append(
            (
                "Gene calls",
                f"All genes: `{rel(written['gene_hits'])}`.",
                tables["gene_hits"][tables["gene_hits"]["hit"]].head(200),
            )
        )
    if "recall_fdr" in tables:
        sections.append(
            (
                "Hit calls against the simulated truth (demo)",
                "Recall of the guides (genes) with a true effect and the observed false discovery rate "
                "among the calls, at each q threshold. Reported as measured.",
                tables["recall_fdr"],
            )
        )
    if "null_calibration" in tables:
        sections.append(
            (
                "Null calibration",
                "The null per model and variant: pseudo-guides scored and skipped, their logit-AUROC fit, "
                "Shapiro-Wilk normality of the logit AUROCs, and the uniformity (Kolmogorov-Smirnov) of "
                "their leave-one-out p-values; see the QQ figure.",
                tables["null_calibration"],
            )
        )
    if "readout_agreement" in tables:
        sections.append(
            (
                "Agreement between the readouts",
                "Guides called by the classifier (AUROC q) and by phenotypic activity (mAP q), Cohen's "
                "kappa of the two calls and the Spearman correlation of AUROC with mAP.",
                tables["readout_agreement"],
            )
        )
    sections += [
        (
            "Variant summary",
            "Guide-level means per variant, the null's size and mean, and hits per q threshold.",
            tables["variant_summary"],
        ),
        (
            "Table 3: mean AUROC and sparsity per gene",
            "Gene scores are means over the gene's guides; the `mean` row averages the genes scored in every variant. "
            "`D_<variant>` is the number of features the variant's classifiers see; sparsity's scale depends on D, "
            "so compare it only between variants of equal D (`sparsity_note` flags rows where D differs).",
            tables["table3"],
        ),
        (
            "Table 4: concentration per variant",
            "Over scored guide-folds of real guides: AUROC(top-k features) / AUROC(rest) - 1; `k_features` is the "
            "top set as a count of the variant's D features (`d_note` flags models whose variants differ in D).",
            tables["table4"],
        ),
        (
            "Comparisons between variants (over genes)",
            "Effect size = mean gene-level difference (variant - reference) with a 95% percentile-bootstrap interval "
            "over genes; two-sided Wilcoxon signed-rank p; no multiple-testing correction.",
            tables["paired_tests"],
        ),
    ]
    if "truth_checks" in tables:
        sections.append(
            (
                "Checks against the simulated truth (demo)",
                "Reported as measured. Effect guides vs guides of genes without effect (one-sided "
                "Mann-Whitney); no-effect guides vs 0.5 (t-test) and vs the null pseudo-guides.",
                tables["truth_checks"],
            )
        )
    if "truth_recovery" in tables:
        sections += [
            (
                "Recovery of the simulated truth (demo)",
                "Probe R^2: held-out (5-fold) ridge probe from the latents to the factors genes shift. Separation: "
                "mean AUROC of effect guides minus no-effect guides, 95% bootstrap interval over genes; "
                "auc_effect_vs_no_effect = P(effect guide > no-effect guide); one-sided Mann-Whitney p over guides.",
                tables["truth_recovery"],
            ),
            (
                "Variant contrasts against the truth (demo)",
                "delta_separation: change in effect - no-effect separation, variant minus reference (paired "
                "bootstrap over genes); delta_effect_auroc: mean paired difference over effect genes, its "
                "interval, Cohen's d_z and Wilcoxon p. Reported as measured.",
                tables["variant_contrasts"],
            ),
        ]
    if "map_summary" in tables:
        sections.append(
            (
                "Phenotypic activity (copairs mAP)",
                "Mean average precision of each guide's wells against the control wells of their plates; "
                "p-values from copairs' null, BH q-values over guides.",
                tables["map_summary"],
            )
        )
    sections.append(
        (
            "Classification cost",
            "LightGBM models trained per model and variant: 3 per scored guide-fold with concentration "
            "(full, top-k, rest), 1 otherwise; the null's pseudo-guides train 1. `null_share` is the null's "
            "share of the classification work.",
            tables["classifier_cost"],
        )
    )
    if "lightgbm_parameters" in tables:
        sections.append(
            (
                "LightGBM parameters used",
                "Nelson et al. (ICLR 2026) Table 6; every parameter not listed is at LightGBM's own default.",
                tables["lightgbm_parameters"],
            )
        )
    if "transform_fit" in tables:
        sections.append(("Transform fit", "", tables["transform_fit"]))
    if "table1_alignment" in tables:
        sections.append(
            (
                "Table 1: alignment between models",
                "Held-out mean l2 error of A's embeddings mapped onto B's, divided by the diameter of "
                "B's; ICA efficiency = (perm - ica) / (perm - rigid). Expected on a real pair: "
                "linear <= rigid <= ICA <= permutation.",
                tables["table1_alignment"],
            )
        )
    if "structural" in tables:
        sections.append(
            (
                "Structural identifiability: recovery of the simulated factors",
                "MCC = mean |correlation| after Hungarian matching; R^2 of a linear map latents -> "
                "factors; InfoM/InfoE/InfoC of Hsu et al. (read InfoM/InfoC only beside a high InfoE).",
                tables["structural"][[c for c in tables["structural"].columns if "r2_factor" not in str(c)]],
            )
        )
    sections.append(
        (
            "Skipped guide-folds",
            f"Counts by reason; every skipped row is in `{rel(written['skips'])}`.",
            tables["skip_counts"],
        )
    )
    captions = {
        "auroc_by_variant": "Guide AUROC per variant (null pseudo-guides as grey crosses)",
        "volcano": f"Hits per variant: AUROC above the null's median vs -log10 q (dashed: q = {q_threshold:g})",
        "null_qq": "Calibration: the pseudo-guides' leave-one-out p-values against the uniform",
        "paired_pca_ica_vs_pca": "Gene AUROC, PCA + ICA vs PCA",
        "sparsity_by_variant": "Classifier sparsity per variant",
        "concentration_by_variant": "Concentration per variant",
        "identifiability": "Identifiability: model-to-model alignment error and factor recovery per variant",
    }
    if extra is not None:  # issue 15 hook: sections and figures written by phenoica.report.gene_maps
        sections += extra[0]
        figures.update({name: path for name, (path, _) in extra[1].items()})
        captions.update({name: caption for name, (_, caption) in extra[1].items()})
    items = headline(tables["variant_summary"], tables["paired_tests"], q_threshold)
    page = render.Page(
        title, lead=[intro], sections=[render.Section("Headline", [render.Bullets(items) if items else "No scores."])]
    )
    if studies:
        page.sections.append(render.Section("Studies", study_blocks(studies, out_dir)))
    page.sections += list(pages)
    for heading, note, df in sections:
        page.sections.append(
            render.Section(
                heading,
                ([note] if note else []) + [render.Table(df, float_format="{:.3f}", formats=p_value_formats(df))],
            )
        )
    page.sections.append(
        render.Section("Figures", [render.Figure(rel(path), captions[name]) for name, path in figures.items()])
    )
    page.sections.append(
        render.Section(
            "Files", [render.Links([(p.name, rel(p)) for p in written.values() if p.suffix == ".csv"], label="Tables:")]
        )
    )
    pages = render.write_page(page, out_dir)
    written["report_md"], written["index_html"] = pages["report.md"], pages["index.html"]
    return written
