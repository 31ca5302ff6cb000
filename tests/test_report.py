"""Tests of the report stage (phenoica.report._summaries tables, phenoica.report._figures, the report page) on small hand-made score tables with known answers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from phenoica.classify import ReadoutInputs
from phenoica.contract import GENE, GUIDE, SCORE_COLUMNS, SCORE_FLOAT_COLUMNS, SCORE_INT_COLUMNS, ScreenError
from phenoica.hits import _calls as hits
from phenoica.hits import _effects as effects
from phenoica.hits import _readouts as readouts
from phenoica.hits import _screen_calls as screen
from phenoica.report import SECTIONS, ReportInputs, ReportLayout, write_report
from phenoica.report import _figures as figures
from phenoica.report import _summaries as summaries
from phenoica.report import _truth_tables as truth_tables
from phenoica.report._checks import check_rows
from phenoica.report._inputs import StudyLink
from tests.report_fixtures import report_options

VARIANTS = ("base", "pca", "pca_ica", "pca_rand")


def make_rows(auroc, variants=VARIANTS, n_genes=8, guides_per_gene=2, n_null=5, folds=(0, 1), model="mae"):
    """Guide-fold rows; ``auroc(variant, gene_index, guide_index, fold, is_null)`` gives each score.

    Sparsity = auroc / 2, concentration = auroc - 0.5 and distance_sd = 10 * (auroc - 0.5) so every
    metric has a known value.
    """
    records = []
    for variant in variants:
        guides = [(f"G{g}", f"G{g}_{s}", False, g, s) for g in range(n_genes) for s in range(guides_per_gene)]
        guides += [("NULL", f"null_{k}", True, -1, k) for k in range(n_null)]
        for gene, guide, is_null, gi, si in guides:
            for fold in folds:
                a = auroc(variant, gi, si, fold, is_null)
                records.append(
                    {
                        "model": model,
                        "variant": variant,
                        GENE: gene,
                        GUIDE: guide,
                        "is_null_guide": is_null,
                        "fold": fold,
                        "n_train_pos": 12,
                        "n_train_neg": 90,
                        "n_test_pos": 4,
                        "n_test_neg": 30,
                        "auroc": a,
                        "distance_sd": 10 * (a - 0.5),
                        "distance_se": 0.5,
                        "sparsity": a / 2,
                        "concentration": a - 0.5,
                        "auroc_top": a,
                        "auroc_rest": 0.5,
                        "status": "ok",
                        "reason": "",
                    }
                )
    return pd.DataFrame.from_records(records)


def aggregate(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Guide and gene tables as the classification stage defines them (means over ok folds)."""
    ok = rows[rows["status"] == "ok"]
    keys = ["model", "variant", GENE, GUIDE, "is_null_guide"]
    guides = ok.groupby(keys, as_index=False).agg(
        n_folds_ok=("fold", "size"),
        auroc=("auroc", "mean"),
        sparsity=("sparsity", "mean"),
        concentration=("concentration", "mean"),
    )
    guides = guides.merge(effects.guide_distances(ok), on=keys, how="left")
    real = guides[~guides["is_null_guide"]]
    genes = real.groupby(["model", "variant", GENE], as_index=False).agg(
        n_guides=(GUIDE, "size"),
        auroc=("auroc", "mean"),
        sparsity=("sparsity", "mean"),
        concentration=("concentration", "mean"),
    )
    genes = genes.merge(effects.gene_distances(ok), on=["model", "variant", GENE], how="left")
    return guides, genes


def ica_gain(variant, gi, si, fold, is_null):
    """Base 0.60 + 0.01 * gene; pca +0.02; pca_ica +0.05 over pca; pca_rand = pca. Nulls ~0.5."""
    if is_null:
        return 0.45 + 0.02 * si
    a = 0.60 + 0.01 * gi + 0.002 * si
    return a + {"base": 0.0, "pca": 0.02, "pca_ica": 0.07, "pca_rand": 0.02}[variant]


def gene_table(values: dict[str, list[float]], model: str = "mae") -> pd.DataFrame:
    records = []
    for variant, aurocs in values.items():
        for i, a in enumerate(aurocs):
            records.append(
                {
                    "model": model,
                    "variant": variant,
                    GENE: f"G{i}",
                    "n_guides": 3,
                    "auroc": a,
                    "distance_sd": 10 * (a - 0.5),
                    "distance_sd_low": 10 * (a - 0.5) - 1,
                    "distance_sd_high": 10 * (a - 0.5) + 1,
                    "sparsity": 0.1 * i,
                    "concentration": 0.2,
                }
            )
    return pd.DataFrame.from_records(records)


def test_table3_known_means_and_complete_cases():
    genes = gene_table({"base": [0.6, 0.7, 0.8], "pca_ica": [0.7, 0.8, 0.9], "pca": [0.65, 0.75, math.nan]})
    t3 = summaries.table3(genes)
    assert list(t3[GENE]) == ["G0", "G1", "G2", "mean"]
    assert [c for c in t3.columns if c.startswith("auroc_")] == ["auroc_base", "auroc_pca", "auroc_pca_ica"]
    assert "auroc_pca_rand" not in t3
    mean = t3.set_index(GENE).loc["mean"]
    # G2 lacks pca, so the mean row averages G0 and G1 only (complete cases).
    assert mean["auroc_base"] == pytest.approx(0.65)
    assert mean["auroc_pca"] == pytest.approx(0.70)
    assert mean["auroc_pca_ica"] == pytest.approx(0.75)
    assert mean["sparsity_pca_ica"] == pytest.approx(0.1)  # sparsity is complete for all three genes
    assert t3.set_index(GENE).loc["G1", "auroc_pca_ica"] == pytest.approx(0.8)
    assert pd.isna(mean["n_guides"]) and t3.set_index(GENE).loc["G0", "n_guides"] == 3


