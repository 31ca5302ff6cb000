"""Replicate retrieval across batches (phenoica.classify.guide_retrieval): known answers, the axis
it is taken across, invariances, and the whitening's ridge and control-span cap it is used to judge."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from phenoica.classify import MapReadoutOptions, mean_retrieval, retrieval_difference
from phenoica.classify import guide_retrieval as retrieval_with
from phenoica.classify._retrieval import retrieval_axis
from phenoica.contract import BATCH, CONTROL, GENE, GUIDE, PERT_TYPE, PLATE, WELL, validate_config
from phenoica.screen import arrayed
from phenoica.transforms import PCAWhitener, TransformOptions, fit_variants


def guide_retrieval(table: pd.DataFrame, **bounds: int) -> pd.DataFrame:
    """Replicate retrieval at the schema's bounds, unless the test gives its own."""
    options = MapReadoutOptions.from_config(validate_config({}))
    defaults = {"max_guides": options.retrieval_max_guides, "max_wells": options.retrieval_max_wells}
    return retrieval_with(table, **{**defaults, **bounds})


def _wells(rows: list[tuple[str, str, str, list[float]]], n_controls_per_plate: int = 4) -> pd.DataFrame:
    """A well table from (plate, guide, well, features) rows; each plate gets control wells at the
    origin's neighbourhood (so the plate's centre is about zero) and its plate is its batch."""
    records = []
    d = len(rows[0][3])
    rng = np.random.default_rng(0)
    for plate in sorted({r[0] for r in rows}):
        for j in range(n_controls_per_plate):
            x = rng.normal(0, 1e-6, d)
            records.append({BATCH: plate, PLATE: plate, WELL: f"C{j}", GENE: "NTC", GUIDE: "NTC", PERT_TYPE: CONTROL, **{
                f"f{i}": v for i, v in enumerate(x)}})  # fmt: skip
    for plate, guide, well, x in rows:
        records.append({BATCH: plate, PLATE: plate, WELL: well, GENE: guide, GUIDE: guide, PERT_TYPE: "perturbation", **{
            f"f{i}": v for i, v in enumerate(x)}})  # fmt: skip
    return pd.DataFrame(records)


def test_replicates_that_point_the_same_way_across_batches_are_retrieved_perfectly():
    axes = np.eye(3)
    rows = [
        (b, g, f"{g}{b}{k}", list(axes[i] * (1 + 0.1 * k))) for i, g in enumerate("ABC") for b in "xy" for k in range(2)
    ]
    out = guide_retrieval(_wells(rows))
    assert set(out[GUIDE]) == {"A", "B", "C"}
    assert (out["across"] == BATCH).all()
    assert np.allclose(out["retrieval"], 1.0)
    assert (out["n_queries"] == 4).all() and (out["n_wells"] == 4).all()


def test_a_positive_ranked_second_among_the_other_batch_gives_one_half():
    # batch y holds A's replicate and B's well; from A's well in x, B's well is nearer than A's own.
    rows = [
        ("x", "A", "a1", [1.0, 0.0]),
        ("y", "A", "a2", [0.0, 1.0]),
        ("y", "B", "b2", [1.0, 0.2]),
        ("x", "B", "b1", [1.0, 0.25]),
    ]
    out = guide_retrieval(_wells(rows)).set_index(GUIDE)
    # A: from a1 (x) the ranking in y is b2 then a2 -> AP 1/2; from a2 (y) the ranking in x is b1 then a1
    # (cosines 0.24 and 0) -> AP 1/2.
    assert out.loc["A", "retrieval"] == pytest.approx(0.5)
    # B: from b1 the ranking in y is b2 (0.9997) then a2 -> 1; from b2 the ranking in x is b1 then a1 -> 1.
    assert out.loc["B", "retrieval"] == pytest.approx(1.0)


