"""Config validation: defaults filled from the schema, unknown keys named, cross-key rules."""

from __future__ import annotations

import pytest
import yaml

from phenoica.contract import ConfigError, deep_merge, demo_plates, load_config, read_yaml, validate_config
from tests.conftest import REPO


def test_empty_config_gets_every_default():
    cfg = validate_config({})
    assert cfg["screen"]["source"] == "demo"
    assert cfg["classify"]["lightgbm"]["learning_rate"] == 0.05  # Nelson et al. 2026, Table 6
    assert cfg["classify"]["lightgbm"]["feature_fraction"] == 0.6
    assert cfg["classify"]["concentration_k"] == 0.25
    assert cfg["models"]["mae"]["patch_size"] == 2  # defaults fill inside named models
    assert cfg["transforms"]["variants"] == ["base", "pca", "pca_ica", "pca_rand"]


def test_shipped_config_is_valid_and_defaults_do_not_leak_between_calls():
    cfg = load_config(REPO / "config.yaml")
    cfg["demo"]["channels"].append("extra")
    assert validate_config({})["demo"]["channels"] == ["nucleus", "er", "actin", "mito", "golgi"]


@pytest.mark.parametrize(
    "raw, needle",
    [
        ({"classify": {"n_shard": 3}}, "classify"),
        ({"clasify": {}}, "clasify"),
        ({"models": {"a": {"pach_size": 8}}}, "models.a"),
        ({"demo": {"n_batches": "four"}}, "demo.n_batches"),
        ({"transforms": {"variants": ["pca", "ica"]}}, "transforms.variants"),
    ],
)
def test_unknown_or_mistyped_key_is_named(raw, needle):
    with pytest.raises(ConfigError) as err:
        validate_config(raw)
    assert needle in str(err.value)


def test_cross_key_rules():
    with pytest.raises(ConfigError, match="screen.metadata"):
        validate_config({"screen": {"source": "zarr", "plates_dir": "x"}})
    with pytest.raises(ConfigError, match="patch_size"):
        validate_config({"models": {"m": {"img_size": 30, "patch_size": 8}}})
    with pytest.raises(ConfigError, match="n_components"):
        validate_config({"transforms": {"n_components": "all"}})
    with pytest.raises(ConfigError, match="n_null_genes"):
        validate_config({"demo": {"n_genes": 2, "n_null_genes": 3}})
    with pytest.raises(ConfigError, match="n_null_guides is 2.*at least 3"):
        validate_config({"classify": {"n_null_guides": 2}, "hits": {"null_model": "parametric"}})
    assert (
        validate_config({"classify": {"n_null_guides": 2}, "hits": {"null_model": "empirical"}})["classify"][
            "n_null_guides"
        ]
        == 2
    )


def test_overrides_merge_deeply(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"demo": {"n_batches": 3}}))
    cfg = load_config(path, {"demo": {"sites_per_well": 1}})
    assert cfg["demo"]["n_batches"] == 3 and cfg["demo"]["sites_per_well"] == 1
    assert deep_merge({"a": {"b": 1, "c": 2}}, {"a": {"b": 3}}) == {"a": {"b": 3, "c": 2}}


def test_demo_plate_names():
    plates = demo_plates({"n_batches": 2, "plates_per_batch": 3})
    assert plates[0] == ("B01", "B01P01") and plates[-1] == ("B02", "B02P03") and len(plates) == 6


def test_validate_config_fills_defaults_and_names_the_key():
    """One place for every default and check: validate_config (the options read what it filled)."""
    from phenoica.contract import _config as C

    full = C.validate_config({})
    assert C.validate_config({"classify": {"num_boost_round": 5}})["classify"] == {
        **full["classify"],
        "num_boost_round": 5,
    }
    with pytest.raises(C.ConfigError, match=r"config key transforms.batch_rows: .*0"):
        C.validate_config({"transforms": {"batch_rows": 0}})
    with pytest.raises(C.ConfigError, match=r"num_boost_rounds"):
        C.validate_config({"classify": {"num_boost_rounds": 5}})
    with pytest.raises(C.ConfigError, match=r"models.m.embed_dim \(30\) is not divisible by num_heads \(4\)"):
        C.check_model_geometry({"img_size": 16, "patch_size": 4, "embed_dim": 30, "num_heads": 4}, "models.m")