def test_table3_one_block_per_model():
    genes = pd.concat([gene_table({"pca": [0.6, 0.7]}, "a"), gene_table({"pca": [0.8, 0.9]}, "b")])
    t3 = summaries.table3(genes)
    assert list(t3["model"]) == ["a"] * 3 + ["b"] * 3
    means = t3[t3[GENE] == "mean"].set_index("model")["auroc_pca"]
    assert means["a"] == pytest.approx(0.65) and means["b"] == pytest.approx(0.85)


def test_table4_mean_sd_excludes_nulls_and_skips():
    rows = make_rows(ica_gain, variants=("pca", "pca_ica"), n_genes=2, guides_per_gene=1, n_null=2, folds=(0,))
    rows.loc[rows[GUIDE] == "G1_0", "status"] = "skipped"
    rows.loc[rows[GUIDE] == "G1_0", ["auroc", "concentration"]] = math.nan
    t4 = summaries.table4(rows).set_index("variant")
    # Only G0_0 is an ok real guide-fold: concentration = auroc - 0.5.
    assert list(t4.index) == ["pca", "pca_ica"]
    assert t4.loc["pca", "concentration_mean"] == pytest.approx(0.62 - 0.5)
    assert t4.loc["pca_ica", "concentration_mean"] == pytest.approx(0.67 - 0.5)
    assert (t4["n"] == 1).all() and t4["concentration_sd"].isna().all()

    rows = make_rows(ica_gain, variants=("pca",), n_genes=3, guides_per_gene=1, n_null=0, folds=(0,))
    t4 = summaries.table4(rows)
    conc = np.array([0.62, 0.63, 0.64]) - 0.5
    assert t4.loc[0, "concentration_sd"] == pytest.approx(np.std(conc, ddof=1))
    assert t4.loc[0, "n"] == 3


def test_variant_summary_counts_bh_hits_against_the_null():
    null = [0.40, 0.45, 0.50, 0.55, 0.60, 0.48, 0.52, 0.47, 0.53, 0.50] * 10  # 100: p reaches 1/101
    real = [0.30, 0.58, 0.60, 0.90, 0.95]
    records = [
        {
            "model": "m",
            "variant": "pca_ica",
            GENE: "NULL",
            GUIDE: f"n{i}",
            "is_null_guide": True,
            "n_folds_ok": 2,
            "auroc": a,
            "sparsity": 0.1,
            "concentration": 0.1,
        }
        for i, a in enumerate(null)
    ]
    records += [
        {
            "model": "m",
            "variant": "pca_ica",
            GENE: f"G{i}",
            GUIDE: f"g{i}",
            "is_null_guide": False,
            "n_folds_ok": 2,
            "auroc": a,
            "sparsity": 0.2,
            "concentration": 0.3,
        }
        for i, a in enumerate(real)
    ]
    records.append(
        {
            "model": "m",
            "variant": "pca_ica",
            GENE: "G9",
            GUIDE: "g9",
            "is_null_guide": False,
            "n_folds_ok": 0,
            "auroc": math.nan,
            "sparsity": math.nan,
            "concentration": math.nan,
        }
    )
    table = pd.DataFrame.from_records(records).assign(distance_sd=1.0, distance_sd_low=0.0, distance_sd_high=2.0)
    calls = hits.call_guides(table, "parametric", 0.05)
    s = summaries.variant_summary(calls).iloc[0]
    q = calls.loc[~calls["is_null_guide"], "q_value"]
    assert s["hits_q<0.05"] == (q < 0.05).sum() == 2  # the two strong guides
    assert s["hits_q<0.1"] == (q < 0.1).sum()
    assert s["null_auroc_mean"] == pytest.approx(np.mean(null)) and s["n_null_guides"] == 100
    assert s["n_guides_scored"] == 5 and s["n_guides_skipped"] == 1
    assert s["auroc_mean"] == pytest.approx(np.mean(real)) and s["auroc_median"] == pytest.approx(0.60)
    assert s["sparsity_mean"] == pytest.approx(0.2) and s["concentration_mean"] == pytest.approx(0.3)


def test_variant_summary_without_null_makes_no_hit_calls():
    rows = make_rows(ica_gain, variants=("base",), n_genes=2, n_null=0)
    guides, _ = aggregate(rows)
    s = summaries.variant_summary(guides).iloc[0]
    assert s["n_null_guides"] == 0 and pd.isna(s["hits_q<0.05"]) and pd.isna(s["hits_q<0.1"])


