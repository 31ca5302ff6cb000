"""The component sweep (phenoica.sweep._component_sweep): its options, its grid, and that its chosen
point is the run's own answer."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
import yaml

from phenoica.classify import ClassifyOptions
from phenoica.contract import settings_of, validate_config
from phenoica.sweep import SweepOptions
from phenoica.sweep._component_sweep import point_null_layout
from phenoica.transforms import TransformOptions
from tests.test_null_size import screen as null_size_screen


def test_the_sweep_scores_and_fits_each_point_as_the_main_run_does():
    """SweepOptions holds the main run's classify, transform, mAP and hit-call options, built by
    their own classes, and reads every key they read but those it fixes; a point is classified
    with the main run's settings less the concentration models, with the sweep's null, as one
    shard, and fitted with the main run's settings at its own variant and count."""
    from phenoica.classify import MapReadoutOptions
    from phenoica.hits import HitOptions

    sweep = settings_of(SweepOptions)
    held = {"classify": ClassifyOptions, "transforms": TransformOptions, "map": MapReadoutOptions, "hits": HitOptions}
    fixed = {"classify": {"concentration", "n_shards"}, "transforms": {"variants", "n_components"}}
    fixed.update(map={"q_threshold", "map_null"}, hits={"q_threshold"})
    for field, cls in held.items():
        expected = {f"{field}.{name}": s for name, s in settings_of(cls).items() if name not in fixed[field]}
        assert {name: s for name, s in sweep.items() if name.startswith(field + ".")} == expected, field
    own = {name: s.key for name, s in sweep.items() if "." not in name}
    assert own == {
        "variants": "transforms.variants",
        "points": "sweep.points",
        "max_components": "sweep.max_components",
        "null_guides": "sweep.null_guides",
        "max_genes": "sweep.max_genes",
        "ica_max_samples": "sweep.ica_max_samples",
        "ica_max_iter": "sweep.ica_max_iter",
        "map_max_null_size": "sweep.map_max_null_size",
        "protocol": "sweep.protocol",
        "fast_leaf": "classify.fast_leaf",
    }
    cfg = validate_config(
        {
            "classify": {"num_boost_round": 5, "n_null_guides": 12, "lightgbm": {"num_threads": 2}},
            "transforms": {"n_components": 8, "variants": ["base", "pca", "tvn", "pca_ica"], "ica_max_iter": 9},
            "sweep": {"null_guides": 5},
            "seed": 3,
        }
    )
    options = SweepOptions.from_config(cfg)
    table = pd.DataFrame()  # a count is read without the table
    assert options.variants == ["pca", "pca_ica"] and options.point_null_guides(table) == 5
    main = ClassifyOptions.from_config(cfg)
    assert options.scoring(table) == main._replace(concentration=False, n_null_guides=5, n_shards=1)
    # the points' protocol: the main run's unless the sweep sets its own
    assert options.protocol is None and options.point_protocol == main.protocol == "exact"
    assert options._replace(protocol="fast").scoring(table) == options.scoring(table)._replace(protocol="fast")
    fast_main = options._replace(classify=options.classify._replace(protocol="fast"))
    assert (
        fast_main.scoring(table).protocol == "fast" and fast_main._replace(protocol="exact").point_protocol == "exact"
    )
    assert options._replace(null_guides=None).scoring(table).n_null_guides == 12
    assert options._replace(null_guides=50).point_null_guides(table) == 12  # at most the main run's
    # under auto, the main run's count as it resolves on the table: 250 for 2,500 guides
    auto = options._replace(classify=options.classify._replace(n_null_guides="auto"))
    assert auto._replace(null_guides=None).point_null_guides(null_size_screen(2500)) == 250
    assert auto._replace(null_guides=300).point_null_guides(null_size_screen(2500)) == 250
    assert auto.point_null_guides(null_size_screen(2500)) == 5
    fit = TransformOptions.from_config(cfg)
    at = fit._replace(n_components=4, variants=["pca_ica"])
    assert options._replace(ica_max_samples=None).transforms_at(4, "pca_ica") == at
    assert options._replace(ica_max_samples=10**9).transforms_at(4, "pca_ica") == at  # the fewer rows
    assert options._replace(ica_max_samples=500).transforms_at(4, "pca_ica") == at._replace(ica_max_samples=500)
    # the points' ICA iterations: the fewer of the sweep's (none by default) and the main fit's (9 here)
    assert (
        options.ica_max_iter is None
        and options._replace(ica_max_samples=None, ica_max_iter=10**6).transforms_at(4, "pca_ica") == at
    )
    five = options._replace(ica_max_samples=None, ica_max_iter=5)
    assert five.transforms_at(4, "pca_ica") == at._replace(ica_max_iter=5)
    # the points' mAP draws: the fewer of the sweep's and the main run's, never below the first round
    assert options.map.map_max_null_size == 10**7 and options.point_map() == options.map._replace(
        map_max_null_size=10**5
    )
    assert options._replace(map_max_null_size=None).point_map() == options.map
    assert options._replace(map_max_null_size=10**9).point_map() == options.map
    assert options._replace(map_max_null_size=100).point_map().map_max_null_size == options.map.map_null_size
    assert options.seed == 3 and options.q_threshold == options.map.q_threshold == 0.1
    assert options.hits == HitOptions.from_config(cfg)._replace(q_threshold=0.1)
    # what reruns the sweep: the keys it reads, not the run-time ones nor those it does not read
    base = repr(options)
    for change in (
        {"classify": {"lightgbm": {"num_threads": 1}}},
        {"transforms": {"batch_rows": 5}},
        {"transforms": {"n_components": 6}},
        {"hits": {"q_threshold": 0.2}},
        {"classify": {"n_shards": 5, "map_readout": False, "concentration": False}},
        {"transforms": {"variants": ["base", "pca", "pca_ica"]}},  # the same swept variants
        {"classify": {"fast_leaf": "configured"}},  # read by neither protocol's points here
    ):
        again = validate_config({**cfg, **{k: {**cfg[k], **v} for k, v in change.items()}})
        assert repr(SweepOptions.from_config(again)) == base, change
    for change in (
        {"sweep": {"points": 3}},
        {"sweep": {"max_genes": 3}},
        {"sweep": {"ica_max_samples": 300}},
        {"sweep": {"ica_max_iter": 50}},
        {"sweep": {"map_max_null_size": 1000}},
        {"sweep": {"protocol": "fast"}},
        {"hits": {"null_model": "empirical"}},
        {"classify": {"map_null_size": 500}},
        {"transforms": {"ica": "fastica"}},
        {"transforms": {"variants": ["pca"]}},
        {"classify": {"n_null_guides": 20}},
        {"seed": 4},
    ):
        again = validate_config(
            {**cfg, **{k: {**cfg[k], **v} if isinstance(v, dict) else v for k, v in change.items()}}
        )
        assert repr(SweepOptions.from_config(again)) != base, change
    # the leaf of the fast protocol reruns the sweep where its points train under fast, and the
    # main run's classification (exact) does not already name it
    fast = validate_config({**cfg, "sweep": {**cfg["sweep"], "protocol": "fast"}})
    configured = validate_config({**fast, "classify": {**fast["classify"], "fast_leaf": "configured"}})
    assert repr(SweepOptions.from_config(configured)) != repr(SweepOptions.from_config(fast))
    assert repr(SweepOptions.from_config(configured)).count("fast_leaf") == 1
    # under a fast main run the composed classification names the leaf itself, once, whether the
    # points follow it (null) or set fast again
    for sweep_protocol in (None, "fast"):
        fast_main = validate_config(
            {
                **cfg,
                "classify": {**cfg["classify"], "protocol": "fast", "fast_leaf": "configured"},
                "sweep": {**cfg["sweep"], "protocol": sweep_protocol},
            }
        )
        assert repr(SweepOptions.from_config(fast_main)).count("fast_leaf") == 1, sweep_protocol


