"""Hit calls: null fits, p- and q-values, gene combination, readout agreement, truth checks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from phenoica.classify import ReadoutInputs
from phenoica.contract import GENE, GUIDE, ScreenError
from phenoica.hits import _calls as H
from phenoica.hits import _effects as E
from phenoica.hits import _readouts as R
from phenoica.hits import _screen_calls as S
from phenoica.hits import _truth as T
from phenoica.utils import acat, bh_qvalues, bootstrap_mean


def _expit(z):
    return 1.0 / (1.0 + np.exp(-z))


def guide_table(real_auroc, null_auroc, model="m", variant="pca", genes=None, distance=None) -> pd.DataFrame:
    """A guide summary table (``summarize_scores``' columns): real guides of ``real_auroc`` (held-out
    distances ``distance``, NaN when not given) and pseudo-guides of ``null_auroc`` (distance 0)."""
    real_auroc = np.asarray(real_auroc, dtype=float)
    distance = np.full(len(real_auroc), np.nan) if distance is None else np.asarray(distance, dtype=float)
    genes = genes if genes is not None else [f"G{i // 2:05d}" for i in range(len(real_auroc))]
    real = pd.DataFrame(
        {
            "model": model,
            "variant": variant,
            GENE: genes,
            GUIDE: [f"g{i:05d}" for i in range(len(real_auroc))],
            "is_null_guide": False,
            "n_folds_ok": 4,
            "auroc": real_auroc,
            "distance_sd": distance,
            "distance_sd_low": distance - 1.0,
            "distance_sd_high": distance + 1.0,
            "sparsity": 0.1,
            "concentration": 0.1,
        }
    )
    null = pd.DataFrame(
        {
            "model": model,
            "variant": variant,
            GENE: "null",
            GUIDE: [f"null_{i + 1:04d}" for i in range(len(null_auroc))],
            "is_null_guide": True,
            "n_folds_ok": 4,
            "auroc": np.asarray(null_auroc, dtype=float),
            "distance_sd": 0.0,
            "distance_sd_low": -1.0,
            "distance_sd_high": 1.0,
            "sparsity": 0.1,
            "concentration": np.nan,
        }
    )
    return pd.concat([real, null], ignore_index=True)


# ----------------------------------------------------------------------------- small statistics


def test_bh_matches_hand_computation_and_keeps_nan():
    p = np.array([0.01, 0.04, np.nan, 0.03, 0.5])
    q = bh_qvalues(p)
    # sorted finite p: 0.01, 0.03, 0.04, 0.5 (m = 4): q = min over k>=i of p_k m / k
    assert q[0] == pytest.approx(0.04) and q[3] == pytest.approx(0.04 * 4 / 3)
    assert q[1] == pytest.approx(0.04 * 4 / 3) and q[4] == pytest.approx(0.5) and math.isnan(q[2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bh_qvalues(np.array([0.2, 1.5]))


def test_acat_known_answers():
    assert acat(np.array([0.2])) == pytest.approx(0.2)
    assert acat(np.array([0.3, 0.3, 0.3])) == pytest.approx(0.3)  # equal p-values combine to themselves
    t = (math.tan((0.5 - 0.01) * math.pi) + math.tan((0.5 - 0.5) * math.pi)) / 2
    assert acat(np.array([0.01, 0.5, np.nan])) == pytest.approx(0.5 - math.atan(t) / math.pi)
    assert math.isnan(acat(np.array([np.nan])))
    # under the null, ACAT of independent uniforms is uniform
    rng = np.random.default_rng(0)
    combined = [acat(rng.uniform(size=3)) for _ in range(3000)]
    assert stats.kstest(combined, "uniform").pvalue > 0.01


def test_bootstrap_mean_interval_covers_and_is_seeded():
    x = np.random.default_rng(1).normal(0.3, 1.0, size=200)
    iv = bootstrap_mean(x, 0, "test")
    assert iv.low < x.mean() < iv.high and iv.estimate == pytest.approx(x.mean())
    assert bootstrap_mean(x, 0, "test") == iv and bootstrap_mean(x, 1, "test") != iv
    assert math.isnan(bootstrap_mean(np.array([1.0]), 0).low)
    assert bootstrap_mean(np.array([2.0, 2.0]), 0).low == 2.0


# ----------------------------------------------------------------------------- the null and p-values


@pytest.mark.parametrize("model", H.NULL_MODELS)
def test_guides_drawn_from_the_null_get_uniform_p_values(model):
    rng = np.random.default_rng(3)
    null = _expit(rng.normal(-0.1, 0.25, size=100))
    fit = H.NullFit(null, model)
    draws = _expit(rng.normal(-0.1, 0.25, size=5000))
    p = fit.p_values(draws)
    assert ((p > 0) & (p <= 1)).all()
    # marginally over many null fits the p-values are uniform; for one fit, close to it
    assert abs(np.mean(p < 0.05) - 0.05) < 0.03 and abs(np.mean(p < 0.5) - 0.5) < 0.1
    loo = fit.leave_one_out_p()
    assert loo.shape == (100,) and stats.kstest(loo, "uniform").pvalue > 0.01


@pytest.mark.parametrize("model", ["empirical", "pareto"])
def test_the_null_check_breaks_ties_at_random_so_tied_null_aurocs_read_uniform(model):
    """AUROCs of few held-out wells take few values: 200 pseudo-guides on 5 values. Counted as
    exceedances, ties make the leave-one-out p-values of exchangeable values look conservative
    (KS rejects); broken at random (seeded by the fit's seed) they are
    uniform, the same at the same seed, and each lies within its tie's interval."""
    rng = np.random.default_rng(0)
    null = np.round(rng.uniform(0.3, 0.7, size=200) * 8) / 8
    fit = H.NullFit(null, model, seed=4)
    loo = fit.leave_one_out_p()
    counted = (1.0 + (null[None, :] >= null[:, None]).sum(axis=1) - 1) / null.size  # ties as exceedances
    strictly = ((null[None, :] > null[:, None]).sum(axis=1)) / null.size
    assert stats.kstest(counted, "uniform").pvalue < 1e-3
    assert stats.kstest(loo, "uniform").pvalue > 0.05 and 0.02 < np.mean(loo < 0.05) < 0.09
    assert (loo >= strictly - 1e-12).all() and (loo <= counted + 1e-12).all()
    np.testing.assert_array_equal(loo, H.NullFit(null, model, seed=4).leave_one_out_p())
    assert not np.array_equal(loo, H.NullFit(null, model, seed=5).leave_one_out_p())


def test_parametric_p_values_average_to_uniform_over_null_draws():
    """The Student-t predictive p of a fresh draw is exactly uniform over repeated nulls."""
    rng = np.random.default_rng(7)
    p = []
    for _ in range(2000):
        null = _expit(rng.normal(0.2, 0.4, size=20))
        p.append(H.NullFit(null, "parametric").p_values(_expit(rng.normal(0.2, 0.4, size=1)))[0])
    assert stats.kstest(p, "uniform").pvalue > 0.01


@pytest.mark.parametrize("model", ["parametric", "empirical"])
def test_a_lone_strong_guide_among_10000_needs_a_null_that_reaches_its_p_value(model):
    """BH calls a lone guide among m = 10,000 at q < 0.05 only with p < 5e-6: a null of 100
    pseudo-guides reaches 1/101 under the bounded models, so the guide is not called (the
    parametric tail alone would call it, and the null summary says so); a null of 300,000 reaches
    3.3e-6 and calls it. (The default ``pareto`` model reads beyond the null: tests/test_tail.py.)"""
    rng = np.random.default_rng(11)
    real = _expit(rng.normal(0.0, 0.2, size=10_000))  # 9,999 guides without effect ...
    real[0] = 0.9  # ... and one strong guide
    small = H.call_guides(guide_table(real, _expit(rng.normal(0.0, 0.2, size=100))), model, 0.05)
    strong = small[small[GUIDE] == "g00000"].iloc[0]
    assert strong["p_value"] == pytest.approx(1 / 101) and strong["q_value"] > 0.1 and not strong["hit"]
    tail_only = H.null_summary(small, model, 0.05).iloc[0]["n_tail_only_calls"]
    assert tail_only == (1 if model == "parametric" else 0)
    large = H.call_guides(guide_table(real, _expit(rng.normal(0.0, 0.2, size=300_000))), model, 0.05)
    strong = large[large[GUIDE] == "g00000"].iloc[0]
    assert strong["p_value"] == pytest.approx(1 / 300_001) and strong["q_value"] < 0.05 and strong["hit"]
    real_calls = large[~large["is_null_guide"]]
    assert real_calls["hit"].sum() <= 1 + 0.05 * len(real_calls)


def test_call_guides_per_model_variant_with_pseudo_guides_left_out_of_bh():
    rng = np.random.default_rng(2)
    a = guide_table(np.r_[0.95, 0.5, np.nan], _expit(rng.normal(0, 0.2, 50)), variant="pca")
    b = guide_table(np.r_[0.95, 0.5, 0.6], _expit(rng.normal(2.5, 0.3, 50)), variant="pca_ica")  # a high null
    calls = H.call_guides(pd.concat([a, b], ignore_index=True), "parametric", 0.05)
    pca = calls[calls["variant"] == "pca"].set_index(GUIDE)
    ica = calls[calls["variant"] == "pca_ica"].set_index(GUIDE)
    assert pca.loc["g00000", "hit"] and not ica.loc["g00000", "hit"]  # same AUROC, different null
    assert math.isnan(pca.loc["g00002", "p_value"]) and not pca.loc["g00002", "hit"]  # never scored
    nulls = calls[calls["is_null_guide"]]
    assert nulls["p_value"].notna().all() and nulls["q_value"].isna().all() and not nulls["hit"].any()
    # BH ran over the 2 scored real guides of pca only, on the reported p-values
    p = pca.loc[["g00000", "g00001"], "p_value"].to_numpy()
    assert np.allclose(pca.loc[["g00000", "g00001"], "q_value"], bh_qvalues(p))
    # the strong guide lies beyond its null of 50: reported at 1 / 51, flagged, the tail beside it
    strong = pca.loc["g00000"]
    assert strong["p_beyond_null"] and strong["p_value"] == pytest.approx(1 / 51) and strong["p_tail"] < 1 / 51


def test_a_null_without_finite_auroc_gives_no_calls_and_says_why_with_the_counts():
    table = guide_table([0.7, 0.6], [np.nan, np.nan, np.nan])
    with pytest.raises(ScreenError, match=r"m/pca: the null has 0 pseudo-guide.*3 drawn, 3 skipped"):
        H.null_fit_for(table, "m", "pca", "parametric")
    calls = H.call_guides(table)
    real = calls[~calls["is_null_guide"]]
    assert real["auroc"].notna().all() and real["p_value"].isna().all() and not calls["hit"].any()
    summary = H.null_summary(calls).iloc[0]
    assert not summary["calls"] and summary["n_null"] == 0 and summary["n_null_skipped"] == 3
    assert "3 drawn, 3 skipped" in summary["reason"] and "min_train_samples" in summary["reason"]
    none = H.null_summary(H.call_guides(guide_table([0.7], []))).iloc[0]
    assert not none["calls"] and "0 drawn" in none["reason"]


def test_call_genes_combine_guides_with_acat_and_count_agreeing_guides():
    rng = np.random.default_rng(5)
    real = [0.95, 0.93, 0.52, 0.47, 0.9, 0.5]
    genes = ["A", "A", "B", "B", "C", "C"]
    calls = H.call_guides(guide_table(real, _expit(rng.normal(0, 0.15, 80)), genes=genes), "parametric")
    genes_df = H.call_genes(calls)
    assert tuple(genes_df.columns) == H.GENE_CALL_COLUMNS
    g = genes_df.set_index(GENE)
    for gene in "ABC":
        guides = calls[(calls[GENE] == gene)]
        assert g.loc[gene, "p_value"] == pytest.approx(acat(guides["p_value"].to_numpy()))
        assert g.loc[gene, "p_tail"] == pytest.approx(acat(guides["p_tail"].to_numpy()))
        assert g.loc[gene, "p_beyond_null"] == guides["p_beyond_null"].any()
    assert g.loc["A", "n_guides_hit"] == 2 and g.loc["C", "n_guides_hit"] == 1 and g.loc["B", "n_guides_hit"] == 0
    assert g.loc["A", "hit"] and g.loc["C", "hit"] and not g.loc["B", "hit"]
    assert np.allclose(g["q_value"], bh_qvalues(g["p_value"].to_numpy()))
    assert g.loc["A", "p_beyond_null"] and g.loc["A", "p_value"] >= 1 / 81 and g.loc["A", "p_tail"] < 1 / 81


def test_null_summary_reports_size_fit_and_calibration():
    rng = np.random.default_rng(8)
    null = _expit(rng.normal(0.1, 0.3, 120))
    calls = H.call_guides(guide_table([0.8], np.r_[null, np.nan]))
    s = H.null_summary(calls).iloc[0]
    assert s["n_null"] == 120 and s["n_null_skipped"] == 1
    assert s["logit_mean"] == pytest.approx(H.logit_auroc(null).mean())
    assert s["loo_uniform_ks_p"] > 0.01 and s["normality_p"] > 0.01


# ----------------------------------------------------------------------------- readouts and truth


def test_hit_table_and_readout_agreement():
    rng = np.random.default_rng(4)
    calls = H.call_guides(
        guide_table([0.97, 0.96, 0.5, 0.45], _expit(rng.normal(0, 0.1, 60)), genes=["A", "B", "C", "D"])
    )
    map_df = pd.DataFrame(
        {
            "model": "m",
            "variant": "pca",
            GENE: ["A", "B", "C", "D"],
            GUIDE: ["g00000", "g00001", "g00002", "g00003"],
            "n_wells": 8,
            "mean_average_precision": [0.9, 0.2, 0.8, 0.1],
            "map_p_value": [0.001, 0.6, 0.002, 0.9],
            "map_q_value": [0.002, 0.6, 0.004, 0.9],
        }
    )
    table = R.hit_table(ReadoutInputs(calls, map_df, 0.05))
    assert table.set_index(GUIDE)["agreement"].to_dict() == {
        "g00000": "both",
        "g00001": "classifier_only",
        "g00002": "map_only",
        "g00003": "neither",
    }
    agree = R.readout_agreement(table).iloc[0]
    assert (agree["both"], agree["classifier_only"], agree["map_only"], agree["neither"]) == (1, 1, 1, 1)
    assert agree["kappa"] == pytest.approx(0.0)
    no_map = R.hit_table(ReadoutInputs(calls, None))
    assert (no_map["agreement"].isin(["classifier_only", "neither"])).all() and no_map["map_q_value"].isna().all()


def test_recall_and_observed_fdr_against_truth():
    rng = np.random.default_rng(6)
    real = [0.97, 0.96, 0.95, 0.5, 0.94, 0.45]
    genes = ["A", "A", "B", "B", "N", "N"]
    calls = H.call_guides(guide_table(real, _expit(rng.normal(0, 0.1, 60)), genes=genes), "parametric")
    truth = pd.DataFrame(
        {
            GENE: genes,
            GUIDE: [f"g{i:05d}" for i in range(6)],
            "has_effect": [True, True, True, True, False, False],
            "efficacy": 1.0,
        }
    )
    out = T.recall_fdr(calls, truth, thresholds=(0.05,)).set_index("level")
    guide = out.loc["guide"]
    # called: g0, g1, g2, g4 (AUROC far above the null); true effects: g0-g3
    assert guide["true_positives"] == 3 and guide["false_positives"] == 1
    assert guide["recall"] == pytest.approx(3 / 4) and guide["observed_fdr"] == pytest.approx(1 / 4)
    gene = out.loc["gene"]
    # gene N: one guide at the null's bound 1/61 and one like the null combine (ACAT) to p 0.29, not called
    assert gene["n_true_effects"] == 2 and gene["true_positives"] == 2 and gene["false_positives"] == 0


def test_pooled_recall_fdr_sums_the_rows_before_dividing():
    rows = pd.DataFrame(
        {"true_positives": [3, 1], "n_true_effects": [4, 4], "false_positives": [1, 0], "n_called": [4, 1]}
    )
    assert T.pooled_recall_fdr(rows) == (4 / 8, 1 / 5)
    nothing = rows.assign(true_positives=0, false_positives=0, n_called=0)
    assert T.pooled_recall_fdr(nothing) == (0.0, 0.0)  # nothing called: FDR 0, not a division by 0


# ----------------------------------------------------------------------------- effect sizes and reported p-values


def planted_screen(shifts, seed=0, n_batches=3, n_controls=60, n_per_guide=20, d=8) -> pd.DataFrame:
    """``n_batches`` batches of controls and one guide per shift in ``shifts``, each guide's rows
    moved by that many control SDs along one direction (all ``d`` features at once), with a
    random offset per batch: a known order of effect sizes."""
    from phenoica.contract import BATCH, CONTROL, IMAGE_INDEX, PERT_TYPE, PERTURBATION, PLATE, SITE, WELL, feature_name

    rng = np.random.default_rng(seed)
    direction = np.ones(d) / np.sqrt(d)
    meta, X = [], []
    for b in range(n_batches):
        offset = 0.5 * rng.standard_normal(d)
        for _ in range(n_controls):
            meta.append(("NTC", "NTC_1", CONTROL, f"B{b}"))
            X.append(rng.standard_normal(d) + offset)
        for k in shifts:
            for _ in range(n_per_guide):
                meta.append((f"G{k:g}", f"G{k:g}_1", PERTURBATION, f"B{b}"))
                X.append(rng.standard_normal(d) + offset + k * direction)
    m = pd.DataFrame(meta, columns=[GENE, GUIDE, PERT_TYPE, BATCH])
    table = m.assign(
        **{PLATE: m[BATCH] + "P01", WELL: [f"W{i:05d}" for i in range(len(m))], SITE: 1, IMAGE_INDEX: np.arange(len(m))}
    )
    X = np.asarray(X, dtype=np.float32)
    for j in range(d):
        table[feature_name(j)] = X[:, j]
    return table


def test_distance_orders_planted_effects_where_every_auroc_is_one():
    """Known answer: five guides shifted by 16 to 52 control SDs all score AUROC 1.000 in every
    held-out batch, so AUROC, p and q cannot order them; the held-out distance does, near the
    planted shifts, and the hit table ranks them by it."""
    from phenoica.classify import ClassifyOptions, classify_guides, leave_one_batch_out, null_guide_design
    from phenoica.contract import validate_config

    shifts = (16, 22, 30, 40, 52)
    table = planted_screen(shifts)
    cfg = {"num_boost_round": 20, "n_null_guides": 30, "concentration": False, "lightgbm": {"num_threads": 1}}
    options = ClassifyOptions.from_config(validate_config({"classify": cfg}))
    nulls = null_guide_design(table, 30, seed=0)
    rows = classify_guides(table, None, leave_one_batch_out(table), options, "base", "m", nulls=nulls)
    real = rows[~rows["is_null_guide"]]
    assert (real["auroc"] == 1.0).all() and len(real) == 5 * 3  # saturated in every fold
    out = S.screen_calls(rows, None, "parametric", 0.05)
    hits = out["hits"]
    assert hits[GUIDE].tolist() == [f"G{k}_1" for k in reversed(shifts)] and hits["rank"].tolist() == [1, 2, 3, 4, 5]
    assert (hits["ranked_by"] == "distance_sd").all() and hits["hit"].all()
    distance = hits.set_index(GUIDE)["distance_sd"]
    for k in shifts:
        assert distance[f"G{k}_1"] == pytest.approx(k, rel=0.2)  # in control SDs, as planted
    assert (hits["distance_sd_low"] < hits["distance_sd"]).all() and (
        hits["distance_sd"] < hits["distance_sd_high"]
    ).all()
    # the pseudo-guides are controls: their distances sit around 0
    null = out["guides"][out["guides"]["is_null_guide"]]["distance_sd"]
    assert abs(null.mean()) < 0.5 and null.abs().max() < 2
    # the gene table is ranked the same way, and the saturation is said
    assert out["genes"][GENE].tolist() == [f"G{k}" for k in reversed(shifts)]
    sat = E.saturation(hits).iloc[0]
    assert sat["auroc_saturated"] and sat["n_auroc_at_1"] == 5 and sat["ranked_by"] == "distance_sd"


def test_no_reported_p_value_is_finer_than_the_null_supports():
    """A null of 100 pseudo-guides reaches p = 1/101: no p-value in the guide, gene, hit or
    control tables goes below it, nor any q-value; the tail's value stays beside it, flagged; BH
    runs on the reported p-values, and here the tail would call no other guide."""
    from phenoica.hits import control_calls

    rng = np.random.default_rng(12)
    null = _expit(rng.normal(0.0, 0.46, 100))
    real = np.r_[np.ones(45), _expit(rng.normal(3.0, 1.0, 110)), _expit(rng.normal(0.0, 0.46, 100))]
    calls = H.call_guides(guide_table(real, null), "parametric", 0.05)
    floor = 1 / 101
    guides = calls[~calls["is_null_guide"]]
    assert guides["p_tail"].min() < 1e-10  # the tail reaches far beyond the null ...
    assert guides["p_value"].min() == pytest.approx(floor)  # ... the reported p-value does not
    beyond = guides["p_tail"] < floor
    assert (guides["p_beyond_null"] == beyond).all() and beyond.sum() > 45
    assert (guides.loc[beyond, "p_value"] == floor).all()
    assert (guides.loc[~beyond, "p_value"] == guides.loc[~beyond, "p_tail"]).all()
    nulls = calls[calls["is_null_guide"]]
    assert (nulls["p_value"] >= 1 / 100).all()  # leave-one-out: the other 99 reach 1/100
    genes = H.call_genes(calls)
    assert (genes["p_value"] >= floor - 1e-12).all() and genes["p_tail"].min() < floor
    hits = R.hit_table(ReadoutInputs(calls, None))
    assert (hits["p_value"] >= floor).all() and "p_tail" not in hits.columns
    summary = H.null_summary(calls, "parametric", 0.05).iloc[0]
    assert summary["p_floor"] == pytest.approx(floor) and summary["n_beyond_null"] == beyond.sum()
    assert summary["n_tail_only_calls"] == 0  # BH's cut lies inside the null's reach
    assert np.allclose(guides["q_value"], bh_qvalues(guides["p_value"].to_numpy()))
    assert guides["q_value"].min() >= floor and guides["hit"].sum() > 100
    ctrl = pd.DataFrame(
        {"model": "m", "variant": "pca", GENE: "nt", GUIDE: ["NTC_1", "NTC_2"], "fold": "B1", "auroc": [1.0, 0.5]}
    ).assign(distance_sd=[9.0, 0.0], status="ok")
    controls = control_calls(ctrl, calls, "parametric", 0.05)
    assert (controls["p_value"] >= floor).all() and controls["p_beyond_null"].tolist() == [True, False]


def test_fold_interval_is_the_student_t_interval():
    mean, low, high = E.fold_interval(np.array([2.0, 4.0, 6.0, np.nan]))
    half = stats.t.ppf(0.975, 2) * 2.0 / math.sqrt(3)
    assert (mean, low, high) == pytest.approx((4.0, 4.0 - half, 4.0 + half))
    assert E.fold_interval(np.array([3.0]))[0] == 3.0 and math.isnan(E.fold_interval(np.array([3.0]))[1])
    assert all(math.isnan(v) for v in E.fold_interval(np.array([np.nan])))


def test_ranking_falls_back_to_map_where_the_classifier_scored_nothing():
    hits = pd.DataFrame(
        {
            "model": "m",
            "variant": ["a"] * 3 + ["b"] * 3,
            GENE: list("XYZXYZ"),
            GUIDE: list("xyzxyz"),
            "distance_sd": [1.0, 5.0, np.nan, np.nan, np.nan, np.nan],
            "mean_average_precision": [0.9, 0.1, np.nan, 0.2, 0.8, np.nan],
        }
    )
    out = E.ranked(hits, [GENE])
    a, b = out[out["variant"] == "a"], out[out["variant"] == "b"]
    assert a[GUIDE].tolist() == ["y", "x", "z"] and a["rank"].tolist()[:2] == [1, 2] and pd.isna(a["rank"].iloc[2])
    assert (a["ranked_by"] == "distance_sd").all() and (b["ranked_by"] == "mean_average_precision").all()
    assert b[GUIDE].tolist() == ["y", "x", "z"] and b["rank"].tolist()[:2] == [1, 2]


def test_saturation_counts_guides_at_the_ceiling_against_the_stated_share():
    n = 50
    auroc = np.r_[np.ones(6), np.full(n - 6, 0.8)]  # 12% at 1.0: saturated
    hits = pd.DataFrame(
        {"model": "m", "variant": "pca", "auroc": auroc, "mean_average_precision": np.r_[1.0, np.full(n - 1, 0.5)]}
    )
    hits["distance_sd"] = 1.0
    s = E.saturation(hits).iloc[0]
    assert s["n_auroc_at_1"] == 6 and s["auroc_share_at_1"] == pytest.approx(0.12) and s["auroc_saturated"]
    assert s["n_map_at_1"] == 1 and not s["map_saturated"] and s["ranked_by"] == "distance_sd"
    five = E.saturation(hits.assign(auroc=np.r_[np.ones(5), np.full(n - 5, 0.8)])).iloc[0]
    assert not five["auroc_saturated"]  # exactly 10% is not more than E.SATURATION_SHARE


def test_the_readout_that_scored_more_guides_ranks_them():
    """A layout where the classifier scores 1 guide of 4 and the mAP readout all 4: the mAP ranks."""
    hits = pd.DataFrame(
        {
            "model": "m",
            "variant": "a",
            GENE: list("WXYZ"),
            GUIDE: list("wxyz"),
            "distance_sd": [np.nan, 3.0, np.nan, np.nan],
            "mean_average_precision": [0.2, 0.4, 0.9, 0.6],
        }
    )
    out = E.ranked(hits, [GENE])
    assert (out["ranked_by"] == "mean_average_precision").all() and out[GUIDE].tolist() == ["y", "z", "x", "w"]
    assert E.ranked(hits.assign(mean_average_precision=[0.2, np.nan, 0.9, np.nan]), [GENE])["ranked_by"].iloc[0] == (
        "mean_average_precision"
    )
    tie = hits.assign(distance_sd=[1.0, 3.0, 2.0, 0.5])
    assert (E.ranked(tie, [GENE])["ranked_by"] == "distance_sd").all()


def test_heldout_distance_known_answers_and_undefined_cases():
    from phenoica.classify._distance import ControlMoments, heldout_distance

    rng = np.random.default_rng(3)
    d = 50
    ctrl_train, ctrl_test = rng.normal(size=(400, d)), rng.normal(size=(400, d)) + 2.0  # a held-out batch offset
    shift = np.zeros(d)
    shift[:5] = 3.0  # 3 SDs on 5 features: 3 * sqrt(5) = 6.7 SDs along the direction
    guide_train, guide_test = rng.normal(size=(200, d)) + shift, rng.normal(size=(200, d)) + shift + 2.0
    moments = ControlMoments.of(ctrl_train)
    assert heldout_distance(moments, guide_train, guide_test, ctrl_test) == pytest.approx(3 * math.sqrt(5), rel=0.1)
    like = heldout_distance(moments, rng.normal(size=(8, d)), rng.normal(size=(8, d)) + 2.0, ctrl_test)
    assert abs(like) < 1.5  # a guide like the controls: about 0 however many features
    # taking rows out is exact
    out = moments.without(ctrl_train[:30])
    mean, sd = out.mean_sd()
    assert np.allclose(mean, ctrl_train[30:].mean(axis=0)) and np.allclose(sd, ctrl_train[30:].std(axis=0, ddof=1))
    for args in (
        (moments, guide_train[:0], guide_test, ctrl_test),  # no training row
        (moments, guide_train, guide_test, ctrl_test[:1]),  # one held-out control: no spread
        (ControlMoments.of(np.ones((5, d))), guide_train, guide_test, ctrl_test),  # no feature with spread
        (moments, ctrl_train.mean(axis=0, keepdims=True), guide_test, ctrl_test),  # no direction
    ):
        assert math.isnan(heldout_distance(*args))