def test_paired_tests_known_delta_and_sign_flip():
    pca = [0.60, 0.62, 0.65, 0.70, 0.71, 0.75, 0.80, 0.66]
    genes = gene_table({"pca": pca, "pca_ica": [a + 0.03 for a in pca], "base": pca[:4]})
    t = summaries.paired_tests(genes, metrics=("auroc",)).set_index(["variant", "reference"])
    r = t.loc[("pca_ica", "pca")]
    assert r["n"] == 8
    assert r["median_diff"] == pytest.approx(0.03) and r["mean_diff"] == pytest.approx(0.03)
    assert r["p_value"] < 0.05 and r["statistic"] == 0.0
    assert r["ci_low"] == pytest.approx(0.03) and r["ci_high"] == pytest.approx(0.03)  # every gene gains 0.03
    # pca_rand absent: reported, not tested.
    assert t.loc[("pca_ica", "pca_rand"), "n"] == 0 and "not scored" in t.loc[("pca_ica", "pca_rand"), "note"]
    # base has 4 genes only: below min_pairs.
    assert t.loc[("pca", "base"), "n"] == 4 and math.isnan(t.loc[("pca", "base"), "p_value"])
    assert "fewer than 5" in t.loc[("pca", "base"), "note"]
    # Swapping the comparison negates the differences and leaves the test unchanged.
    flip = summaries.paired_tests(genes, pairs=[("pca", "pca_ica")], metrics=("auroc",)).iloc[0]
    assert flip["mean_diff"] == pytest.approx(-0.03) and flip["p_value"] == pytest.approx(r["p_value"])


def test_paired_tests_no_difference():
    genes = gene_table({"pca": [0.6, 0.7, 0.8, 0.65, 0.75, 0.7], "pca_ica": [0.6, 0.7, 0.8, 0.65, 0.75, 0.7]})
    r = summaries.paired_tests(genes, pairs=[("pca_ica", "pca")], metrics=("auroc",)).iloc[0]
    assert r["p_value"] == 1.0 and r["median_diff"] == 0.0 and "zero" in r["note"]
    mixed = gene_table({"pca": [0.6, 0.7, 0.8, 0.65, 0.75, 0.7], "pca_ica": [0.61, 0.69, 0.82, 0.63, 0.76, 0.69]})
    r = summaries.paired_tests(mixed, pairs=[("pca_ica", "pca")], metrics=("auroc",)).iloc[0]
    assert r["p_value"] > 0.5
    assert r["ci_low"] < 0 < r["ci_high"] and r["ci_low"] <= r["mean_diff"] <= r["ci_high"]


def truth_for(n_genes=8, guides_per_gene=2, null_genes=(5, 6, 7)):
    records = []
    for g in range(n_genes):
        for s in range(guides_per_gene):
            effect = g not in null_genes
            records.append(
                {
                    GENE: f"G{g}",
                    GUIDE: f"G{g}_{s}",
                    "Metadata_PertType": "perturbation",
                    "has_effect": effect,
                    "efficacy": 0.4 + 0.1 * g + 0.05 * s if effect else 0.0,
                    "affected_factors": "f0,f1" if effect else "",
                }
            )
    return pd.DataFrame.from_records(records)


def test_truth_checks_detects_effect():
    def score(variant, gi, si, fold, is_null):
        if is_null or gi >= 5:
            return 0.42 + 0.01 * si + 0.005 * gi * (not is_null)
        return 0.6 + 0.03 * gi + 0.01 * si  # increases with efficacy

    rows = make_rows(score, variants=("pca", "pca_ica"))
    guides, _ = aggregate(rows)
    tc = truth_tables.truth_checks(guides, truth_for()).set_index("variant")
    r = tc.loc["pca_ica"]
    assert r["n_effect"] == 10 and r["n_no_effect"] == 6
    assert r["auroc_effect_mean"] > r["auroc_no_effect_mean"]
    assert r["mannwhitney_p"] < 0.01 and bool(r["effect_gt_no_effect"]) is True
    assert r["efficacy_spearman_rho"] == pytest.approx(1.0)
    assert r["auroc_no_effect_mean"] == pytest.approx(
        np.mean([0.42 + 0.01 * s + 0.005 * g for g in (5, 6, 7) for s in (0, 1)])
    )
    assert r["no_effect_vs_half_p"] < 0.05  # they sit below 0.5 here, and the check says so


def test_truth_checks_no_difference_when_groups_match():
    # Effect guides and no-effect guides get the same multiset of AUROCs.
    values = [0.48, 0.52, 0.50, 0.55, 0.45, 0.51]

    def score(variant, gi, si, fold, is_null):
        return 0.5 if is_null else values[(gi % 3) * 2 + si]

    rows = make_rows(score, variants=("pca_ica",), n_genes=6)
    guides, _ = aggregate(rows)
    r = truth_tables.truth_checks(guides, truth_for(n_genes=6, null_genes=(3, 4, 5))).iloc[0]
    assert r["effect_minus_no_effect"] == pytest.approx(0.0)
    assert r["mannwhitney_p"] > 0.4 and bool(r["effect_gt_no_effect"]) is False
    assert r["no_effect_vs_half_p"] > 0.5


def test_truth_checks_missing_truth_row_is_named():
    rows = make_rows(ica_gain, variants=("pca",), n_genes=3)
    guides, _ = aggregate(rows)
    truth = truth_for(n_genes=3, null_genes=(2,))
    with pytest.raises(ScreenError, match="G2_1"):
        truth_tables.truth_checks(guides, truth[truth[GUIDE] != "G2_1"])


