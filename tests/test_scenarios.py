"""The checked-in scenario configs (config/scenarios/) run as they are, from a folder holding
the inputs `python -m phenoica.screen.scenarios` writes; and the models a user's config names are
exactly the run's models, and a ``--configfile`` is the whole config (dry runs)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.test_workflow import SCENARIOS, Configs, planned_jobs, snakemake, write_config


@pytest.fixture(scope="module")
def scenario_data(tmp_path_factory) -> Path:
    """The inputs of every scenario (phenoica.screen.scenarios.prepare), written once per module."""
    from phenoica.screen.scenarios import prepare_from_config

    data = tmp_path_factory.mktemp("scenario_inputs") / "scenario_data"
    prepare_from_config(SCENARIOS / "demo.yaml", data)
    return data


def scenario(name: str, workdir: Path, data: Path, own_metadata: bool = False) -> dict:
    """A working folder for ``config/scenarios/{name}.yaml`` as it is (its config.yaml) with
    ``scenario_data`` linked in; ``own_metadata`` copies the screen's metadata table so that a
    test may edit it. Returns the validated config."""
    from phenoica.contract import validate_config

    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(SCENARIOS / f"{name}.yaml", workdir / "config.yaml")
    if own_metadata:
        (workdir / "scenario_data" / "screen").mkdir(parents=True)
        shutil.copy(data / "screen" / "metadata.parquet", workdir / "scenario_data" / "screen" / "metadata.parquet")
        (workdir / "scenario_data" / "screen" / "plates").symlink_to(data / "screen" / "plates")
    else:
        (workdir / "scenario_data").symlink_to(data)
    return validate_config(yaml.safe_load((workdir / "config.yaml").read_text()))


def test_scenario_configs_are_valid_and_share_the_demo_settings():
    """Every scenario is a complete config; those that embed images use the demo scenario's
    models, training and classification settings, so they differ only in where the screen comes from."""
    from phenoica.contract import validate_config
    from phenoica.screen import SCENARIOS as NAMES

    assert sorted(p.stem for p in SCENARIOS.glob("*.yaml")) == sorted(NAMES)
    configs = {name: yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text()) for name in NAMES}
    for name, cfg in configs.items():
        embeddings = ("positive_control", "cell_state", "arrayed", "arrayed_plates", "varchamp", "varchamp_microscopes")
        source = {"demo": "demo", "frozen": "demo", **{name: "embeddings" for name in embeddings}}
        assert validate_config(cfg)["screen"]["source"] == source.get(name, name), name
    shared = ("models", "train", "embed", "classify")
    for name in ("zarr", "images", "ome_zarr", "frozen"):
        assert {k: configs[name][k] for k in shared} == {k: configs["demo"][k] for k in shared}, name
    assert len({cfg["results"] for cfg in configs.values()}) == len(configs)  # no scenario overwrites another


def test_zarr_and_frozen_scenarios_plan_their_jobs(scenario_data, tmp_path, monkeypatch):
    """Dry runs of the scenarios: one job per plate for the user's stores (zarr); frozen
    transforms are applied, not refitted (ome_zarr and images run for real, marked slow). For zarr, the per-plate digest
    changes only for the plate whose rows change, so only its jobs rerun."""
    cfg = scenario("zarr", tmp_path / "zarr", scenario_data, own_metadata=True)
    jobs = planned_jobs(tmp_path / "zarr")
    assert jobs["plate_metadata"] == 3 and jobs["embed"] == 2 * 3 and "simulate_plate" not in jobs, jobs
    from phenoica.workflow import _dag as workflow
    from phenoica.workflow import _digests as digests

    monkeypatch.chdir(tmp_path / "zarr")  # the scenario's paths are relative to its folder
    before = {p: digests.plate_digest(cfg, p) for p in ("B01P01", "B02P01", "B03P01")}
    table = Path(cfg["screen"]["metadata"])
    edited = pd.read_parquet(table)
    edited.loc[edited["Metadata_Plate"] == "B02P01", "Metadata_Site"] += 10
    edited.to_parquet(table)
    workflow._table.cache_clear()
    digests.plate_digests.cache_clear()
    after = {p: digests.plate_digest(cfg, p) for p in before}
    assert [p for p in before if before[p] != after[p]] == ["B02P01"]
    monkeypatch.undo()

    cfg = scenario("frozen", tmp_path / "frozen", scenario_data)
    frozen = tmp_path / "frozen" / cfg["transforms"]["frozen"]  # what a demo scenario run fitted
    write_frozen(frozen, cfg, ("mae", "mae_seed1"), width=32)  # the door reads them (32 features a profile)
    jobs = planned_jobs(tmp_path / "frozen")
    assert "fit_transforms" not in jobs and jobs["apply_transform"] == 2 * 4, jobs
    # a user's transform of one variant may change alone: its jobs are its own (the gene map reads
    # the whole screen's calls, per model)
    assert jobs["biomap_profiles"] == jobs["batch_metrics"] == jobs["map_readout"] == 2 * 4 and jobs["biomap"] == 2


def write_frozen(folder: Path, cfg: dict, models: tuple[str, ...], width: int) -> None:
    """Transforms of every variant of ``cfg`` fitted on ``width`` random features, saved per
    model as a run writes them (``{model}/{variant}.npz``, ``fit_report.json``)."""
    import numpy as np

    from phenoica.transforms import TransformOptions, fit_variants

    rng = np.random.default_rng(0)
    X, batches = rng.normal(size=(80, width)), np.repeat(["B1", "B2"], 40)
    names = [f"emb_{i:04d}" for i in range(width)]
    options = TransformOptions.from_config({**cfg, "transforms": {**cfg["transforms"], "n_components": 8}})
    for model in models:
        (folder / model).mkdir(parents=True)
        fitted = fit_variants(cfg["transforms"]["variants"], X, batches, np.arange(80) % 2 == 0, options, names)
        for variant, transform in fitted.items():
            transform.save(folder / model / f"{variant}.npz")
        (folder / model / "fit_report.json").write_text("{}")


@pytest.mark.slow
def test_images_and_ome_zarr_scenarios_ingest_the_screens_tiles(scenario_data, tmp_path):
    """The images scenario ingests and embeds a plate; the ome_zarr scenario's ingested plate
    holds exactly the tiles of the screen it was written from (per well, in site order)."""
    from phenoica.contract import open_plate

    meta = pd.read_parquet(scenario_data / "screen" / "metadata.parquet")
    plate_rows = meta[meta["Metadata_Plate"] == "B02P01"]
    cfg = scenario("images", tmp_path / "images", scenario_data)
    snakemake(tmp_path / "images", f"{cfg['results']}/embed/mae/B02P01.parquet")
    emb = pd.read_parquet(tmp_path / "images" / cfg["results"] / "embed" / "mae" / "B02P01.parquet")
    assert len(emb) == len(plate_rows)
    assert set(emb["Metadata_Guide"]) == set(plate_rows["Metadata_Guide"])

    cfg = scenario("ome_zarr", tmp_path / "ome", scenario_data)
    res = tmp_path / "ome" / cfg["results"] / "screen"
    snakemake(tmp_path / "ome", f"{cfg['results']}/screen/metadata/B02P01.parquet")
    ingested = pd.read_parquet(res / "metadata" / "B02P01.parquet").sort_values(["Metadata_Well", "Metadata_Site"])
    original = plate_rows.sort_values(["Metadata_Well", "Metadata_Site"])
    assert list(ingested["Metadata_Well"]) == list(original["Metadata_Well"])
    assert list(ingested["Metadata_Guide"]) == list(original["Metadata_Guide"])
    new_tiles = open_plate(res / "plates" / "B02P01.zarr")[:][ingested["Metadata_ImageIndex"].to_numpy()]
    old_tiles = open_plate(scenario_data / "screen" / "plates" / "B02P01.zarr")[:][
        original["Metadata_ImageIndex"].to_numpy()
    ]
    assert (new_tiles == old_tiles).all() and new_tiles.shape == old_tiles.shape


@pytest.mark.slow
def test_embeddings_scenario_runs_from_profiles_on(scenario_data, tmp_path):
    """Embeddings computed elsewhere (one list-valued column) are a complete entry point; the
    scenario's gene G1 has a strong effect, G2 none."""
    cfg = scenario("embeddings", tmp_path, scenario_data)
    jobs = planned_jobs(tmp_path)
    assert "embed" not in jobs and "train_mae" not in jobs and jobs["gather_profiles"] == 1
    snakemake(tmp_path)
    guides = pd.read_parquet(tmp_path / cfg["results"] / "hits" / "guides.parquet")
    assert set(guides["model"]) == {"ext"}
    base = guides[(guides["variant"] == "base") & ~guides["is_null_guide"]].set_index("Metadata_Guide")["auroc"]
    assert base["G1_a"] > 0.9 and base["G1_a"] > base["G2_a"]