def test_sweep_grid_spans_two_to_the_width_and_holds_the_chosen_count():
    from phenoica.sweep import sweep_grid

    assert sweep_grid(192, 5000, 25, 5) == [2, 6, 20, 25, 61, 192]
    assert sweep_grid(48, 40, 20, 3) == [2, 9, 20, 38]  # at most rows - 2
    assert sweep_grid(48, 5000, 20, 0) == []
    assert sweep_grid(192, 5000, 25, 3, max_components=96) == [2, 14, 25, 96]  # the top capped
    assert sweep_grid(192, 5000, 120, 2, max_components=96) == [2, 96, 120]  # the chosen count stays
    assert sweep_grid(48, 40, 20, 2, max_components=96) == [2, 20, 38]  # a cap above the data's: the data's


def test_sweep_models_takes_the_first_scored_models_by_name():
    from phenoica.workflow._dag import scored_models, swept_models

    config = {"models": {"b": {}, "a": {}, "c": {}}, "sweep": {"models": None}, "classify": {"models": None}}
    assert swept_models(config) == ["a", "b", "c"]
    assert swept_models({**config, "sweep": {"models": 1}}) == ["a"]
    assert swept_models({**config, "sweep": {"models": 5}}) == ["a", "b", "c"]
    assert validate_config({"sweep": {"models": 2}})["sweep"]["models"] == 2
    # the sweep's chosen point is the main run's scores: it sweeps scored models only
    two_scored = {**config, "classify": {"models": 2}}
    assert scored_models(two_scored) == ["a", "b"]
    assert swept_models(two_scored) == ["a", "b"]
    assert swept_models({**two_scored, "sweep": {"models": 1}}) == ["a"]
    assert validate_config({"classify": {"models": 1}})["classify"]["models"] == 1


