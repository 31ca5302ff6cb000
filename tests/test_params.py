"""Rule params carry exactly what a job's output depends on (phenoica.workflow.job_params):
speed-only keys are read at run time instead, and really change nothing but speed."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from phenoica import workflow as wf
from phenoica.config import validate_config
from tests.conftest import REPO

SECTIONS = ("screen", "demo", "train", "embed", "profiles", "transforms", "splits", "classify", "identifiability")


def test_params_leave_out_speed_only_keys_and_scripts_get_them_back():
    cfg = validate_config({"classify": {"lightgbm": {"n_jobs": 4}}})
    for section in SECTIONS:
        params = wf.job_params(cfg, section)
        flat = {f"{section}.{k}" for k in params} | {f"{section}.lightgbm.{k}" for k in params.get("lightgbm", {})}
        assert not flat & set(wf.SPEED_ONLY_KEYS + wf.SCREEN_SIZE_KEYS), section
        assert wf.with_speed_settings(params, cfg, section) == cfg[section], section
    assert "batch_size" not in wf.job_params(cfg, "embed") and "crop_size" in wf.job_params(cfg, "embed")
    assert "n_jobs" not in wf.job_params(cfg, "classify")["lightgbm"]
    for alias in ("num_thread", "nthread", "nthreads", "n_jobs", "verbose"):
        aliased = validate_config({"classify": {"lightgbm": {alias: 3}}})
        assert wf.job_params(aliased, "classify") == wf.job_params(validate_config({}), "classify"), alias
    assert wf.job_params(cfg, "identifiability", keys=wf.ALIGN_KEYS) == {
        k: cfg["identifiability"][k] for k in sorted(wf.ALIGN_KEYS)
    }
    assert wf.job_params(cfg, "classify", drop=("q_threshold",)).get("q_threshold") is None


def test_params_do_not_depend_on_key_order():
    cfg = validate_config({})
    flipped = {s: dict(reversed(list(v.items()))) if isinstance(v, dict) else v for s, v in reversed(list(cfg.items()))}
    for section in SECTIONS:
        assert repr(wf.job_params(cfg, section)) == repr(wf.job_params(flipped, section)), section
    assert list(wf.canonical({"b": {"d": 1, "c": 2}, "a": [{"z": 0, "y": 1}]})) == ["a", "b"]
    assert repr(wf.canonical({"b": {"d": 1, "c": 2}})) == "{'b': {'c': 2, 'd': 1}}"


def test_splits_params_are_what_the_scheme_reads():
    lobo = validate_config({"splits": {"holdout_fraction": 0.4}})
    assert wf.splits_params(lobo) == {"scheme": "leave_one_batch_out"}
    ind = validate_config({"seed": 3, "splits": {"scheme": "in_distribution", "n_folds": 2}})
    assert wf.splits_params(ind) == {"holdout_fraction": 0.25, "n_folds": 2, "scheme": "in_distribution", "seed": 3}


def test_scripts_read_the_config_only_for_run_time_keys():
    """Anything else a script read from snakemake.config would change its output without
    rerunning it: every other value arrives as a param."""
    for script in sorted((REPO / "scripts").glob("*.py")):
        for line in script.read_text().splitlines():
            if "snakemake.config" in line:
                assert re.search(r"\b(with_speed_settings|speed_settings)\(", line), f"{script.name}: {line.strip()}"


def test_lightgbm_thread_count_changes_no_score():
    from phenoica.classify.engine import classify_shard
    from phenoica.classify.params import ClassifyOptions
    from tests.test_classify import CFG, batch_folds, make_table

    table = make_table()
    folds = batch_folds(table)
    runs = [
        classify_shard(
            table, 0, 1, folds, ClassifyOptions.from_config({**CFG, "lightgbm": {"num_threads": n}}, 0), variant="base"
        )
        for n in (1, 2)
    ]
    pd.testing.assert_frame_equal(runs[0], runs[1])
    assert (runs[0]["status"] == "ok").any()


def test_a_demo_plate_does_not_depend_on_the_screen_size():
    """demo.n_batches / plates_per_batch are not simulate_plate's params: a plate must not change
    when batches are added."""
    from phenoica.sources.demo.plates import simulate_plate

    demo = validate_config(
        {
            "demo": {
                "n_batches": 2,
                "image_size": 16,
                "sites_per_well": 1,
                "n_genes": 2,
                "n_null_genes": 1,
                "control_wells_per_plate": 2,
            }
        }
    )["demo"]
    small = simulate_plate(demo, 0, "B02P01")
    large = simulate_plate({**demo, "n_batches": 5, "plates_per_batch": 3}, 0, "B02P01")
    np.testing.assert_array_equal(small[0], large[0])
    pd.testing.assert_frame_equal(small[1], large[1])


def test_the_same_training_writes_the_same_checkpoint_bytes(tmp_path):
    """Downstream files record the checkpoint's SHA-256, so a rerun is byte-identical only if
    the checkpoint is: it holds what training made, not how long it took."""
    from phenoica.mae import train_mae
    from phenoica.screen import write_plate
    from tests.test_mae import SPEC, TRAIN, cell_tiles

    store = write_plate(tmp_path / "p.zarr", cell_tiles(16), ["dna", "er", "actin"], chunk_images=8)
    paths = [tmp_path / f"m{i}.safetensors" for i in range(2)]
    for path in paths:
        train_mae([store], SPEC, TRAIN, seed=3, out=path, device="cpu")
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_bilipschitz_train_params_hold_every_key_one_job_reads():
    """One bilipschitz_train job trains every seed of its (dataset, group, alpha): the seeds are
    its params (a change reruns it), the sweep's wildcard keys are not."""
    cfg = validate_config({})
    params = wf.job_params(cfg, "bilipschitz", drop=wf.BILIPSCHITZ_SWEEP_KEYS)
    assert params["seeds"] == cfg["bilipschitz"]["seeds"]
    assert not {"datasets", "alphas", "per_digit", "train_fraction"} & set(params)