@pytest.mark.slow
def test_zarr_screen_with_a_cross_plate_error_fails_before_any_plate_job(scenario_data, tmp_path):
    """A gene that is a control on one plate and a perturbation on another (each plate's rows
    alone are fine) stops the run before any job: no plate metadata split, no model trained,
    no embedding file."""
    cfg = scenario("zarr", tmp_path, scenario_data, own_metadata=True)
    table = tmp_path / cfg["screen"]["metadata"]
    bad = pd.read_parquet(table)
    on_b02 = (bad["Metadata_Plate"] == "B02P01") & (bad["Metadata_PertType"] == "control")
    bad.loc[on_b02, "Metadata_PertType"] = "perturbation"
    bad.to_parquet(table)
    proc = snakemake(tmp_path, check=False)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "is listed under both PertTypes" in text and "metadata.parquet" in text
    res = tmp_path / cfg["results"]
    assert not (res / "embed").exists()
    assert not (res / "screen" / "metadata").exists()


# --------------------------------------------------------------------------- the user's models


def _embedding_sets(root: Path, names: tuple[str, ...]) -> None:
    """Small parquet files in the embeddings contract, one folder per embedding set."""
    import numpy as np

    rng = np.random.default_rng(0)
    for name in names:
        (root / name).mkdir(parents=True)
        for b in range(3):
            df = pd.DataFrame(
                {
                    "Metadata_Batch": f"B{b}",
                    "Metadata_Plate": f"P{b}",
                    "Metadata_Well": ["A01", "A02"],
                    "Metadata_Gene": ["non-targeting", "G1"],
                    "Metadata_Guide": ["NTC", "G1_a"],
                    "Metadata_PertType": ["control", "perturbation"],
                }
            )
            for j in range(4):
                df[f"emb_{j:04d}"] = rng.normal(size=2).astype("float32")
            df.to_parquet(root / name / f"B{b}.parquet")


