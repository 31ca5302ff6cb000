"""Rule params carry exactly what a job's output depends on (phenoica.workflow.params.rule_params):
its script reads the same selection with the run-time keys (rule_settings), and those really
change nothing but speed."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from phenoica.contract.config import RULE_NAMES, validate_config
from phenoica.contract.schema import key_jobs, run_time_keys
from phenoica.workflow import params as wparams
from tests.conftest import REPO

RUN_TIME = set(run_time_keys("speed") + run_time_keys("screen-size"))


def _flat(selection: dict, prefix: str = "") -> set[str]:
    """The dotted keys of a (config-shaped) selection, down to its leaves."""
    out = set()
    for key, value in selection.items():
        dotted = f"{prefix}{key}"
        out |= _flat(value, dotted + ".") if isinstance(value, dict) and value else {dotted}
    return out


def test_params_are_the_settings_without_the_run_time_keys():
    """One selection read two ways: a rule's params are exactly what its script reads
    (rule_settings) less the run-time keys, so a script reads nothing that is not a param but the
    keys that change only speed, logs or which jobs exist."""
    cfg = validate_config({"classify": {"lightgbm": {"n_jobs": 4}}, "splits": {"scheme": "in_distribution"}})
    for rule in RULE_NAMES:
        settings, params = wparams.rule_settings(cfg, rule), wparams.rule_params(cfg, rule)
        assert not _flat(params) & RUN_TIME, rule
        less = {s: wparams.without_run_time(settings, s) if isinstance(v, dict) else v for s, v in settings.items()}
        less = {s: v for s, v in less.items() if v != {} or settings[s] == {}}  # a section of run-time keys only
        assert params == wparams.canonical(less) or rule in wparams.READS_BY_VALUE, rule
        assert _flat(params) <= _flat(settings), rule
    assert "batch_size" not in wparams.rule_params(cfg, "embed")["embed"]
    assert wparams.rule_settings(cfg, "embed")["embed"]["batch_size"] == cfg["embed"]["batch_size"]
    assert "n_jobs" not in wparams.rule_params(cfg, "classify")["classify"]["lightgbm"]
    assert wparams.rule_settings(cfg, "classify")["classify"]["lightgbm"]["n_jobs"] == 4
    for alias in ("num_thread", "nthread", "nthreads", "n_jobs", "verbose"):
        aliased = validate_config({"classify": {"lightgbm": {alias: 3}}})
        assert wparams.rule_params(aliased, "classify") == wparams.rule_params(validate_config({}), "classify")
    align = wparams.rule_params(cfg, "align")
    assert sorted(align) == ["identifiability", "seed"]
    assert sorted(align["identifiability"]) == [
        "ica",
        "ica_components",
        "ica_max_samples",
        "knn_k",
        "max_samples",
        "train_fraction",
    ]
    assert sorted(wparams.rule_params(cfg, "structural")["identifiability"]) == [
        "factor_bins",
        "infoe_max_iter",
        "max_samples",
    ]
    # hit-call keys reach the hit calls and the sweep, not the classifier nor the gather
    assert "hits" not in wparams.rule_params(cfg, "classify")
    assert wparams.rule_params(cfg, "component_sweep")["hits"]["q_threshold"] == cfg["hits"]["q_threshold"]
    assert wparams.rule_params(cfg, "call_hits") == {
        "classify": {"n_null_guides": cfg["classify"]["n_null_guides"]},
        "hits": {k: cfg["hits"][k] for k in ("null_model", "q_threshold")},
    }
    assert wparams.rule_params(cfg, "gather_scores") == {}
    assert "plates" not in wparams.rule_params(cfg, "train_mae")["train"]
    assert "seed" not in wparams.rule_params(cfg, "call_hits")
    with pytest.raises(KeyError, match="no rule 'clasify'"):
        wparams.rule_params(cfg, "clasify")


def test_every_key_reaches_a_rule_or_only_the_dag():
    """Every key of every section reaches some rule's settings, but the keys declared to reach no
    job (``x-jobs: []``: which jobs exist, read when the DAG is built), the models (each job's
    entry is its ``spec``) and the resources (the executor's): no run-time key is lost to the
    scripts, no result-changing key escapes the params."""
    cfg = validate_config({})
    reached = set().union(*(_flat(wparams.rule_settings(cfg, rule)) for rule in RULE_NAMES))
    declared = key_jobs()
    dag_only = {k for k, jobs in declared.items() if not jobs and k not in RUN_TIME}
    dag_only |= {k for k in _flat(cfg) if k not in declared}  # unannotated: inputs the DAG reads (screen.plate_map)
    skipped = {"results", "models", "default_models", "resources"}
    for key in _flat({k: v for k, v in cfg.items() if k not in skipped}):
        parts = key.split(".")
        assert key in reached or any(".".join(parts[:i]) in dag_only for i in range(1, len(parts) + 1)), key


def test_the_report_gets_the_lightgbm_parameters_the_classifiers_used():
    from phenoica.classify.params import lightgbm_params, lightgbm_report_params

    cfg = validate_config({"classify": {"lightgbm": {"num_leaves": 7, "n_jobs": 2}}})
    shown = lightgbm_report_params(wparams.rule_settings(cfg, "report"))
    used = lightgbm_params(cfg["classify"], cfg["seed"])
    assert shown["num_leaves"] == 7 == used["num_leaves"] and "n_jobs" not in shown and "seed" not in shown
    assert list(shown) == sorted(shown)


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


def test_rules_take_their_config_params_one_way():
    """The schema's x-jobs annotations name real rules, and every rule takes its config-derived
    params one way: ``**rule_params(config, "<the rule's own name>")`` where some key reaches it,
    beside values that are no config key (the models, the plate digests) or a job's own model
    entry (``config["models"][w.model]``); no section key read in a params block."""
    blocks = _rule_params()
    declared = key_jobs()
    assert {job for jobs in declared.values() for job in jobs} <= set(blocks)
    cfg = validate_config({"screen": {"source": "images", "plate_map": "p.csv", "images_dir": "i"}})
    wrong = []
    for rule, text in blocks.items():
        named = re.findall(r"\brule_params\(config, \"(\w+)\"\)", text)
        family = rule if rule in RULE_NAMES else None
        expected = [family] if family and wparams.rule_params(cfg, family) else []
        if named != expected:
            wrong.append(f"{rule}: params from rule_params {named}, expected {expected}")
        for read in re.findall(r"(?:config|BL|DIS)\[[^\]]+\](?:\[[^\]]+\])*", text):
            if not read.startswith('config["models"][w.model]'):
                wrong.append(f"{rule} reads {read} in its params")
    assert not wrong, wrong
    assert sum(bool(re.search(r"\brule_params\(", t)) for t in blocks.values()) >= 20  # the reader finds them
    # and a known answer: the classifier's key reaches classify and the sweep, a speed key none
    assert declared["classify.num_boost_round"] == ("classify", "component_sweep")
    assert declared["embed.batch_size"] == ()


def test_params_do_not_depend_on_key_order():
    cfg = validate_config({})
    flipped = {s: dict(reversed(list(v.items()))) if isinstance(v, dict) else v for s, v in reversed(list(cfg.items()))}
    for rule in RULE_NAMES:
        assert repr(wparams.rule_params(cfg, rule)) == repr(wparams.rule_params(flipped, rule)), rule
        assert repr(wparams.rule_settings(cfg, rule)) == repr(wparams.rule_settings(flipped, rule)), rule


def test_splits_params_are_what_the_scheme_reads():
    lobo = validate_config({"seed": 5, "splits": {"holdout_fraction": 0.4}})
    assert wparams.rule_params(lobo, "splits") == {"splits": {"scheme": "leave_one_batch_out"}}
    ind = validate_config({"seed": 3, "splits": {"scheme": "in_distribution", "n_folds": 2}})
    assert wparams.rule_params(ind, "splits") == {
        "seed": 3,
        "splits": {"holdout_fraction": 0.25, "n_folds": 2, "scheme": "in_distribution"},
    }


def test_scripts_read_their_settings_one_way():
    """A script reads the config once, through rule_settings of its own rule (the params plus the
    run-time keys: anything else it read would change its output without rerunning it), and
    takes from snakemake.params only values that are no config key of its rule."""
    top_level = set(validate_config({}))
    for script in sorted((REPO / "scripts").glob("*.py")):
        text = script.read_text()
        for line in text.splitlines():
            if "snakemake.config" in line:
                assert f'rule_settings(snakemake.config, "{script.stem}")' in line, f"{script.name}: {line.strip()}"
        assert text.count("snakemake.config") <= 1, f"{script.name} reads the config more than once"
        params = set(re.findall(r"snakemake\.params\.(\w+)", text)) | set(re.findall(r"\bp\.(\w+)", text))
        assert not params & top_level, f"{script.name} takes config values {params & top_level} from its params"
        assert "speed_settings" not in text and "job_params" not in text, script.name


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
    from phenoica.screen.demo.plates import simulate_plate

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
    params = wparams.rule_params(cfg, "bilipschitz_train")["bilipschitz"]
    assert params["seeds"] == cfg["bilipschitz"]["seeds"]
    assert not {"datasets", "alphas", "per_digit", "train_fraction"} & set(params)


def test_a_model_job_takes_its_own_entry_through_model_params():
    """train_mae reruns for the entry's shape, channels and seed, never for an embedding option
    (pool); embed reruns for any key of the entry; a rule that reads no entry is refused."""
    from types import SimpleNamespace

    cfg = validate_config({})
    name = sorted(cfg["models"])[0]
    job = SimpleNamespace(model=name)
    train, embed = wparams.model_params(cfg, "train_mae"), wparams.model_params(cfg, "embed")
    entry = cfg["models"][name]
    assert train(job)["seed"] == entry["seed"] and "pool" not in train(job)["spec"]
    assert embed(job) == {"spec": wparams.canonical(entry)}
    other = {**cfg, "models": {name: {**entry, "pool": "cls" if entry.get("pool") != "cls" else "mean"}}}
    assert wparams.model_params(other, "train_mae")(job) == train(job)
    assert wparams.model_params(other, "embed")(job) != embed(job)
    with pytest.raises(KeyError, match="reads no models entry"):
        wparams.model_params(cfg, "classify")