def test_run_models_replaces_the_models_the_user_names():
    from phenoica.contract import run_models
    from phenoica.contract._config import EMBEDDINGS_MODEL

    repo = yaml.safe_load((REPO / "config.yaml").read_text())
    assert "models" not in repo and set(repo["default_models"]) == {"mae"}
    user = {"models": {"ext": {"checkpoint": "/w.safetensors"}}}
    merged = deep_merge(repo, user)  # what Snakemake hands the workflow: dictionaries merged
    assert set(validate_config(run_models(merged))["models"]) == {"ext"}
    assert set(validate_config(run_models(repo))["models"]) == {"mae"}  # names none: the demo's
    assert set(validate_config(run_models({}))["models"]) == {"mae"}  # no config.yaml: the schema's default

    emb = {"screen": {"source": "embeddings", "embeddings": "/e/*.parquet"}}
    assert run_models(deep_merge(repo, emb))["models"] == {EMBEDDINGS_MODEL: {}}
    assert list(run_models(deep_merge(repo, {**emb, **user}))["models"]) == ["ext"]
    with pytest.raises(ConfigError, match=r"reads one embedding set .* names \['a', 'b'\]"):
        run_models(repo | emb | {"models": {"a": {}, "b": {}}})
    sets = {"screen": {"source": "embeddings", "embeddings": {"a": "/a/*.parquet", "b": "/b/*.parquet"}}}
    got = run_models(deep_merge(repo, sets))
    assert got["models"] == {"a": {}, "b": {}}
    cfg = validate_config(got)
    from phenoica.contract import embedding_globs

    assert embedding_globs(cfg) == {"a": "/a/*.parquet", "b": "/b/*.parquet"}
    with pytest.raises(ConfigError, match=r"models \['c'\] have no embedding set"):
        run_models(deep_merge(repo, {**sets, "models": {"c": {}}}))


def test_yaml_is_read_strictly_but_merge_keys_may_be_overridden(tmp_path):
    """A key twice in one mapping names both lines (Snakemake's reader would keep the second
    silently; rules/common.smk reads the files it was given with check_yaml_files); every config
    the repository ships reads cleanly."""
    from phenoica.contract import check_yaml_files

    check_yaml_files([REPO / "config.yaml", *sorted((REPO / "config").glob("**/*.yaml"))])
    (tmp_path / "c.yaml").write_text("models:\n  m:\n    depth: 2\n    seed: 0\n    depth: 3\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: key 'depth' appears twice in one mapping, at line 3 and line 5"):
        check_yaml_files([tmp_path / "c.yaml"])


def test_the_second_seed_is_the_demos_mae_at_another_seed():
    """config/second_seed.yaml, merged onto config.yaml as Snakemake merges --configfile files,
    adds the demo's MAE at seed 1 (every architecture and training key the first's) and scores
    the first alone, so Table 1 compares two seeds of one model."""
    from phenoica.contract import run_models
    from phenoica.models import TrainOptions

    repo = read_yaml(REPO / "config.yaml")
    overlay = read_yaml(REPO / "config" / "second_seed.yaml")
    merged = validate_config(run_models(deep_merge(repo, overlay)))
    assert list(merged["models"]) == ["mae", "mae_seed1"]
    mae, seed1 = merged["models"]["mae"], merged["models"]["mae_seed1"]
    assert (mae["seed"], seed1["seed"]) == (0, 1)
    assert {k: v for k, v in seed1.items() if k != "seed"} == {k: v for k, v in mae.items() if k != "seed"}
    first, second = (TrainOptions.from_config(merged, model=m) for m in ("mae", "mae_seed1"))
    assert first._replace(model_seed=second.model_seed) == second
    assert (first.training_seed, second.training_seed) == (0, 1)
    assert merged["classify"]["models"] == 1 and merged["sweep"]["models"] == 1
    assert "classify" not in repo or "models" not in repo["classify"]


def test_adding_the_second_seed_changes_no_option_of_the_first_seeds_jobs():
    """Every rule's options for `mae` (what Snakemake records as its params) are the same with and
    without config/second_seed.yaml, so adding it to a finished default run reruns none of the
    first seed's jobs (the rules whose params list the models, as plate_positions does, read
    every model and rerun, as they should)."""
    import importlib

    from phenoica.contract import RULE_OPTIONS, run_models

    for path in sorted((REPO / "src" / "phenoica").rglob("_options.py")):
        importlib.import_module(".".join(path.relative_to(REPO / "src").with_suffix("").parts))
    repo = read_yaml(REPO / "config.yaml")
    alone = validate_config(run_models(repo))
    both = validate_config(run_models(deep_merge(repo, read_yaml(REPO / "config" / "second_seed.yaml"))))
    assert len(RULE_OPTIONS) >= 25 and list(both["models"]) == ["mae", "mae_seed1"]
    for rule, options in RULE_OPTIONS.items():
        assert repr(options.from_config(alone, model="mae")) == repr(options.from_config(both, model="mae")), rule
    assert repr(RULE_OPTIONS["train_mae"].from_config(both, model="mae_seed1")) != repr(
        RULE_OPTIONS["train_mae"].from_config(both, model="mae")
    )


def test_the_demo_is_noted_only_when_the_config_names_no_screen():
    from phenoica.contract import planned_demo_note

    assert "the simulated demo screen is planned" in planned_demo_note({"results": "r"})
    assert "6 simulated plates" in planned_demo_note({"screen": {}, "demo": {"n_batches": 3, "plates_per_batch": 2}})
    assert planned_demo_note({"screen": {"source": "demo"}}) is None  # the demo, named
    assert planned_demo_note({"screen": {"source": "zarr", "metadata": "m.csv"}}) is None