def dry_run(workdir: Path, configfile: Configs) -> tuple[dict[str, int], set[str]]:
    """Rule -> job count and the output files of one dry run."""
    out = snakemake(workdir, "-n", configfile=configfile).stdout
    jobs = {
        m.group(1): int(m.group(2))
        for line in out.splitlines()
        if (m := re.match(r"^\s*([A-Za-z_]\w*)\s+(\d+)\s*$", line)) and m.group(1) != "total"
    }
    outputs = {
        f
        for line in out.splitlines()
        if line.strip().startswith("output:")
        for f in line.split(":", 1)[1].strip().split(", ")
    }
    return jobs, outputs


def test_source_embeddings_means_exactly_the_models_named(tmp_path):
    """Over a base config holding the demo's models mae and mae_seed1 as its default_models (as
    config.yaml with config/second_seed.yaml does), `--configfile config.yaml user.yaml` with user.yaml
    naming one model runs exactly that model: the defaults are never merged into the models a
    user names. One glob is one model (the one named); a {model: glob} mapping is one model per
    set. (The other cases of the rule, e.g. the unnamed model and several models on one glob, are
    unit-tested in tests/test_config.py.)"""
    write_config(tmp_path)
    workflow_config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    workflow_config["default_models"] = workflow_config.pop("models")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(workflow_config))
    assert set(workflow_config["default_models"]) == {"mae", "mae_seed1"}
    _embedding_sets(tmp_path / "emb", ("a", "b"))
    one_glob = {
        "screen": {"source": "embeddings", "embeddings": str(tmp_path / "emb" / "a" / "*.parquet")},
        "transforms": {"n_components": 2},
    }
    (tmp_path / "named.yaml").write_text(yaml.safe_dump({**one_glob, "models": {"ext": {}}}))
    jobs, outputs = dry_run(tmp_path, ("config.yaml", "named.yaml"))
    assert jobs["gather_profiles"] == 1 and jobs["classify"] == 4 * 2 and "embed" not in jobs, jobs
    assert "align" not in jobs and "train_mae" not in jobs
    assert "results/profiles/ext.parquet" in outputs and not any("/mae" in f for f in outputs)

    two_sets = {
        **one_glob,
        "screen": {
            "source": "embeddings",
            "embeddings": {m: str(tmp_path / "emb" / m / "*.parquet") for m in ("a", "b")},
        },
    }
    (tmp_path / "sets.yaml").write_text(yaml.safe_dump(two_sets))
    jobs = planned_jobs(tmp_path, configfile=("config.yaml", "sets.yaml"))
    assert jobs["gather_profiles"] == 2 and jobs["align"] == 1 and jobs["classify"] == 2 * 4 * 2, jobs


def test_a_configfile_stands_on_the_schema_not_on_the_workflow_config(tmp_path):
    """With ``--configfile user.yaml`` the folder's config.yaml (the demo's, for a run from the
    repository) is not read: a key user.yaml leaves out takes the schema's default, not the demo's
    value. Without ``--configfile`` config.yaml is the run's config. Observed through
    ``results``, the folder every output path starts with."""
    cfg = write_config(tmp_path)
    user = {k: v for k, v in cfg.items() if k != "results"}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**user, "results": "demo_results"}))
    (tmp_path / "user.yaml").write_text(yaml.safe_dump(user))

    _, outputs = dry_run(tmp_path, "user.yaml")
    assert outputs and all(f.startswith("results/") for f in outputs), sorted(outputs)[:5]

    _, outputs = dry_run(tmp_path, ())
    assert "demo_results/report/report.md" in outputs, sorted(outputs)[:5]