def test_retrieval_is_across_plates_with_one_batch_and_absent_with_one_plate():
    rows = [(p, g, f"{g}{p}", [float(i == 0), float(i == 1)]) for i, g in enumerate("AB") for p in ("p1", "p2")]
    wells = _wells(rows).assign(**{BATCH: "b"})
    assert retrieval_axis(wells) == (PLATE, "")
    assert (guide_retrieval(wells)["across"] == PLATE).all()
    one = wells[wells[PLATE] == "p1"]
    column, why = retrieval_axis(one)
    assert column is None and "one batch and one plate" in why
    assert guide_retrieval(one).empty


def test_retrieval_is_unchanged_by_a_common_scale_and_falls_when_batches_are_shuffled_apart():
    table, _ = arrayed.screen_profiles(arrayed.ArrayedDesign(), seed=0)
    before = guide_retrieval(table)
    features = [c for c in table.columns if not c.startswith("Metadata_")]
    scaled = table.assign(**{c: table[c] * 7.5 for c in features})
    assert np.allclose(guide_retrieval(scaled)["retrieval"], before["retrieval"])
    # a large batch-specific offset in every non-control well's profile (not in the controls, so the
    # plate centre does not remove it) sorts wells by batch: retrieval across batches falls.
    rng = np.random.default_rng(1)
    offsets = {b: rng.normal(0, 50, len(features)) for b in table[BATCH].unique()}
    shifted = table.copy()
    perturbed = shifted[PERT_TYPE] != CONTROL
    shifted.loc[perturbed, features] += np.stack([offsets[b] for b in shifted.loc[perturbed, BATCH]])
    assert guide_retrieval(shifted)["retrieval"].mean() < before["retrieval"].mean() - 0.1


def test_the_mean_and_the_paired_difference_carry_intervals_that_cover_them():
    a = pd.DataFrame({GENE: list("abcdefgh"), GUIDE: list("abcdefgh"), "retrieval": np.linspace(0.2, 0.9, 8)})
    b = a.assign(retrieval=a["retrieval"] - 0.1)
    r = mean_retrieval(a, seed=0)
    assert r.low <= r.mean <= r.high and r.n_guides == 8
    assert r.mean == pytest.approx(0.55)
    diff, low, high, n = retrieval_difference(a, b, seed=0)
    assert diff == pytest.approx(0.1) and low == pytest.approx(0.1) and high == pytest.approx(0.1) and n == 8


def test_the_whitening_ridge_shrinks_weak_directions_instead_of_inflating_them():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 4)) * np.array([10.0, 3.0, 1.0, 0.1])
    plain = PCAWhitener(4, eps=0.0).fit(X)
    ridged = PCAWhitener(4, eps=0.0, ridge=1.0).fit(X)
    assert np.allclose(np.var(plain.transform(X), axis=0, ddof=1), 1.0, atol=1e-6)
    lam = ridged.eigenvalues_
    expected = lam / (lam + lam.mean())  # the ridge is one mean eigenvalue
    assert np.allclose(np.var(ridged.transform(X), axis=0, ddof=1), expected, rtol=1e-6)
    assert expected[-1] < 0.01  # the 0.1-SD direction is shrunk, not inflated to unit variance


def _options(**kw) -> TransformOptions:
    """The transforms' settings of a config at the schema's defaults but for ``kw`` (``pca`` only,
    200 ICA iterations, every row in memory)."""
    transforms = {"variants": ["pca"], "ica_max_iter": 200, "ica_max_samples": None, "batch_rows": 4096, **kw}
    return TransformOptions.from_config(validate_config({"seed": 0, "transforms": transforms}))