def test_bad_inputs_name_the_problem():
    rows = make_rows(ica_gain, variants=("pca",), n_genes=2)
    with pytest.raises(ScreenError, match="missing column.*auroc_top"):
        summaries.table4(rows.drop(columns="auroc_top"))
    bad = rows.copy()
    bad.loc[3, "status"] = "done"
    with pytest.raises(ScreenError, match="status.*row\\(s\\) \\[3\\]"):
        summaries.table4(bad)
    guides, genes = aggregate(rows)
    with pytest.raises(ScreenError, match="duplicate"):
        summaries.table3(pd.concat([genes, genes.iloc[:1]]))
    bad = guides.copy()
    bad["is_null_guide"] = "maybe"
    with pytest.raises(ScreenError, match="is_null_guide"):
        summaries.variant_summary(bad)
    with pytest.raises(ScreenError, match="auroc.*numeric"):
        summaries.paired_tests(genes.assign(auroc="high"))


def test_guide_fold_rows_are_checked_against_the_one_score_table():
    rows = make_rows(ica_gain, variants=("pca",), n_genes=2)
    assert tuple(rows.columns) == SCORE_COLUMNS  # the fixture writes what classify writes
    assert set(SCORE_INT_COLUMNS) | set(SCORE_FLOAT_COLUMNS) < set(SCORE_COLUMNS)
    checked = check_rows(rows.assign(n_test_pos="4", auroc_rest="0.5"))
    assert checked["n_test_pos"].tolist() == [4] * len(rows) and checked["auroc_rest"].tolist() == [0.5] * len(rows)
    for col in (*SCORE_INT_COLUMNS, *SCORE_FLOAT_COLUMNS):
        with pytest.raises(ScreenError, match=f"{col}.*numeric"):
            check_rows(rows.assign(**{col: "many"}))


def test_skips_counted_by_reason():
    rows = make_rows(ica_gain, variants=("pca", "pca_ica"), n_genes=3, n_null=1)
    few = rows[GUIDE].isin(["G0_0", "G0_1"]) & (rows["fold"] == 0)
    rows.loc[few, ["status", "reason"]] = ["skipped", "too few training samples"]
    one = (rows[GUIDE] == "G2_0") & (rows["variant"] == "pca")
    rows.loc[one, ["status", "reason"]] = ["skipped", "no test positives"]
    skipped = summaries.skipped_rows(rows)
    assert len(skipped) == 4 + 2
    assert set(skipped.loc[skipped["reason"] == "too few training samples", "n_same_reason"]) == {4}
    counts = summaries.skip_counts(rows).set_index(["variant", "reason"])
    assert counts.loc[("pca", "too few training samples"), "n_rows"] == 2
    assert counts.loc[("pca", "no test positives"), "n_guides"] == 1
    assert summaries.skip_counts(make_rows(ica_gain, variants=("pca",), n_genes=1)).empty


def test_fit_report_one_row_per_model_and_variant():
    fit = {
        "mae": {
            "base": {"variant": "base", "steps": "identity"},
            "pca": {"variant": "pca", "n_components": 24, "batches": [f"b{i}" for i in range(64)]},
            "pca_ica": {"variant": "pca_ica", "n_components": 24, "ica": {"converged": True, "n_iter": 37}},
        }
    }
    t = summaries.fit_report_table(fit).set_index(["model", "variant"])
    assert list(t.index) == [("mae", "base"), ("mae", "pca"), ("mae", "pca_ica")]
    assert t.loc[("mae", "pca"), "n_components"] == "24"
    assert t.loc[("mae", "pca"), "batches"].startswith("64 values")
    assert t.loc[("mae", "pca_ica"), "ica.converged"] == "True" and t.loc[("mae", "base"), "ica.n_iter"] == ""
    other = summaries.fit_report_table({"whiten": {"eps": 1e-6, "rule": "parallel"}}).set_index("setting")["value"]
    assert other["whiten.eps"] == "1e-06" and other["whiten.rule"] == "parallel"


def test_figures_are_real_pngs_with_missing_variants(tmp_path):
    rows = make_rows(ica_gain, variants=("base", "pca_ica"), n_genes=4)
    guides, genes = aggregate(rows)
    figs = figures.make_figures(tmp_path, guides, genes)
    assert set(figs) == {
        "auroc_by_variant",
        "volcano",
        "null_qq",
        "paired_pca_ica_vs_pca",
        "sparsity_by_variant",
        "concentration_by_variant",
    }
    for path in figs.values():
        assert path.exists() and path.stat().st_size > 0
        with Image.open(path) as im:
            assert im.format == "PNG" and im.size[0] > 200 and im.size[1] > 200


def test_auroc_figure_colours_guides_by_true_effect(tmp_path):
    """With the truth, guides of genes without an effect are drawn orange; without it, no orange."""
    guides, genes = aggregate(make_rows(ica_gain))

    def orange_pixels(path: Path) -> int:
        with Image.open(path) as im:
            rgb = np.asarray(im.convert("RGB")).astype(int)
        return int((np.abs(rgb - (255, 127, 14)).sum(axis=2) < 60).sum())  # tab:orange, allowing alpha blending

    plain = figures.make_figures(tmp_path / "plain", guides, genes)["auroc_by_variant"]
    coloured = figures.make_figures(tmp_path / "truth", guides, genes, truth=truth_for())["auroc_by_variant"]
    assert orange_pixels(plain) == 0 and orange_pixels(coloured) > 50
    no_null_gene = truth_for(null_genes=())  # every gene has an effect: nothing orange but the legend
    legend_only = figures.make_figures(tmp_path / "none", guides, genes, truth=no_null_gene)["auroc_by_variant"]
    assert 0 < orange_pixels(legend_only) < orange_pixels(coloured)