def test_chosen_point_reproduces_the_classification_and_the_report_shows_it(tmp_path):
    """At the chosen count the sweep's guide AUROCs are the main classification's (which also
    trains the concentration models); the section marks the chosen row; the figure is written."""
    from phenoica.classify import classify_shard, leave_one_batch_out
    from phenoica.hits import screen_calls
    from phenoica.report import ReportInputs
    from phenoica.report._sections import ReportContext
    from phenoica.report._sweep_section import build_sweep
    from phenoica.screen import write_known_truth_screen
    from phenoica.screen.known_truth import ControlDesign
    from phenoica.sweep import MainPoint, sweep_model
    from phenoica.transforms import component_name, fit_variants
    from tests.report_fixtures import report_options

    out = write_known_truth_screen(tmp_path / "pc", seed=0, design=ControlDesign(cells_per_well=6, n_effect_genes=4))
    raw = pd.concat([pd.read_parquet(f) for f in out["files"]], ignore_index=True)
    X = np.stack(raw.pop("vector")).astype(np.float32)
    profiles = pd.concat([raw, pd.DataFrame(X, columns=[f"emb_{i:03d}" for i in range(X.shape[1])])], axis=1)
    cfg = validate_config(
        {"classify": {"num_boost_round": 8, "n_null_guides": 12, "min_train_samples": 3, "map_null_size": 100}}
    )
    options = SweepOptions.from_config(cfg)._replace(variants=["pca_ica"], points=2)
    folds = leave_one_batch_out(profiles)
    table, calls = sweep_model(profiles, folds, "ext", 20, options, grid=[4, 20])
    assert table["n_components"].tolist() == [4, 20] and table["chosen"].tolist() == [False, True]
    assert ((table["batch_accuracy"] >= 0) & (table["batch_accuracy"] <= 1)).all()

    b, c = profiles["Metadata_Batch"].to_numpy(), (profiles["Metadata_PertType"] == "control").to_numpy()
    fitted = fit_variants(["pca_ica"], X, b, c, TransformOptions.from_config(cfg)._replace(n_components=20))
    Z = fitted["pca_ica"].transform(X, b, c).astype(np.float32)
    variant = pd.concat([raw, pd.DataFrame(Z, columns=[component_name(i) for i in range(20)])], axis=1)
    main_options = ClassifyOptions.from_config(cfg)
    rows = classify_shard(variant, 0, folds, main_options._replace(n_shards=1), variant="pca_ica", model="ext")
    main = screen_calls(rows, None, "parametric", 0.1)["guides"].set_index("Metadata_Guide")["auroc"]
    swept = calls[calls["n_components"] == 20].set_index("Metadata_Guide")["auroc"]
    assert np.allclose(swept.loc[main.index], main)

    # The workflow's sweep reads the chosen point from the main run (its variant table, its shards
    # scored with the concentration models on, no mAP table: computed then): the same row.
    with_concentration = main_options._replace(concentration=True, n_shards=2)
    shards = [classify_shard(variant, s, folds, with_concentration, variant="pca_ica", model="ext") for s in range(2)]
    point = MainPoint(variant, pd.concat(shards, ignore_index=True))
    reused, reused_calls = sweep_model(profiles, folds, "ext", 20, options, grid=[4, 20], main={"pca_ica": point})
    assert reused["n_components"].tolist() == [4, 20]
    pd.testing.assert_frame_equal(reused.drop(columns="seconds"), table.drop(columns="seconds"))
    assert np.allclose(
        reused_calls.set_index(["n_components", "Metadata_Guide"])["auroc"].sort_index(),
        calls.set_index(["n_components", "Metadata_Guide"])["auroc"].sort_index(),
    )

    # With the main run's retrieval table (the map_readout job's: the same call on the same variant
    # table), the chosen row reads it instead of ranking the wells again: the same row; a table of
    # other values would show in it.
    import dataclasses

    from phenoica.classify import guide_retrieval
    from phenoica.classify._map_job import _write_retrieval

    kept_path = tmp_path / "retrieval.parquet"
    _write_retrieval(variant, kept_path, options.map, "ext", "pca_ica", logging.getLogger("test"))
    kept = pd.read_parquet(kept_path)
    assert len(kept) and kept.equals(
        guide_retrieval(
            variant,
            model="ext",
            variant="pca_ica",
            max_guides=options.map.retrieval_max_guides,
            max_wells=options.map.retrieval_max_wells,
            seed=options.map.seed,
        )
    )
    read, _ = sweep_model(
        profiles, folds, "ext", 20, options, grid=[4, 20], main={"pca_ica": dataclasses.replace(point, retrieval=kept)}
    )
    pd.testing.assert_frame_equal(read.drop(columns="seconds"), table.drop(columns="seconds"))
    other = dataclasses.replace(point, retrieval=kept.assign(retrieval=0.5))
    shifted, _ = sweep_model(profiles, folds, "ext", 20, options, grid=[20], main={"pca_ica": other})
    assert shifted["replicate_retrieval"].item() == 0.5

    # sweep.null_guides 5 of the main run's 12: the chosen point's calls from the main run's
    # scores cut to its first 5 pseudo-guides are those of the point classified with 5.
    small = options._replace(null_guides=5)
    assert small.point_null_guides(profiles) == 5 and small.scoring(profiles).n_null_guides == 5
    fresh, fresh_calls = sweep_model(profiles, folds, "ext", 4, small, grid=[20])
    cut, cut_calls = sweep_model(profiles, folds, "ext", 20, small, grid=[20], main={"pca_ica": point})
    pd.testing.assert_frame_equal(cut.drop(columns=["seconds", "chosen"]), fresh.drop(columns=["seconds", "chosen"]))
    assert int(fresh_calls["is_null_guide"].sum()) == 5 and int(cut_calls["is_null_guide"].sum()) == 5
    assert np.allclose(
        cut_calls.set_index("Metadata_Guide")["q_value"].sort_index(),
        fresh_calls.set_index("Metadata_Guide")["q_value"].sort_index(),
        equal_nan=True,  # pseudo-guides get no q-value
    )

    # sweep.max_genes 2: a point scores the guides of a seeded sample of 2 genes (the same draw from
    # the profiles and from the variant's table), each with the AUROC the full point gives it; the
    # chosen row from the main run's scores is that of the point classified with the sample; the
    # batch accuracy and the retrieval are of every well.
    from phenoica.sweep import sweep_genes

    few = options._replace(max_genes=2)
    genes = sweep_genes(profiles, 2, few.seed)
    assert genes is not None and len(genes) == 2 and genes == sweep_genes(variant, 2, few.seed)
    assert sweep_genes(profiles, None, few.seed) is None and sweep_genes(profiles, 10**6, few.seed) is None
    # a screen of as many genes as the cap is swept whole; one gene fewer and the sample acts
    n_genes = profiles.loc[profiles["Metadata_PertType"] == "perturbation", "Metadata_Gene"].nunique()
    assert sweep_genes(profiles, n_genes, few.seed) is None
    assert len(sweep_genes(profiles, n_genes - 1, few.seed) or []) == n_genes - 1
    fresh, fresh_calls = sweep_model(profiles, folds, "ext", 4, few, grid=[20])
    cut, cut_calls = sweep_model(profiles, folds, "ext", 20, few, grid=[20], main={"pca_ica": point})
    pd.testing.assert_frame_equal(cut.drop(columns=["seconds", "chosen"]), fresh.drop(columns=["seconds", "chosen"]))
    real = fresh_calls[~fresh_calls["is_null_guide"].astype(bool)]
    assert sorted(real["Metadata_Gene"].unique()) == genes
    full = table[table["n_components"] == 20].iloc[0]
    assert fresh["n_guides"].item() == len(real) < full["n_guides"]
    assert np.isfinite(fresh["map_active_share"].item()) and np.isfinite(full["map_active_share"])
    assert np.allclose(real.set_index("Metadata_Guide")["auroc"], swept.loc[real["Metadata_Guide"]])
    assert fresh["batch_accuracy"].item() == full["batch_accuracy"]
    assert fresh["replicate_retrieval"].item() == full["replicate_retrieval"]

    none = pd.DataFrame()
    inputs = ReportInputs(none, none, none, sweep=pd.read_parquet(_save(table, tmp_path)))
    result = build_sweep(inputs, ReportContext(tmp_path / "report", report_options(), none, none, none))
    shown = result.page[0].blocks[1].df
    assert "<- chosen" in shown["chosen"].tolist() and result.figures["component_sweep"].stat().st_size > 0