def test_a_fit_on_few_controls_keeps_half_the_directions_they_span_and_no_empty_one():
    rng = np.random.default_rng(0)
    n, d, n_ctrl = 300, 60, 24
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d))
    batches = np.repeat(["b1", "b2"], n // 2)
    is_control = np.zeros(n, bool)
    is_control[:12] = is_control[150:162] = True
    fitted = fit_variants(["pca"], X, batches, is_control, _options(fit_on="controls", n_components=40), None)["pca"]
    report = fitted.fit_report
    assert report["n_components"] == (n_ctrl - 2) // 2 == 11
    assert report["component_cap"] == 11
    Z = fitted.transform(X, batches, is_control)
    # every kept axis is one the controls vary along: their spread there is not far below the others'
    spread_controls = Z[is_control].std(axis=0)
    spread_others = Z[~is_control].std(axis=0)
    assert (spread_controls > 0.2 * spread_others).all()


def _whitened_screen(table: pd.DataFrame, count: int, sphering: bool) -> pd.DataFrame:
    """``table`` with its features whitened on the control rows: pycytominer's sphering (ZCA, every
    direction kept, epsilon 0.01, the field's recipe), or phenoica's own fit with ``fit_on: controls`` asking for ``count`` components."""
    features = [c for c in table.columns if c.startswith("emb_")]
    X = table[features].to_numpy(np.float64)
    batches = table[BATCH].to_numpy()
    is_control = (table[PERT_TYPE] == CONTROL).to_numpy()
    if sphering:
        from pycytominer.operations.transform import Spherize

        spherize = Spherize(epsilon=0.01, method="ZCA", return_numpy=True).fit(pd.DataFrame(X[is_control]))
        Z = np.asarray(spherize.transform(pd.DataFrame(X)))
    else:
        options = _options(fit_on="controls", n_components=count)
        Z = fit_variants(["pca"], X, batches, is_control, options, features)["pca"].transform(X, batches, is_control)
    meta = table.drop(columns=features).reset_index(drop=True)
    return pd.concat([meta, pd.DataFrame(Z, columns=[f"emb_{j:04d}" for j in range(Z.shape[1])])], axis=1)


@pytest.mark.slow
def test_a_whitening_fitted_on_the_controls_leaks_when_it_keeps_every_direction_and_not_when_capped():
    """The trap of a fit on the control wells: the field's sphering keeps every direction, those
    the controls do not span are scaled up by 1 / sqrt(epsilon), every control well sits at zero
    there and every other well does not, so a screen without any effect has its guides told from
    the controls while the null's pseudo-guides (control wells) are not. phenoica's fit keeps half
    the directions the controls span."""
    from phenoica.classify import classify_guides, leave_one_batch_out, null_guide_design
    from phenoica.hits import summarize_scores
    from tests.test_calibration import CFG, null_screen
    from tests.test_classify import classify_options

    table = null_screen(0, n_guides=40, n_batches=2, plates=4, control_wells=6, sites=1, d=80)
    n_controls = int((table[PERT_TYPE] == CONTROL).sum())  # 48 control wells, 80 features
    options = classify_options({**CFG, "lightgbm": {"num_threads": 1, "min_data_in_leaf": 3}}, 0)

    def aurocs(t: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        rows = classify_guides(t, None, leave_one_batch_out(t), options, "pca", "m", nulls=null_guide_design(t, 40, 0))
        guides, _ = summarize_scores(rows)
        null = guides["is_null_guide"].astype(bool)
        return guides.loc[~null, "auroc"].to_numpy(), guides.loc[null, "auroc"].to_numpy()

    count = n_controls - 3  # phenoica's fit is asked for nearly every direction the controls span
    leaky_real, leaky_null = aurocs(_whitened_screen(table, count, sphering=True))
    capped_real, capped_null = aurocs(_whitened_screen(table, count, sphering=False))
    assert leaky_real.mean() > leaky_null.mean() + 0.2  # every guide told from the controls: the leak
    assert abs(capped_real.mean() - capped_null.mean()) < 0.06
    assert stats.ks_2samp(capped_real, capped_null).pvalue > 0.01


def test_the_report_names_the_variant_that_retrieves_best_beside_base_with_the_paired_difference():
    from phenoica.report._retrieval_section import retrieval_headline, retrieval_summary

    guides = [f"g{i}" for i in range(6)]
    rows = [
        {"model": "m", "variant": v, GENE: g, GUIDE: g, "across": BATCH, "retrieval": 0.3 + shift + 0.01 * i}
        for v, shift in (("base", 0.0), ("pca", 0.2), ("pca_ica", 0.1))
        for i, g in enumerate(guides)
    ]
    summary = retrieval_summary(pd.DataFrame(rows), seed=0).set_index("variant")
    assert summary.loc["pca", "diff_vs_base"] == pytest.approx(0.2)
    assert summary.loc["pca", "ratio_to_base"] == pytest.approx(0.525 / 0.325)
    assert np.isnan(summary.loc["base", "diff_vs_base"])
    (line,) = retrieval_headline(summary.reset_index())
    assert "across batches" in line and "best with `pca`: 0.525" in line and "+0.200 [+0.200, +0.200]" in line
    worse = pd.DataFrame(rows).assign(retrieval=lambda t: np.where(t["variant"] == "base", 0.9, t["retrieval"]))
    (line,) = retrieval_headline(retrieval_summary(worse, seed=0))
    assert "best with `base`" in line and "no post-processing variant does better" in line and "`pca`" in line


def test_a_screen_of_more_guides_than_the_cap_ranks_a_consistent_sample_of_them():
    from phenoica.classify._retrieval import sampled_guides

    keys = np.repeat([f"g{i}" for i in range(50)], 4)
    kept = sampled_guides(keys, 10, seed=0)
    assert len(np.unique(keys[kept])) == 10 and kept.sum() == 40  # whole guides, all their wells
    assert (sampled_guides(keys, 10, seed=0) == kept).all()  # the same for every variant
    assert set(keys[sampled_guides(keys, 10, seed=1)]) != set(keys[kept])  # the seed draws
    dropped = keys[kept][0]  # removing a sampled guide replaces only it
    rest = keys[keys != dropped]
    assert len(set(keys[kept]) - {dropped} - set(rest[sampled_guides(rest, 10, seed=0)])) == 0
    assert sampled_guides(keys, 50, seed=0).all()
    table, _ = arrayed.screen_profiles(arrayed.ArrayedDesign(), seed=0)
    capped = guide_retrieval(table, max_guides=12, seed=0)
    assert len(capped) == 12


def test_a_screen_of_many_replicate_plates_ranks_a_bounded_spread_of_each_guides_wells():
    """Each guide keeps at most WELLS_PER_GUIDE wells, spread evenly over its batches; whole guides
    are taken while their wells fit the bound; the same wells for every call; nothing is dropped
    where the screen is within both bounds."""
    from phenoica.classify._retrieval import WELLS_PER_GUIDE, sampled_wells

    keys = np.repeat([f"g{i}" for i in range(30)], 40)  # 40 wells a guide: 10 in each of 4 batches
    groups = np.tile(np.repeat(["b0", "b1", "b2", "b3"], 10), 30)
    wells = np.array([f"{k}/{i}" for k, i in zip(keys, np.tile(np.arange(40), 30))])
    kept = sampled_wells(keys, groups, wells, max_wells=200, seed=0)
    per_guide = pd.Series(keys[kept]).value_counts()
    assert (per_guide == WELLS_PER_GUIDE).all() and len(per_guide) == 200 // WELLS_PER_GUIDE
    spread = pd.crosstab(keys[kept], groups[kept])
    assert (spread == WELLS_PER_GUIDE // 4).all().all()  # 4 a batch: the batches stay balanced
    assert (sampled_wells(keys, groups, wells, 200, seed=0) == kept).all()
    assert not (sampled_wells(keys, groups, wells, 200, seed=1) == kept).all()
    small = np.arange(keys.size) % 40 < 8  # 8 wells a guide, 240 wells: within both bounds
    assert sampled_wells(keys[small], groups[small], wells[small], 240, seed=0).all()
    table, _ = arrayed.screen_profiles(arrayed.ArrayedDesign(), seed=0)
    full = guide_retrieval(table)
    bounded = guide_retrieval(table, max_wells=100)
    assert bounded["n_wells"].sum() <= 100 and len(bounded) < len(full)
    same = full.set_index(GUIDE).loc[bounded[GUIDE], "n_wells"].to_numpy()
    assert (bounded["n_wells"].to_numpy() == same).all()  # whole guides, fewer of them