def test_write_report_full(tmp_path):
    rows = make_rows(ica_gain)
    rows.loc[(rows[GUIDE] == "G3_1") & (rows["fold"] == 1), ["status", "reason", "auroc"]] = [
        "skipped",
        "too few test samples",
        math.nan,
    ]
    guides, genes = aggregate(rows)
    guides = hits.call_guides(guides, "parametric", 0.05)
    gene_calls = hits.call_genes(guides)
    genes = genes.merge(
        gene_calls[["model", "variant", GENE, "n_guides_hit", "p_value", "p_beyond_null", "q_value", "hit"]],
        on=["model", "variant", GENE],
    )
    real = guides[~guides["is_null_guide"]]
    map_df = real[["model", "variant", GENE, GUIDE]].assign(
        n_wells=8, mean_average_precision=0.3, map_p_value=0.01, map_q_value=0.02
    )
    hit_table = readouts.hit_table(ReadoutInputs(guides, map_df))
    null = hits.null_summary(guides)
    fit = {
        "mae": {
            "pca": {"variant": "pca", "n_components": 24},
            "pca_ica": {"variant": "pca_ica", "n_components": 24, "ica": {"converged": True}},
        }
    }
    out = tmp_path / "report"
    inputs = ReportInputs(
        rows,
        guides,
        genes,
        maps=map_df,
        truth=truth_for(),
        fit_reports=fit,
        hits=hit_table,
        null=null,
    )
    options = report_options(classify={"lightgbm": {"max_depth": 4}})
    written = write_report(out, inputs, options, layout=ReportLayout(title="demo <screen>"))
    expected = {
        "table3",
        "table4",
        "variant_summary",
        "paired_tests",
        "classifier_cost",
        "skips",
        "skip_counts",
        "map_summary",
        "hit_counts",
        "gene_hits",
        "hits",
        "readout_agreement",
        "ranking",
        "null_calibration",
        "recall_fdr",
        "lightgbm_parameters",
        "truth_checks",
        "truth_recovery",
        "variant_contrasts",
        "transform_fit",
        "auroc_by_variant",
        "volcano",
        "null_qq",
        "paired_pca_ica_vs_pca",
        "sparsity_by_variant",
        "concentration_by_variant",
        "report_md",
        "index_html",
    }
    assert set(written) == expected
    for name, path in written.items():
        folder = out / "tables" if path.suffix == ".csv" else out / "figures" if path.suffix == ".png" else out
        assert path.parent == folder and path.exists() and path.stat().st_size > 0
    on_disk = sorted(p for p in out.rglob("*") if p.is_file())
    assert on_disk == sorted(written.values())  # no temporaries left behind

    md = written["report_md"].read_text()
    for variant in VARIANTS:
        assert f"`{variant}`" in md and f"auroc_{variant}" in md
    assert "![" in md and "(figures/paired_pca_ica_vs_pca.png)" in md and "(tables/table3.csv)" in md
    assert "too few test samples" in md and "ica.converged" in md
    page = written["index_html"].read_text()
    assert "demo &lt;screen&gt;" in page and "<screen>" not in page
    for name in (
        "auroc_by_variant",
        "volcano",
        "null_qq",
        "paired_pca_ica_vs_pca",
        "sparsity_by_variant",
        "concentration_by_variant",
    ):
        assert f'<img src="figures/{name}.png"' in page
    assert "Hit calls" in md and "guides are hits at q < 0.05" in md

    t3 = pd.read_csv(written["table3"])
    mean = t3.set_index(GENE).loc["mean"]
    assert mean["auroc_pca_ica"] - mean["auroc_pca"] == pytest.approx(0.05)
    tests = pd.read_csv(written["paired_tests"])
    r = tests[(tests["variant"] == "pca_ica") & (tests["reference"] == "pca") & (tests["metric"] == "auroc")].iloc[0]
    assert r["n"] == 8 and r["median_diff"] == pytest.approx(0.05) and r["p_value"] < 0.05
    assert r["ci_low"] == pytest.approx(0.05) and r["ci_high"] == pytest.approx(0.05)
    maps = pd.read_csv(written["map_summary"]).set_index("variant")
    assert (maps["n_guides"] == 16).all() and (maps["fraction_active"] == 1.0).all()
    cost = pd.read_csv(written["classifier_cost"]).set_index("variant")
    # per variant: 16 real guides x 2 folds x 3 models (one guide-fold skipped) and 5 x 2 pseudo-guide models
    assert (cost["models_null"] == 10).all() and cost.loc["pca", "models_real_guides"] == 31 * 3
    assert cost.loc["pca", "null_share"] == pytest.approx(10 / (93 + 10))
    recall = pd.read_csv(written["recall_fdr"])
    assert set(recall["level"]) == {"guide", "gene"} and recall["recall"].between(0, 1).all()
    lgbm = pd.read_csv(written["lightgbm_parameters"]).set_index("parameter")
    assert lgbm.loc["learning_rate", "source"] == "Table 6" and lgbm.loc["learning_rate", "value"] == "0.05"
    assert lgbm.loc["max_depth", "source"] == "override" and lgbm.loc["max_depth", "value"] == "4"
    assert not {"seed", "num_threads", "verbosity"} & set(lgbm.index)  # neither the seed nor run-time keys
    skips = pd.read_csv(written["skips"])
    assert len(skips) == 4 and set(skips[GUIDE]) == {"G3_1"}