def _save(table: pd.DataFrame, tmp_path) -> object:
    path = tmp_path / "sweep.parquet"
    table.to_parquet(path)
    return path


def test_a_point_whose_fit_fails_in_linear_algebra_is_skipped_with_a_logged_reason(tmp_path, monkeypatch, caplog):
    """scipy's "SVD did not converge" at one count: that point is left out with a warning naming
    the count and the error; the other points are scored."""
    import logging

    import scipy.linalg

    import phenoica.sweep._component_sweep as components
    from phenoica.classify import leave_one_batch_out
    from phenoica.screen import write_known_truth_screen
    from phenoica.screen.known_truth import ControlDesign

    out = write_known_truth_screen(tmp_path / "pc", seed=0, design=ControlDesign(cells_per_well=4, n_effect_genes=2))
    raw = pd.concat([pd.read_parquet(f) for f in out["files"]], ignore_index=True)
    X = np.stack(raw.pop("vector")).astype(np.float32)
    profiles = pd.concat([raw, pd.DataFrame(X, columns=[f"emb_{i:03d}" for i in range(X.shape[1])])], axis=1)
    cfg = validate_config(
        {"classify": {"num_boost_round": 4, "n_null_guides": 4, "min_train_samples": 3, "map_null_size": 100}}
    )
    options = SweepOptions.from_config(cfg)._replace(variants=["pca"], points=2)
    real_fit = components.fit_variants

    def fit_failing_at_8(variants, X, *args, **kwargs):
        if args[2].n_components == 8:
            raise scipy.linalg.LinAlgError("SVD did not converge")
        return real_fit(variants, X, *args, **kwargs)

    monkeypatch.setattr(components, "fit_variants", fit_failing_at_8)
    log = logging.getLogger("test.sweep")
    with caplog.at_level(logging.WARNING, logger="test.sweep"):
        table, _ = components.sweep_model(
            profiles, leave_one_batch_out(profiles), "ext", 4, options, grid=[4, 8], log=log
        )
    assert table["n_components"].tolist() == [4]
    (record,) = [r for r in caplog.records if "skipped" in r.getMessage()]
    assert (
        "ext/pca at 8 components" in record.getMessage() and "LinAlgError: SVD did not converge" in record.getMessage()
    )


