"""A stage's options are its rule's params and what its script hands to the library
(phenoica.contract._stage_options): Snakemake records a param by its repr, and an options object's repr
holds exactly what the stage's output depends on, so a change of one of those keys reruns the
stage and a run-time key (speed, memory, layout, logs, which jobs exist) reruns nothing."""

from __future__ import annotations

import pickle
import re
from typing import Annotated, NamedTuple

import numpy as np
import pandas as pd
import pytest

from phenoica.classify import ClassifyOptions
from phenoica.contract import Setting, composed, package_schema, settings_of, stage_options, validate_config
from phenoica.contract._stage_options import params_fields
from phenoica.workflow.config_reference import key_rules, load_stage_options
from tests.conftest import REPO

#: Keys no job's options read: they decide which jobs exist or which files a rule reads, and are
#: read when the DAG is built (rules/common.smk, phenoica.workflow._rule_inputs) or by the check at
#: the door (the screen's inputs), each through the files it names.
READ_WHEN_THE_DAG_IS_BUILT = {
    "results",
    "adopt_results",
    "resources",
    "models",
    "default_models",
    "screen",
    "train.plates",
    "train.max_plates",
    "biomap.enabled",
    "transforms.frozen",
    "classify.map_readout",
    "classify.models",
    "identifiability.align",
    "identifiability.structural",
    "transforms.variants",
    "sweep.models",
    "sweep.variants",
    "disentangle.datasets",
    "disentangle.models",
    "disentangle.seeds",
    "bilipschitz.datasets",
    "bilipschitz.alphas",
    "bilipschitz.per_digit",
}


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


def _leaves(schema: dict, prefix: str = "") -> set[str]:
    """The dotted keys of the schema down to its leaves (``models.NAME.pool``; an open mapping
    such as ``classify.lightgbm`` is one leaf)."""
    out = set()
    for key, sub in (schema.get("properties") or {}).items():
        dotted = f"{prefix}{key}"
        extra = sub.get("additionalProperties")
        if "$ref" in (extra or {}):
            extra = package_schema()["$defs"][extra["$ref"].rsplit("/", 1)[-1]]
        if sub.get("type") == "object" and "properties" in sub and key != "lightgbm":
            out |= _leaves(sub, dotted + ".")
        elif isinstance(extra, dict) and "properties" in extra:
            out |= _leaves(extra, dotted + ".NAME.")
        else:
            out.add(dotted)
    return out


def test_every_rule_takes_its_options_one_way():
    """A rule whose jobs read the config takes one param built from it, ``options=`` the class
    registered for that rule (``.from_config(config)``, or per model job ``.from_config(config,
    model=w.model)``); nothing else in a params block reads the config."""
    registry = load_stage_options()
    blocks = _rule_params()
    # an options object a rules file builds once for more than the params (the report's inputs)
    built = {}
    for path in (REPO / "rules").glob("*.smk"):
        built.update(re.findall(r"^([A-Z_]+) = (\w+)\.from_config\(config\)$", path.read_text(), flags=re.M))
    assert set(registry) <= set(blocks), set(registry) - set(blocks)
    wrong = []
    for rule, text in blocks.items():
        named = re.findall(r"options=(?:lambda w: )?(\w+)\.from_config\(config(?:, model=w\.model)?\)", text)
        named += [built[name] for name in re.findall(r"options=([A-Z_]+),", text)]
        expected = [registry[rule].__name__] if rule in registry else []
        if named != expected:
            wrong.append(f"{rule}: params options from {named}, expected {expected}")
        if re.search(r"\bconfig\[", text):
            wrong.append(f"{rule} reads the config in its params: {text.strip()}")
    assert not wrong, wrong
    assert len(registry) >= 20  # the reader finds them


def test_scripts_read_the_config_only_through_their_options():
    for script in sorted((REPO / "scripts").glob("*.py")):
        text = script.read_text()
        assert "snakemake.config" not in text and "rule_settings" not in text, script.name


def _models(config: dict) -> list[str]:
    return sorted(config["models"])


@pytest.mark.parametrize("scenario", sorted(p.stem for p in (REPO / "config" / "scenarios").glob("*.yaml")))
def test_every_options_class_builds_from_every_scenario(scenario):
    """Each field's key exists in a validated config (the scenarios', the defaults'), the params
    text does not depend on key order, and an options object survives the pickle that hands it
    to a script."""
    from phenoica.contract import read_yaml, run_models

    config = validate_config(run_models(read_yaml(REPO / "config" / "scenarios" / f"{scenario}.yaml")))
    flipped = {k: dict(reversed(list(v.items()))) if isinstance(v, dict) else v for k, v in reversed(config.items())}
    for rule, cls in load_stage_options().items():
        per_model = any("{model}" in s.key for s in settings_of(cls).values())
        for names in [{"model": m} for m in _models(config)] if per_model else [{}]:
            options = cls.from_config(config, **names)
            assert repr(options) == repr(cls.from_config(flipped, **names)), rule
            again = pickle.loads(pickle.dumps(options))
            assert again == options and repr(again) == repr(options), rule


