"""Rule params carry exactly what a job's output depends on (phenoica.workflow.params.job_params):
speed-only keys are read at run time instead, and really change nothing but speed."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from phenoica.contract.config import validate_config
from phenoica.contract.schema import key_jobs, run_time_keys
from phenoica.workflow import params as wparams
from tests.conftest import REPO

#: (section, rule) pairs whose rules take their section's params through job_params
JOBS = (
    ("demo", "simulate_plate"),
    ("train", "train_mae"),
    ("embed", "embed"),
    ("profiles", "gather_profiles"),
    ("transforms", "fit_transforms"),
    ("transforms", "component_sweep"),
    ("splits", "splits"),
    ("classify", "classify"),
    ("classify", "component_sweep"),
    ("identifiability", "align"),
    ("biomap", "biomap"),
)
RUN_TIME = set(run_time_keys("speed") + run_time_keys("screen-size"))


def test_params_leave_out_speed_only_keys_and_scripts_get_them_back():
    cfg = validate_config({"classify": {"lightgbm": {"n_jobs": 4}}})
    for section, job in JOBS:
        params = wparams.job_params(cfg, section, job)
        flat = {f"{section}.{k}" for k in params} | {f"{section}.lightgbm.{k}" for k in params.get("lightgbm", {})}
        assert not flat & RUN_TIME, (section, job)
    # the jobs that read a whole section get all of it back at run time
    for section, job in (("embed", "embed"), ("classify", "component_sweep"), ("profiles", "gather_profiles")):
        assert wparams.with_speed_settings(wparams.job_params(cfg, section, job), cfg, section) == cfg[section], section
    assert "batch_size" not in wparams.job_params(cfg, "embed", "embed") and "crop_size" in wparams.job_params(
        cfg, "embed", "embed"
    )
    assert "n_jobs" not in wparams.job_params(cfg, "classify", "classify")["lightgbm"]
    for alias in ("num_thread", "nthread", "nthreads", "n_jobs", "verbose"):
        aliased = validate_config({"classify": {"lightgbm": {alias: 3}}})
        assert wparams.job_params(aliased, "classify", "classify") == wparams.job_params(
            validate_config({}), "classify", "classify"
        )
    align = wparams.job_params(cfg, "identifiability", "align")
    assert sorted(align) == ["ica", "ica_components", "ica_max_samples", "knn_k", "max_samples", "train_fraction"]
    assert sorted(wparams.job_params(cfg, "identifiability", "structural")) == [
        "factor_bins",
        "infoe_max_iter",
        "max_samples",
    ]
    # hit-call keys reach the gather and the sweep, not the classifier
    assert "q_threshold" not in wparams.job_params(cfg, "classify", "classify")
    assert wparams.job_params(cfg, "classify", "component_sweep")["q_threshold"] == cfg["classify"]["q_threshold"]
    assert "plates" not in wparams.job_params(cfg, "train", "train_mae") and "steps" in wparams.job_params(
        cfg, "train", "train_mae"
    )
    with pytest.raises(KeyError, match="no config key of the schema reaches a job 'clasify'"):
        wparams.job_params(cfg, "classify", "clasify")


def _rule_params() -> dict[str, str]:
    """rule name -> the text of its ``params:`` directive, from every .smk file."""
    blocks: dict[str, str] = {}
    for path in sorted((REPO / "rules").glob("*.smk")):
        # a family of rules written once in a loop (``rule:`` / ``name: embed_rule.name``) counts as its family
        text = re.sub(r"^(\s*)rule:\n\s*name:\n\s*(\w+)_rule\.name\n", r"\1rule \2:\n", path.read_text(), flags=re.M)
        parts = re.split(r"^\s*(?:rule|checkpoint) (\w+):", text, flags=re.M)
        for name, body in zip(parts[1::2], parts[2::2]):
            found = re.search(r"^(\s*)params:\n(.*?)(?=^\1\w+:|\Z)", body, flags=re.M | re.S)
            blocks[name] = found.group(2) if found else ""
    return blocks


def test_every_annotated_job_is_a_rule_and_every_rule_read_is_declared():
    """The schema's x-jobs annotations (which keys reach which rule) name real rules, and a
    rule that takes a key as a single value (config["section"]["key"] in its params) is among the
    rules that key declares."""
    blocks = _rule_params()
    declared = key_jobs()
    assert {job for jobs in declared.values() for job in jobs} <= set(blocks)
    aliases = {"BL": "bilipschitz"}
    undeclared, checked = [], 0
    for rule, text in blocks.items():
        reads = re.findall(r'config\["(\w+)"\]\["(\w+)"\]', text)
        reads += [(aliases[a], k) for a, k in re.findall(r'\b(BL)\["(\w+)"\]', text)]
        for section, key in reads:
            dotted = f"{section}.{key}"
            checked += dotted in declared
            if dotted in declared and rule not in declared[dotted]:
                undeclared.append(f"{rule} reads {dotted} (declared for {list(declared[dotted])})")
    assert not undeclared, undeclared
    assert checked >= 10  # the reader finds the rules' single-value reads
    # and a known answer: the classifier's key reaches classify and the sweep, a speed key none
    assert declared["classify.num_boost_round"] == ("classify", "component_sweep")
    assert declared["embed.batch_size"] == ()


def test_params_do_not_depend_on_key_order():
    cfg = validate_config({})
    flipped = {s: dict(reversed(list(v.items()))) if isinstance(v, dict) else v for s, v in reversed(list(cfg.items()))}
    for section, job in JOBS:
        assert repr(wparams.job_params(cfg, section, job)) == repr(wparams.job_params(flipped, section, job)), section


def test_splits_params_are_what_the_scheme_reads():
    lobo = validate_config({"splits": {"holdout_fraction": 0.4}})
    assert wparams.splits_params(lobo) == {"scheme": "leave_one_batch_out"}
    ind = validate_config({"seed": 3, "splits": {"scheme": "in_distribution", "n_folds": 2}})
    assert wparams.splits_params(ind) == {
        "holdout_fraction": 0.25,
        "n_folds": 2,
        "scheme": "in_distribution",
        "seed": 3,
    }


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
    from phenoica.contract.screen import write_plate
    from phenoica.models.mae import TrainOptions, train_mae
    from tests.test_mae import SPEC, TRAIN, cell_tiles

    store = write_plate(tmp_path / "p.zarr", cell_tiles(16), ["dna", "er", "actin"], chunk_images=8)
    paths = [tmp_path / f"m{i}.safetensors" for i in range(2)]
    for path in paths:
        train_mae([store], SPEC, TrainOptions.from_config(TRAIN, device="cpu"), seed=3, out=path)
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_bilipschitz_train_params_hold_every_key_one_job_reads():
    """One bilipschitz_train job trains every seed of its (dataset, group, alpha): the seeds are
    its params (a change reruns it), the sweep's wildcard keys are not."""
    cfg = validate_config({})
    params = wparams.job_params(cfg, "bilipschitz", "bilipschitz_train")
    assert params["seeds"] == cfg["bilipschitz"]["seeds"]
    assert not {"datasets", "alphas", "per_digit", "train_fraction"} & set(params)