def _screen(tmp_path, one_batch: bool = False) -> pd.DataFrame:
    """The positive-control screen (3 batches, 48 features) as a profile table; ``one_batch``:
    every row in one batch."""
    from phenoica.screen import write_known_truth_screen
    from phenoica.screen.known_truth import ControlDesign

    out = write_known_truth_screen(tmp_path / "pc", seed=0, design=ControlDesign(cells_per_well=4, n_effect_genes=4))
    raw = pd.concat([pd.read_parquet(f) for f in out["files"]], ignore_index=True)
    if one_batch:
        raw["Metadata_Batch"] = "b1"
    X = np.stack(raw.pop("vector")).astype(np.float32)
    return pd.concat([raw, pd.DataFrame(X, columns=[f"emb_{i:03d}" for i in range(X.shape[1])])], axis=1)


def test_a_variant_fitted_alone_is_that_variant_of_a_joint_fit(tmp_path):
    """Each sweep job fits its one variant: the same transform, to the bit, as that variant of
    the fit of every swept variant together (the center-scale, whitening and seeds are shared,
    each rotation draws from its own seed)."""
    from phenoica.transforms import fit_variants

    profiles = _screen(tmp_path)
    X = profiles.filter(like="emb_").to_numpy(np.float64)
    b, c = profiles["Metadata_Batch"].to_numpy(), (profiles["Metadata_PertType"] == "control").to_numpy()
    options = TransformOptions.from_config(validate_config({"transforms": {"ica_max_iter": 50}}))._replace(
        n_components=9
    )
    joint = fit_variants(["pca", "pca_ica", "pca_rand"], X, b, c, options)
    for variant in ("pca", "pca_ica", "pca_rand"):
        alone = fit_variants([variant], X, b, c, options)[variant]
        assert np.array_equal(alone.transform(X, b, c), joint[variant].transform(X, b, c)), variant


def test_spaced_counts_round_close_counts_to_one_and_a_point_beyond_writes_no_row(tmp_path):
    from phenoica.sweep import spaced_counts, sweep_point
    from phenoica.sweep._component_sweep import SWEEP_COLUMNS

    assert spaced_counts(4, 100, 5) == [2, 3, 4] and spaced_counts(192, 5000, 5) == [2, 6, 20, 61, 192]
    assert spaced_counts(48, 5000, 1) == [48] and spaced_counts(48, 5000, 0) == []
    profiles = _screen(tmp_path)
    options = SweepOptions.from_config(validate_config({}))._replace(variants=["pca"], points=2, max_components=3)
    # the grid 2 .. 3 in 2 counts is [2, 3]; with points 3 it is still [2, 3]: point 2 writes no row
    table, calls = sweep_point(profiles, [], "ext", "pca", 2, options._replace(points=3))
    assert list(table.columns) == list(SWEEP_COLUMNS) and table.empty and calls.empty
    assert spaced_counts(48, len(profiles), 3, 3) == [2, 3]