def test_write_report_with_only_base(tmp_path):
    rows = make_rows(ica_gain, variants=("base",), n_genes=3, n_null=0)
    guides, genes = aggregate(rows)
    layout = ReportLayout(tables_dir="", figures_dir="")
    written = write_report(tmp_path, ReportInputs(rows, guides, genes), report_options(), layout=layout)
    assert "truth_checks" not in written and "map_summary" not in written
    assert all(p.parent == tmp_path for p in written.values())
    assert "(table3.csv)" in written["report_md"].read_text()
    md = written["report_md"].read_text()
    assert "`base`" in md and "no hit calls" in md
    with Image.open(written["paired_pca_ica_vs_pca"]) as im:
        assert im.format == "PNG"
    assert not list(Path(tmp_path).glob(".*tmp-*"))


def test_the_identifiability_section_says_where_table1_is_when_a_run_has_one_model(tmp_path):
    """A run of one model (the default demo) has the factors' recovery but no Table 1: the section
    says why and how to add the second seed; a run with Table 1 shows it without that line."""
    rows = make_rows(ica_gain, variants=("base",), n_genes=3, n_null=0)
    guides, genes = aggregate(rows)
    structural = pd.DataFrame(
        {"model": "mae", "variant": ["base", "pca"], "mcc": [0.4, 0.5], "infom": [0.3, 0.4], "infoe": [0.6, 0.7]}
    )
    layout = ReportLayout(tables_dir="", figures_dir="")
    one = write_report(
        tmp_path / "one", ReportInputs(rows, guides, genes, structural=structural), report_options(), layout=layout
    )
    md = one["report_md"].read_text()
    assert "recovery of the simulated factors" in md and "No Table 1 in this run" in md
    assert "config/second_seed.yaml" in md and "Table 1: alignment between models" not in md
    table1 = pd.DataFrame(
        {
            "variant": ["base", "pca"],
            "model_a": "mae",
            "model_b": "mae_seed1",
            **{m: [0.5, 0.4] for m in ("perm", "rigid", "linear", "ica")},
        }
    )
    two = write_report(
        tmp_path / "two",
        ReportInputs(rows, guides, genes, structural=structural, table1=table1),
        report_options(),
        layout=layout,
    )
    md = two["report_md"].read_text()
    assert "Table 1: alignment between models" in md and "No Table 1 in this run" not in md


def test_write_report_when_everything_was_skipped(tmp_path):
    rows = make_rows(ica_gain, variants=("pca",), n_genes=2, n_null=1)
    rows[["status", "reason"]] = ["skipped", "too few training samples"]
    rows[["auroc", "concentration"]] = math.nan
    guides, genes = aggregate(rows)
    written = write_report(tmp_path, ReportInputs(rows, guides, genes), report_options())
    assert "No scores." in written["report_md"].read_text()
    assert summaries.skip_counts(rows).loc[0, "n_rows"] == len(rows)
    assert summaries.table4(rows).loc[0, "n"] == 0


def test_write_report_links_the_study_pages_with_their_verdicts(tmp_path):
    """The main page links each study page that exists (path relative to the report) with its
    one-line verdict; the tables do not change."""
    from phenoica.report import _render as render
    from phenoica.workflow import _dag as workflow

    rows = make_rows(ica_gain, variants=("pca", "pca_ica"), n_genes=3)
    guides, genes = aggregate(rows)
    results = tmp_path / "results"
    assert workflow.study_pages(str(results)) == []
    study = results / "studies" / "bilipschitz"
    study.mkdir(parents=True)
    (study / "index.html").write_text("<html></html>")
    render.write_verdict(study, "Bi-Lipschitz <study>", "digits: rho +0.40 [+0.10, +0.70].")
    pages = workflow.study_pages(str(results))
    assert pages == [
        {
            "title": "Bi-Lipschitz <study>",
            "verdict": "digits: rho +0.40 [+0.10, +0.70].",
            "page": str(study / "index.html"),
        }
    ]
    plain = write_report(tmp_path / "plain", ReportInputs(rows, guides, genes), report_options())
    linked = write_report(
        results / "report",
        ReportInputs(rows, guides, genes, studies=[StudyLink(**p) for p in pages]),
        report_options(),
    )
    md = linked["report_md"].read_text()
    assert "## Studies" in md and "[Bi-Lipschitz \\<study>](../studies/bilipschitz/index.html): digits: rho" in md
    assert "## Studies" not in plain["report_md"].read_text()
    page = linked["index_html"].read_text()
    assert '<a href="../studies/bilipschitz/index.html">Bi-Lipschitz &lt;study&gt;</a>: digits: rho +0.40' in page
    for name, path in plain.items():
        if path.suffix == ".csv":
            assert path.read_bytes() == linked[name].read_bytes(), name


def test_the_report_reruns_for_what_it_reads_and_not_for_run_time_keys():
    """The report rule's params are its options' repr: LightGBM's threads and log level (run time)
    leave it alone; a gallery, hit-call or annotation setting changes it."""
    base = repr(report_options())
    assert repr(report_options(classify={"lightgbm": {"num_threads": 4, "verbosity": 1}})) == base
    assert repr(report_options(classify={"num_boost_round": 7})) == base  # not read by the report
    for changed in ({"gallery": {"tile_px": 32}}, {"hits": {"q_threshold": 0.1}}, {"biomap": {"builtin_corum": False}}):
        assert repr(report_options(**changed)) != base, changed
    assert report_options(classify={"lightgbm": {"reg_alpha": 2.0}}).lightgbm["lambda_l1"] == 2.0  # canonical names