@stage_options()
class OneShardClassify(NamedTuple):
    """Options that hold another stage's (the classification's, as one shard) beside a key of their own."""

    classify: Annotated[ClassifyOptions, composed(n_shards=1)]
    points: Annotated[int, Setting("sweep.points")]


def test_options_held_by_another_stage_are_built_by_their_own_class():
    """A composed field is its class built from the same config, its fixed fields replaced: the
    keys it reads are its class's less the fixed ones, and its params text is its class's."""
    config = validate_config({"classify": {"n_shards": 4, "num_boost_round": 7}, "sweep": {"points": 3}})
    options = OneShardClassify.from_config(config)
    assert options.classify == ClassifyOptions.from_config(config)._replace(n_shards=1) and options.points == 3
    held = {f"classify.{name}": s for name, s in settings_of(ClassifyOptions).items() if name != "n_shards"}
    assert settings_of(OneShardClassify) == {**held, "points": Setting("sweep.points")}
    assert repr(options) == f"OneShardClassify(classify={options.classify!r}, points=3)"
    assert "num_threads" not in repr(options)  # the held class's run-time fields stay out
    more_shards = validate_config({**config, "classify": {**config["classify"], "n_shards": 9}})
    assert repr(OneShardClassify.from_config(more_shards)) == repr(options)  # a fixed field's key is not read
    assert pickle.loads(pickle.dumps(options)) == options

    with pytest.raises(TypeError, match=r"Unknown.classify: ClassifyOptions has no field\(s\) \['shards'\]"):

        @stage_options()
        class Unknown(NamedTuple):
            classify: Annotated[ClassifyOptions, composed(shards=1)]

    with pytest.raises(TypeError, match=r"Plain.points: Composed needs a stage_options class"):

        @stage_options()
        class Plain(NamedTuple):
            points: Annotated[int, composed()]


def test_run_time_fields_are_no_part_of_the_params():
    base = ClassifyOptions.from_config(validate_config({}))
    assert "lightgbm_run_time" not in params_fields(base) and "num_threads" not in repr(base)
    for change in ({"num_threads": 3}, {"n_jobs": 2}, {"verbosity": 1}, {"nthread": 2}, {"verbose": 0}):
        other = ClassifyOptions.from_config(validate_config({"classify": {"lightgbm": change}}))
        assert repr(other) == repr(base), change
        assert other.lightgbm_run_time != base.lightgbm_run_time, change  # the library still gets it
    for change in ({"num_boost_round": 7}, {"lightgbm": {"num_leaves": 7}}, {"n_null_guides": 5}):
        assert repr(ClassifyOptions.from_config(validate_config({"classify": change}))) != repr(base), change
    # an alias of a model parameter is the same parameter
    alias = ClassifyOptions.from_config(validate_config({"classify": {"lightgbm": {"reg_alpha": 2.0}}}))
    canon = ClassifyOptions.from_config(validate_config({"classify": {"lightgbm": {"lambda_l1": 2.0}}}))
    assert repr(alias) == repr(canon)


def test_every_schema_key_is_read_by_a_stage_or_when_the_dag_is_built():
    """No key of the schema is read by nobody: each is a field of some stage's options (itself or
    a mapping holding it), or one of the keys read when the DAG is built."""
    read = set(key_rules())
    missing = []
    for key in sorted(_leaves(package_schema())):
        parts = key.split(".")
        prefixes = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        if not prefixes & (read | READ_WHEN_THE_DAG_IS_BUILT):
            missing.append(key)
    assert not missing, missing


def test_the_reference_names_the_rules_a_key_reruns():
    from phenoica.workflow.config_reference import config_reference

    table = config_reference()
    row = next(line for line in table.splitlines() if line.startswith("| `classify.num_boost_round` "))
    assert "`classify`" in row and "`map_readout`" not in row
    row = next(line for line in table.splitlines() if line.startswith("| `classify.map_null_size` "))
    assert "`map_readout`" in row and "`classify`" not in row.split("|")[3]


def test_lightgbm_thread_count_changes_no_score():
    from phenoica.classify import classify_shard
    from tests.test_classify import CFG, batch_folds, classify_options, make_table

    table = make_table()
    folds = batch_folds(table)
    runs = [
        classify_shard(
            table, 0, folds, classify_options({**CFG, "n_shards": 1, "lightgbm": {"num_threads": n}}), variant="base"
        )
        for n in (1, 2)
    ]
    pd.testing.assert_frame_equal(runs[0], runs[1])
    assert (runs[0]["status"] == "ok").any()


def test_a_demo_plate_does_not_depend_on_the_screen_size():
    """demo.n_batches / plates_per_batch are not simulate_plate's params: a plate must not change
    when batches are added."""
    from phenoica.screen import DemoOptions
    from phenoica.screen.demo._plates import simulate_plate

    demo = DemoOptions.from_config(
        validate_config(
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
        )
    )
    small = simulate_plate(demo, "B02P01")
    larger = demo._replace(n_batches=5, plates_per_batch=3)
    assert repr(larger) == repr(demo)  # the plate counts are no part of the params
    large = simulate_plate(larger, "B02P01")
    np.testing.assert_array_equal(small[0], large[0])
    pd.testing.assert_frame_equal(small[1], large[1])