def test_the_jobs_parts_give_the_sweep_table_and_a_point_at_the_chosen_count_is_the_main_runs(tmp_path):
    """The workflow's parts (a job per variant and grid point, the chosen point from the main
    run, the gather) give the in-process sweep's table: rows by count then variant; a grid point
    that falls on the chosen count is represented by the chosen row, read from the main run."""
    from phenoica.classify import classify_shard, leave_one_batch_out
    from phenoica.sweep import MainPoint, chosen_point, gather_sweep, sweep_model, sweep_point
    from phenoica.transforms import component_name, fit_variants

    profiles = _screen(tmp_path)
    folds = leave_one_batch_out(profiles)
    cfg = validate_config(
        {"classify": {"num_boost_round": 6, "n_null_guides": 6, "min_train_samples": 3, "map_null_size": 100}}
    )
    options = SweepOptions.from_config(cfg)._replace(variants=["pca", "pca_rand"], points=2, max_components=6)
    chosen = 6  # the grid is [2, 6]: its top is the chosen count
    X = profiles.filter(like="emb_").to_numpy(np.float64)
    b, c = profiles["Metadata_Batch"].to_numpy(), (profiles["Metadata_PertType"] == "control").to_numpy()
    fitted = fit_variants(options.variants, X, b, c, TransformOptions.from_config(cfg)._replace(n_components=chosen))
    meta = profiles.drop(columns=[c for c in profiles.columns if c.startswith("emb_")])
    main, main_options = {}, ClassifyOptions.from_config(cfg)._replace(n_shards=1)
    for variant in options.variants:
        Z = fitted[variant].transform(X, b, c).astype(np.float32)
        table = pd.concat([meta, pd.DataFrame(Z, columns=[component_name(i) for i in range(chosen)])], axis=1)
        rows = classify_shard(table, 0, folds, main_options, variant=variant, model="ext")
        main[variant] = MainPoint(table, rows)

    points = [sweep_point(profiles, folds, "ext", v, i, options)[0] for v in options.variants for i in range(2)]
    assert [int(t["n_components"].iloc[0]) for t in points] == [2, 6, 2, 6] and not any(
        t["chosen"].any() for t in points
    )
    chosen_rows = [chosen_point(main[v], "ext", v, chosen, options)[0] for v in options.variants]
    table = gather_sweep(points + chosen_rows, options.variants)
    assert table[["n_components", "variant", "chosen"]].values.tolist() == [
        [2, "pca", False],
        [2, "pca_rand", False],
        [6, "pca", True],
        [6, "pca_rand", True],
    ]
    pd.testing.assert_frame_equal(table.iloc[2:].reset_index(drop=True), pd.concat(chosen_rows, ignore_index=True))
    in_process, _ = sweep_model(profiles, folds, "ext", chosen, options, main=main)
    pd.testing.assert_frame_equal(table.drop(columns="seconds"), in_process.drop(columns="seconds"), check_exact=True)
    # the grid point at the chosen count scored afresh gives the main run's row (its scores
    # differ only by the concentration models, which change no AUROC)
    fresh = pd.concat([points[1], points[3]], ignore_index=True)
    pd.testing.assert_frame_equal(
        fresh.drop(columns=["seconds", "chosen"]),
        table.iloc[2:].reset_index(drop=True).drop(columns=["seconds", "chosen"]),
    )


def test_a_screen_of_one_batch_is_swept_without_batch_measures_and_the_report_says_why(tmp_path):
    """One batch (splits.scheme in_distribution): every point is scored; the batch classifier has
    no batch to tell apart, so its accuracy is NaN with chance 1, and the report's table says so."""
    from phenoica.classify._splits import in_distribution
    from phenoica.report import ReportInputs
    from phenoica.report._sections import ReportContext
    from phenoica.report._sweep_section import build_sweep
    from phenoica.sweep import sweep_model
    from tests.report_fixtures import report_options

    profiles = _screen(tmp_path, one_batch=True)
    cfg = validate_config(
        {
            "classify": {"num_boost_round": 8, "n_null_guides": 6, "min_train_samples": 3, "map_null_size": 100},
            "splits": {"scheme": "in_distribution"},
        }
    )
    options = SweepOptions.from_config(cfg)._replace(variants=["pca"], points=2)
    table, calls = sweep_model(profiles, in_distribution(profiles, 0.25, 3, 0), "ext", 8, options)
    assert table["n_components"].tolist() == [2, 8, 48] and (table["n_guides"] == 16).all()
    assert table["batch_accuracy"].isna().all() and (table["batch_chance"] == 1.0).all()
    real = calls[~calls["is_null_guide"].astype(bool)]
    assert len(real) == 3 * 16 and real["auroc"].notna().all()  # every guide scored at every count
    none = pd.DataFrame()
    inputs = ReportInputs(none, none, none, sweep=table)
    result = build_sweep(inputs, ReportContext(tmp_path / "report", report_options(), none, none, none))
    note, shown = result.page[0].blocks[0], result.page[0].blocks[1].df
    assert (shown["batch_note"] == "one batch: nothing to tell apart").all() and "`batch_note`" in note
    two = table.assign(batch_accuracy=0.4, batch_chance=0.5)
    shown = build_sweep(
        ReportInputs(none, none, none, sweep=two), ReportContext(tmp_path / "r2", report_options(), none, none, none)
    )
    assert "batch_note" not in shown.page[0].blocks[1].df.columns  # a screen of batches: the table as it was