def test_sections_declare_every_input_of_the_report_rule():
    """The report is a list of sections, each declaring the ReportInputs fields it reads; every
    input of rule report is read by some section (the field names are the rule's input names)."""
    import re

    text = (Path(__file__).parents[1] / "rules" / "report.smk").read_text()
    block = text[text.index("    input:") : text.index("    output:")]
    rule_inputs = set(re.findall(r"^        (\w+)=", block, re.M))
    declared = {name for section in SECTIONS for name in section.inputs}
    assert rule_inputs and rule_inputs <= declared, sorted(rule_inputs - declared)
    assert len({s.name for s in SECTIONS}) == len(SECTIONS)
    with pytest.raises(ValueError, match="not fields of ReportInputs"):
        type(SECTIONS[0])("bad", ("guide_folds", "no_such_table"), SECTIONS[0].build)


def test_the_report_page_lists_the_sections_as_declared():
    """docs/report.md's table of sections is SECTIONS: the same names, order and inputs."""
    import re

    text = (Path(__file__).parents[1] / "docs" / "report.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| ([\w, ]+) \|", text, re.M)
    assert rows == [(s.name, ", ".join(s.inputs)) for s in SECTIONS]


def saturated_calls(n_null: int = 100) -> dict[str, pd.DataFrame]:
    """The hit calls of a screen whose guides of genes G3..G7 all score AUROC 1.000 in every fold,
    at held-out distances that grow with the gene's index (G7 farthest), beside a mAP readout."""

    def auroc(variant, gi, si, fold, is_null):
        return 0.45 + 0.1 * si / n_null + 0.005 * fold if is_null else (1.0 if gi >= 3 else 0.55 + 0.01 * gi)

    rows = make_rows(auroc, variants=("pca",), n_null=n_null)
    real = ~rows["is_null_guide"]
    gene_index = rows[GENE].str[1:].where(real, "0").astype(int)
    rows.loc[real, "distance_sd"] = (
        np.where(gene_index[real] >= 3, 3.0 * gene_index[real], 0.2) + rows.loc[real, "fold"]
    )
    guides = rows[real].drop_duplicates(GUIDE)
    maps = guides[["model", "variant", GENE, GUIDE]].assign(
        n_wells=8, mean_average_precision=0.5, map_p_value=0.5, map_q_value=0.6
    )
    return {**screen.screen_calls(rows, maps, "parametric", 0.05), "rows": rows, "maps": maps}


def test_report_ranks_saturated_hits_by_distance_and_reports_no_p_value_below_the_null(tmp_path):
    calls = saturated_calls()
    inputs = ReportInputs(
        calls["rows"], calls["guides"], calls["genes"], maps=calls["maps"], hits=calls["hits"], null=calls["null"]
    )
    written = write_report(tmp_path, inputs, report_options())
    md = written["report_md"].read_text()
    assert "**AUROC saturates**: 10 of 16 scored guides (62%) at 1.000, more than 10%" in md
    assert "so the held-out distance from the controls in control SDs" in md and "ranks the hits instead" in md
    assert "first: G7_0 (21.5 [" in md  # the farthest guide leads, with its interval over folds
    table = pd.read_csv(written["hits"])
    assert table[GUIDE].tolist()[:4] == ["G7_0", "G7_1", "G6_0", "G6_1"] and (table["ranked_by"] == "distance_sd").all()
    assert table["distance_sd"].is_monotonic_decreasing
    floor = float(calls["null"]["p_floor"].iloc[0])
    assert floor == pytest.approx(1 / 101)
    for name in ("hits", "gene_hits"):
        p = pd.read_csv(written[name])["p_value"].dropna()
        assert (p >= floor - 1e-12).all() and np.isclose(p, floor).any()
    assert calls["guides"]["p_tail"].min() < floor  # the tail reaches further: it is not what is reported
    assert f"10 guides lie beyond the null's reach and are reported as p < {floor:.2g}, its bound" in md
    assert "the calls stand without the tail beyond it" in md
    # a null of 20 reaches 1/21: BH over 16 guides calls none of the 10 (q = 16/21/10 > 0.05); the tail would
    small = saturated_calls(n_null=20)
    assert not small["hits"]["hit"].any() and small["null"]["n_tail_only_calls"].iloc[0] >= 10
    genes = pd.read_csv(written["gene_hits"])
    assert genes[GENE].tolist()[:2] == ["G7", "G6"] and genes["rank"].tolist()[:2] == [1, 2]


def test_headline_leads_with_the_map_readout_where_the_classifier_calls_nothing():
    from phenoica.report._headline import headline, readout_status

    calls = saturated_calls(n_null=0)  # no pseudo-guide: the classifier scores guides but cannot call
    maps = calls["maps"].assign(
        mean_average_precision=lambda d: d[GENE].str[1:].astype(float) / 10, map_p_value=0.001, map_q_value=0.002
    )
    out = screen.screen_calls(calls["rows"], maps, "parametric", 0.05)
    status = readout_status(out["hits"], out["null"])
    items = headline(summaries.variant_summary(out["guides"]), summaries.paired_tests(out["genes"]), 0.05, status)
    assert items[0].startswith("Model mae: **the mAP readout answers on this layout**; the classifier makes no hit")
    first = str(items[1])
    assert "mAP readout: 16/16 guides active at q < 0.05" in first and "ranked by the held-out distance" in first
    assert "first: G7_0 (21.5 [" in first  # the distance needs no null: it still ranks the mAP readout's calls
    assert "no classifier hit calls" in str(items[2:])  # the classifier comes after, with its reason