@pytest.mark.slow
def test_a_workflow_sweep_spreads_and_a_changed_point_reruns_alone(tmp_path):
    """A finished run of a small arrayed screen with the sweep on: one job per (variant, grid
    point) and one gathering job; one point run again (--forcerun) plans that point, the gather and the
    report; changing the rule's count (transforms.n_components) reruns the chosen point (the
    gather), not one grid point."""
    from phenoica.screen import arrayed
    from tests.test_workflow import planned_jobs, snakemake

    design = arrayed.ArrayedDesign(n_effect_genes=6, n_null_genes=4, n_latent=6, n_features=24)
    paths = arrayed.write_arrayed_screen(tmp_path / "screen", 0, design)
    cfg = {
        "results": "results",
        "screen": {
            "source": "embeddings",
            "embeddings": str(paths["profiles"] / "*.parquet"),
            "feature_regex": arrayed.FEATURE_REGEX,
        },
        "models": {"cp": {}},
        "transforms": {"n_components": 6, "variants": ["base", "pca", "pca_rand"]},
        "classify": {"n_shards": 1, "num_boost_round": 10, "n_null_guides": 10, "map_null_size": 100},
        "biomap": {"enabled": False},
        "sweep": {"points": 3},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    snakemake(tmp_path)
    logs = sorted(
        p.relative_to(tmp_path / "results/logs/sweep_point")
        for p in (tmp_path / "results/logs/sweep_point").rglob("*.log")
    )
    assert [str(p) for p in logs] == [f"cp/{v}/point_{i}.log" for v in ("pca", "pca_rand") for i in range(3)]
    table = pd.read_parquet(tmp_path / "results/sweep/cp.parquet")
    # the grid 2 .. 24 in 3 counts (2, 7, 24) and the chosen 6, per variant
    assert table[["n_components", "variant", "chosen"]].values.tolist() == [
        [k, v, k == 6] for k in (2, 6, 7, 24) for v in ("pca", "pca_rand")
    ]
    planned = planned_jobs(tmp_path, "--forcerun", "results/sweep/cp/pca/point_1.parquet")
    assert {rule: n for rule, n in planned.items() if rule != "all"} == {
        "sweep_point": 1,
        "component_sweep": 1,
        "report": 1,
    }
    (tmp_path / "changed.yaml").write_text(
        yaml.safe_dump({**cfg, "transforms": {**cfg["transforms"], "n_components": 5}})
    )
    jobs = planned_jobs(tmp_path, configfile="changed.yaml")
    assert jobs["component_sweep"] == 1 and "sweep_point" not in jobs and jobs["fit_transforms"] == 1


def test_a_models_sweep_jobs_are_every_swept_variant_at_every_grid_point():
    from phenoica.contract import run_models
    from phenoica.workflow import RuleInputs

    cfg = validate_config(
        run_models(
            {"results": "res", "transforms": {"variants": ["base", "pca", "tvn", "pca_ica"]}, "sweep": {"points": 2}}
        )
    )
    points = RuleInputs(cfg, {}).sweep_points()
    assert points == [f"res/sweep/{{model}}/{v}/point_{i}.parquet" for v in ("pca", "pca_ica") for i in (0, 1)]
    off = validate_config(run_models({"results": "res", "sweep": {"points": 0}}))
    assert RuleInputs(off, {}).sweep_points() == [] and RuleInputs(off, {}).sweeps() == []


def test_the_points_caps_reach_their_fit_and_mAP_and_keep_the_curves_of_the_full_computation(tmp_path, monkeypatch):
    """A point under the sweep's ICA iteration and mAP draw caps against the same point with both
    off (the main run's 500 iterations and draws), on the positive-control screen: its ICA stops
    at the cap (another rotation), its mAP readout draws at most the cap, and its curves agree
    within the tolerances the docs state (hit shares 0.05, the mAP share, batch accuracy and
    retrieval 0.02)."""
    from phenoica.classify import leave_one_batch_out
    from phenoica.sweep import _component_sweep as sweep_module
    from phenoica.sweep import sweep_point
    from phenoica.transforms import fit_variants

    profiles = _screen(tmp_path)
    folds = leave_one_batch_out(profiles)
    cfg = validate_config(
        {
            "classify": {"num_boost_round": 6, "n_null_guides": 6, "map_null_size": 100, "map_max_null_size": 10**4},
            "sweep": {"points": 2, "max_components": 12, "ica_max_iter": 3, "map_max_null_size": 300},
        }
    )
    capped = SweepOptions.from_config(cfg)._replace(variants=["pca_ica"])
    full = capped._replace(ica_max_iter=None, map_max_null_size=None)
    X = profiles.filter(like="emb_").to_numpy(np.float64)
    b, c = profiles["Metadata_Batch"].to_numpy(), (profiles["Metadata_PertType"] == "control").to_numpy()
    fits = [fit_variants(["pca_ica"], X, b, c, o.transforms_at(12, "pca_ica"))["pca_ica"] for o in (capped, full)]
    assert not np.allclose(fits[0].transform(X, b, c), fits[1].transform(X, b, c))  # the cap acts on the ICA

    drawn: list[int] = []
    real_map = sweep_module.guide_map

    def recording(*args, **kwargs):
        out = real_map(*args, **kwargs)
        drawn.append(int(out["map_null_draws"].max()))
        return out

    monkeypatch.setattr(sweep_module, "guide_map", recording)
    rows = {
        name: sweep_point(profiles, folds, "ext", "pca_ica", 1, o)[0].iloc[0]
        for name, o in (("capped", capped), ("full", full))
    }
    assert drawn[0] <= 300 < drawn[1] <= 10**4  # a guide near the cut: refined further by the full computation
    a, f = rows["capped"], rows["full"]
    assert a["n_components"] == f["n_components"] == 12 and a["n_guides"] == f["n_guides"]
    assert abs(a["guide_hits"] - f["guide_hits"]) / f["n_guides"] <= 0.05
    for curve in ("map_active_share", "batch_accuracy", "replicate_retrieval"):
        assert abs(a[curve] - f[curve]) <= 0.02, curve


def test_a_points_protocol_is_the_main_runs_below_fasts_thresholds_and_its_cap_reaches_the_point(tmp_path):
    """A point under ``sweep.protocol: fast`` against the same point under the main run's
    ``exact``, on the positive-control screen (3 batches, so 3 folds, and at most a few dozen
    training controls a fold): below both of fast's thresholds its row is exact's to the byte;
    with a cap of 8 training controls the cap acts on the point's classification (its AUROCs
    move) while the measures computed on every well (batch accuracy, retrieval) do not."""
    from phenoica.classify import leave_one_batch_out
    from phenoica.sweep import _component_sweep as sweep_module
    from phenoica.sweep import sweep_point

    profiles = _screen(tmp_path)
    folds = leave_one_batch_out(profiles)
    cfg = validate_config(
        {
            "classify": {"num_boost_round": 6, "n_null_guides": 6, "map_null_size": 100},
            "sweep": {"points": 2, "max_components": 8},
        }
    )
    exact = SweepOptions.from_config(cfg)._replace(variants=["pca"])
    assert exact.point_protocol == "exact"
    scored: list[pd.DataFrame] = []
    real_classify = sweep_module.classify_guides

    def recording(*args, **kwargs):
        out = real_classify(*args, **kwargs)
        scored.append(out)
        return out

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sweep_module, "classify_guides", recording)
        rows = {
            name: sweep_point(profiles, folds, "ext", "pca", 1, o)[0].drop(columns="seconds")
            for name, o in (
                ("exact", exact),
                ("fast", exact._replace(protocol="fast")),
                ("capped", exact._replace(protocol="fast", classify=exact.classify._replace(fast_train_controls=8))),
            )
        }
    pd.testing.assert_frame_equal(rows["fast"], rows["exact"], check_exact=True)
    pd.testing.assert_frame_equal(scored[1], scored[0], check_exact=True)
    assert not np.allclose(scored[2]["auroc"].to_numpy(), scored[0]["auroc"].to_numpy())
    for curve in ("batch_accuracy", "replicate_retrieval"):
        assert rows["capped"][curve].iloc[0] == rows["exact"][curve].iloc[0], curve


def test_a_points_null_takes_the_main_runs_layout():
    """30 distinct position-aware pseudo-guides: a null of 100 takes the plain layout (fewer than
    50), one of 50 alone would take the position layout (at least 25); a sweep point of 50
    pseudo-guides takes the main run's, so its null is the first of the main run's."""
    table = null_size_screen(400, control_wells=30)
    cfg = validate_config({"classify": {"n_null_guides": 100}, "sweep": {"null_guides": 50}})
    options = SweepOptions.from_config(cfg)
    assert options.point_null_guides(table) == 50
    assert point_null_layout(table, options) == "plain"
    position = options._replace(classify=options.classify._replace(n_null_guides=50))
    assert point_null_layout(table, position) == "position"