def test_tables_in_rank_order_put_unranked_rows_last():
    from phenoica.report._score_sections import in_rank_order

    table = pd.DataFrame(
        {
            "model": "m",
            "variant": ["b", "a", "a", "a"],
            "rank": pd.array([1, 2, None, 1], dtype="Int64"),
            "q_value": [0.1, 0.2, 0.01, 0.3],
        }
    )
    out = in_rank_order(table)
    assert out["variant"].tolist() == ["a", "a", "a", "b"] and out["rank"].tolist()[:2] == [1, 2]
    assert pd.isna(out["rank"].iloc[2])
    assert in_rank_order(table.drop(columns="rank"))["q_value"].tolist() == [0.01, 0.2, 0.3, 0.1]


def test_a_registered_readout_reaches_the_calls_the_door_and_the_report(tmp_path):
    """A readout is one registration: a small extra one (it calls the guides of gene G1) appears in
    the door's capacity count, the hit table with its own columns and agreement classes, the
    readouts' agreement, and the report's headline and hit table; unregistered, nothing is left."""
    from phenoica.classify import Readout, readout_capacity, register_readout, registered_readouts, unregister_readout
    from phenoica.classify._capacity import ReadoutCapacity
    from phenoica.contract import validate_config
    from phenoica.hits import agreement_classes, hit_table
    from tests.test_arrayed import _profiles

    def probe_table(inputs: ReadoutInputs) -> pd.DataFrame:
        real = inputs.guides[~inputs.guides["is_null_guide"].astype(bool)]
        p = np.where(real[GENE] == "G1", 1e-6, 0.5)
        return real[["model", "variant", GENE, GUIDE]].assign(probe_score=-np.log10(p), probe_p=p, probe_q=p * 2)

    probe = Readout(
        name="probe",
        label="probe",
        short="probe",
        statistic="probe_score",
        p_value="probe_p",
        q_value="probe_q",
        hit="probe_hit",
        columns=("probe_score", "probe_p", "probe_q", "probe_hit"),
        enabled=lambda config: True,
        capacity=lambda table, config, folds: ReadoutCapacity("probe", 3, 2, ["G/g"], reason="one guide lacks wells"),
        guide_table=probe_table,
    )
    before = registered_readouts()
    register_readout(probe)
    try:
        with pytest.raises(ValueError, match="registered twice"):
            register_readout(probe)
        assert [r.name for r in registered_readouts()] == ["classifier", "map", "probe"]
        assert agreement_classes(registered_readouts())[:2] == ("all", "classifier+map")
        assert "probe_only" in agreement_classes(registered_readouts())

        capacities, _, notes = readout_capacity(_profiles()[0], validate_config({}))
        assert [c.readout for c in capacities] == ["classifier", "map", "probe"]
        assert "readout probe: one guide lacks wells" in notes

        rows = make_rows(ica_gain)
        guides, genes = aggregate(rows)
        guides = hits.call_guides(guides, "parametric", 0.05)
        calls = hits.call_genes(guides)[["model", "variant", GENE, "n_guides_hit", "p_value", "q_value", "hit"]]
        genes = genes.merge(calls, on=["model", "variant", GENE])
        real = guides[~guides["is_null_guide"]]
        map_df = real[["model", "variant", GENE, GUIDE]].assign(
            n_wells=8, mean_average_precision=0.3, map_p_value=0.5, map_q_value=0.5
        )
        table = hit_table(ReadoutInputs(guides, map_df))
        assert {"probe_score", "probe_p", "probe_q", "probe_hit"} <= set(table.columns)
        assert set(table.loc[table["probe_hit"], GENE]) == {"G1"} and table["probe_hit"].sum() == 2 * len(VARIANTS)
        called_by_probe = table[table["probe_hit"]]
        assert set(called_by_probe["agreement"]) <= {"classifier+probe", "probe_only"}
        assert not table.loc[~table["probe_hit"], "agreement"].str.contains("probe").any()
        agreement = readouts.readout_agreement(table)
        assert {"kappa_auroc_map", "kappa_auroc_probe", "spearman_map_probe"} <= set(agreement.columns)
        assert (agreement[["probe_only", "classifier+probe"]].sum(axis=1) == 2).all()

        inputs = ReportInputs(rows, guides, genes, maps=map_df, hits=table, null=hits.null_summary(guides))
        written = write_report(tmp_path / "report", inputs, report_options())
        md = written["report_md"].read_text()
        assert "probe readout: 2/16 guides active at q < 0.05" in md
        assert "called by any readout" in md and "classifier, mAP and probe readouts" in md
        shown = pd.read_csv(written["hits"])
        assert shown["probe_hit"].sum() == 2 * len(VARIANTS)
    finally:
        unregister_readout("probe")
    assert registered_readouts() == before
    assert "probe_hit" not in hit_table(ReadoutInputs(guides, map_df)).columns
