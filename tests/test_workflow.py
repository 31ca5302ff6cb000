"""The whole workflow through Snakemake on the scenario configs (config/scenarios/; demo = the tiny screen): a real run, lint, the jobs a dry
run plans after adding plates or changing a parameter (speed-only keys plan none), a bad screen
stopped before any plate work, and the resume promise after kill -9 during embed and classify."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from base64 import urlsafe_b64encode
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pytest
import yaml

from phenoica import workflow as wf
from tests.conftest import REPO

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
SCENARIOS = REPO / "config" / "scenarios"


def _command(workdir: Path, args: tuple[str, ...], configfile: str) -> list[str]:
    return [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
            "--configfile", str(workdir / configfile), "--cores", "2", *args]


def snakemake(workdir: Path, *args: str, check: bool = True, configfile: str = "config.yaml") -> subprocess.CompletedProcess:
    proc = subprocess.run(_command(workdir, args, configfile), capture_output=True, text=True, cwd=workdir)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def planned_jobs(workdir: Path, *args: str, configfile: str = "config.yaml") -> dict[str, int]:
    """Rule -> job count of a dry run (the 'Job stats' table)."""
    out = snakemake(workdir, "-n", "--quiet", "rules", *args, configfile=configfile).stdout
    counts = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([A-Za-z_]\w*)\s+(\d+)\s*$", line)
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def write_config(workdir: Path, **changes) -> dict:
    """The demo scenario (config/scenarios/demo.yaml) as the folder's config.yaml, sections updated."""
    cfg = yaml.safe_load((SCENARIOS / "demo.yaml").read_text())
    for section, values in changes.items():
        cfg.setdefault(section, {}).update(values)
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    return cfg


def nested(dotted: str, value: Any) -> dict:
    """{"a": {"b": value}} for "a.b"."""
    out: Any = value
    for part in reversed(dotted.split(".")):
        out = {part: out}
    return out


def probe(workdir: Path, changes: dict, name: str = "probe.yaml") -> str:
    """A config file holding only ``changes``: Snakemake merges it over the workdir's config."""
    (workdir / name).write_text(yaml.safe_dump(changes))
    return name


@pytest.fixture(scope="module")
def finished_tiny(tmp_path_factory) -> Path:
    """The tiny workflow, run once to the end (the uninterrupted reference of the module)."""
    work = tmp_path_factory.mktemp("finished_tiny")
    write_config(work)
    snakemake(work)
    return work


def test_default_config_dry_run_plans_every_stage(tmp_path):
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    jobs = planned_jobs(tmp_path)
    assert jobs["simulate_plate"] == 8 and jobs["embed"] == 2 * 8 and jobs["train_mae"] == 2
    assert jobs["classify"] == 2 * 4 * 2 and jobs["apply_transform"] == 2 * 4 and jobs["report"] == 1
    assert jobs["align"] == 4 and jobs["structural"] == 2 * 4


def test_lint_is_clean(tmp_path):
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    proc = snakemake(tmp_path, "--lint", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in text, text[-3000:]


@pytest.mark.slow
def test_tiny_workflow_end_to_end_and_incremental(finished_tiny):
    res = finished_tiny / "results"
    genes = pd.read_parquet(res / "scores" / "genes.parquet")
    assert set(genes["variant"]) == {"base", "pca", "pca_ica", "pca_rand"}
    assert genes["auroc"].between(0, 1).all()
    emb = pd.read_parquet(res / "embeddings" / "mae" / "B01P01.parquet")
    assert emb.filter(like="emb_").shape[1] == 32 and emb["Metadata_ImageIndex"].is_monotonic_increasing
    assert (res / "report" / "index.html").exists() and (res / "report" / "report.md").exists()
    table1 = pd.read_parquet(res / "identifiability" / "table1.parquet")
    assert len(table1) == 4 * 2 and set(table1["model_a"]) == {"mae", "mae_seed1"}
    assert table1[["perm", "rigid", "linear", "ica"]].notna().all().all()
    assert (table1["rms_train_linear"] <= table1["rms_train_rigid"] + 1e-9).all()
    structural = pd.read_parquet(res / "identifiability" / "structural.parquet")
    assert len(structural) == 2 * 4 and structural["mcc"].between(0, 1).all()
    assert (res / "report" / "figures" / "identifiability.png").exists()
    for rule in ("embed", "classify", "train_mae"):
        assert any((res / "logs").rglob("*.log")), rule
    assert any((res / "benchmarks" / "embed").rglob("*.tsv"))

    # Nothing to do on a rerun.
    assert planned_jobs(finished_tiny) == {}

    # Adding plates (a new batch) re-runs only their simulation and embedding + what gathers them.
    jobs = planned_jobs(finished_tiny, configfile=probe(finished_tiny, {"demo": {"n_batches": 4}}))
    assert jobs.get("simulate_plate") == 1 and jobs.get("embed") == 2, jobs
    assert "train_mae" not in jobs and jobs.get("gather_profiles") == 2

    # Changing a classification parameter re-runs classification and report, not embedding.
    jobs = planned_jobs(finished_tiny, configfile=probe(finished_tiny, {"classify": {"num_boost_round": 12}}))
    assert "embed" not in jobs and "train_mae" not in jobs and "fit_transforms" not in jobs, jobs
    assert jobs.get("classify") == 2 * 4 * 2 and jobs.get("report") == 1 and "align" not in jobs


@pytest.mark.slow
def test_report_links_a_finished_study_page(finished_tiny, tmp_path):
    """A study page that appears after the report reruns the report alone, which then links it
    with its verdict; the report's tables do not change."""
    from phenoica import render

    work = tmp_path / "work"
    shutil.copytree(finished_tiny, work, symlinks=True)
    study = work / "results" / "studies" / "disentangle"
    study.mkdir(parents=True)
    (study / "index.html").write_text("<html></html>")
    render.write_verdict(study, "Disentanglement benchmark", "scenes: AE + ICA - AE InfoM +0.10 [+0.02, +0.18].")
    assert planned_jobs(work) == {"report": 1, "all": 1}
    snakemake(work)
    page = (work / "results" / "report" / "index.html").read_text()
    assert '<a href="../studies/disentangle/index.html">Disentanglement benchmark</a>: scenes: AE + ICA' in page
    tables = sorted((finished_tiny / "results" / "report" / "tables").glob("*.csv"))
    assert tables and all((work / "results" / "report" / "tables" / t.name).read_bytes() == t.read_bytes()
                          for t in tables)


#: A different valid value for every key that changes only speed, memory, layout or logs.
SPEED_ONLY_CHANGES: dict[str, Any] = {
    "demo.chunk_images": 8,
    "screen.chunk_images": 8,
    "train.log_every": 3,
    "embed.batch_size": 7,
    "embed.chunk_images": 5,
    "embed.threads": 1,
    "embed.loader_threads": 2,
    "embed.compile": True,
    "profiles.batch_rows": 50,
    "transforms.batch_rows": 50,
    "classify.lightgbm.num_threads": 2,
    "classify.lightgbm.n_jobs": 2,  # LightGBM's aliases of a speed-only key are dropped alike
    "classify.lightgbm.verbosity": 1,
}
#: The other aliases (their params are checked in tests/test_params.py, without a dry run).
LIGHTGBM_ALIASES = {"classify.lightgbm.num_thread", "classify.lightgbm.nthread", "classify.lightgbm.nthreads",
                    "classify.lightgbm.verbose"}

#: Keys that do change results, and exactly the jobs a change must rerun (tiny config:
#: 2 models x 3 plates, 4 variants, 2 shards).
RESULT_CHANGES: dict[str, tuple[Any, dict[str, int]]] = {
    "classify.num_boost_round": (12, {"classify": 16, "gather_scores": 1, "report": 1, "all": 1}),
    "classify.lightgbm.num_leaves": (7, {"classify": 16, "gather_scores": 1, "report": 1, "all": 1}),
    "classify.q_threshold": (0.1, {"gather_scores": 1, "report": 1, "all": 1}),
    "classify.map_readout": (False, {"gather_scores": 1, "report": 1, "all": 1}),
    "classify.map_null_size": (500, {"map_readout": 8, "gather_scores": 1, "report": 1, "all": 1}),
    "identifiability.knn_k": (5, {"align": 4, "gather_identifiability": 1, "report": 1, "all": 1}),
    "identifiability.factor_bins": (10, {"structural": 8, "gather_identifiability": 1, "report": 1, "all": 1}),
    "splits.holdout_fraction": (0.3, {}),  # leave-one-batch-out does not read it
    "transforms.ica_max_iter": (300, {"fit_transforms": 2, "apply_transform": 8, "classify": 16, "map_readout": 8,
                                      "align": 4, "structural": 8, "gather_identifiability": 1,
                                      "gather_scores": 1, "report": 1, "all": 1}),
    "embed.intensity_max": (200.0, {"embed": 6, "gather_profiles": 2, "fit_transforms": 2, "splits": 2,
                                    "apply_transform": 8, "classify": 16, "map_readout": 8, "align": 4,
                                    "structural": 8, "gather_identifiability": 1, "gather_scores": 1,
                                    "report": 1, "all": 1}),
}


def test_every_speed_only_key_has_a_dry_run_case():
    assert set(SPEED_ONLY_CHANGES) | LIGHTGBM_ALIASES == set(wf.SPEED_ONLY_KEYS)


@pytest.mark.slow
def test_speed_only_keys_and_key_order_plan_no_job(finished_tiny):
    """A key that changes only speed, memory, storage layout or logs reruns nothing; nor does
    a per-rule resource, nor the order of the keys in the config file."""
    planned = {key: planned_jobs(finished_tiny, configfile=probe(finished_tiny, nested(key, value)))
               for key, value in SPEED_ONLY_CHANGES.items()}
    planned["resources"] = planned_jobs(finished_tiny, configfile=probe(
        finished_tiny, {"resources": {"default": {"runtime": 30}, "classify": {"cpus": 2, "mem_mb": 1000},
                                      "embed": {"cpus": 1}}}))
    original = (finished_tiny / "config.yaml").read_text()
    cfg = yaml.safe_load(original)
    reordered = {k: (dict(reversed(list(v.items()))) if isinstance(v, dict) else v) for k, v in reversed(list(cfg.items()))}
    try:
        (finished_tiny / "config.yaml").write_text(yaml.safe_dump(reordered, sort_keys=False))
        planned["key order"] = planned_jobs(finished_tiny)
    finally:
        (finished_tiny / "config.yaml").write_text(original)
    assert planned == {key: {} for key in planned}, {k: v for k, v in planned.items() if v}


@pytest.mark.slow
def test_result_changing_keys_rerun_exactly_the_jobs_that_read_them(finished_tiny):
    planned = {key: planned_jobs(finished_tiny, configfile=probe(finished_tiny, nested(key, value)))
               for key, (value, _) in RESULT_CHANGES.items()}
    expected = {key: jobs for key, (_, jobs) in RESULT_CHANGES.items()}
    assert planned == expected


def test_a_bad_screen_stops_before_any_job(tmp_path):
    """The whole screen is checked against the models when the DAG is built: a crop larger than
    the images stops a dry run and a run before any job, so no plate is simulated, no model
    trained, nothing embedded. A passed check is recorded and not redone."""
    write_config(tmp_path, models={"mae": {"img_size": 64, "patch_size": 8, "embed_dim": 32, "depth": 1,
                                           "num_heads": 2, "decoder_embed_dim": 32, "decoder_depth": 1,
                                           "decoder_num_heads": 2}})
    for args in (("-n",), ()):
        proc = snakemake(tmp_path, *args, check=False)
        assert proc.returncode != 0
        assert "smaller than model mae's crop size 64" in proc.stdout + proc.stderr
    res = tmp_path / "results"
    assert not res.exists() or not any(res.rglob("*.parquet")) and not list(res.rglob("*.zarr"))
    write_config(tmp_path)
    assert planned_jobs(tmp_path)["embed"] == 6
    assert '"crop_size": [' in (res / "screen" / "validated.json").read_text()


# --------------------------------------------------------------------------- scenarios
# The checked-in scenario configs (config/scenarios/), run as they are from a folder holding the
# inputs `python -m phenoica.scenarios` writes (scenario_data/).


@pytest.fixture(scope="module")
def scenario_data(tmp_path_factory) -> Path:
    """The inputs of every scenario (phenoica.scenarios.prepare), written once per module."""
    from phenoica.scenarios import prepare_from_config

    data = tmp_path_factory.mktemp("scenario_inputs") / "scenario_data"
    prepare_from_config(SCENARIOS / "demo.yaml", data)
    return data


def scenario(name: str, workdir: Path, data: Path, own_metadata: bool = False) -> dict:
    """A working folder for ``config/scenarios/{name}.yaml`` as it is (its config.yaml) with
    ``scenario_data`` linked in; ``own_metadata`` copies the screen's metadata table so that a
    test may edit it. Returns the validated config."""
    from phenoica.config import validate_config

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
    from phenoica.config import validate_config
    from phenoica.scenarios import SCENARIOS as NAMES

    assert sorted(p.stem for p in SCENARIOS.glob("*.yaml")) == sorted(NAMES)
    configs = {name: yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text()) for name in NAMES}
    for name, cfg in configs.items():
        assert validate_config(cfg)["screen"]["source"] == ("demo" if name in ("demo", "frozen") else name), name
    shared = ("models", "train", "embed", "classify")
    for name in ("zarr", "images", "ome_zarr", "frozen"):
        assert {k: configs[name][k] for k in shared} == {k: configs["demo"][k] for k in shared}, name
    assert len({cfg["results"] for cfg in configs.values()}) == len(configs)  # no scenario overwrites another


def test_zarr_ome_zarr_and_frozen_scenarios_plan_their_jobs(scenario_data, tmp_path, monkeypatch):
    """Dry runs of the scenarios: one job per plate for the user's stores (zarr) and HCS plates
    (ome_zarr); frozen transforms are applied, not refitted. For zarr, the per-plate digest
    changes only for the plate whose rows change, so only its jobs rerun."""
    cfg = scenario("zarr", tmp_path / "zarr", scenario_data, own_metadata=True)
    jobs = planned_jobs(tmp_path / "zarr")
    assert jobs["plate_metadata"] == 3 and jobs["embed"] == 2 * 3 and "simulate_plate" not in jobs, jobs
    from phenoica import workflow

    monkeypatch.chdir(tmp_path / "zarr")  # the scenario's paths are relative to its folder
    before = {p: workflow.plate_digest(cfg, p) for p in ("B01P01", "B02P01", "B03P01")}
    table = Path(cfg["screen"]["metadata"])
    edited = pd.read_parquet(table)
    edited.loc[edited["Metadata_Plate"] == "B02P01", "Metadata_Site"] += 10
    edited.to_parquet(table)
    workflow._table.cache_clear()
    workflow.plate_digests.cache_clear()
    after = {p: workflow.plate_digest(cfg, p) for p in before}
    assert [p for p in before if before[p] != after[p]] == ["B02P01"]
    monkeypatch.undo()

    scenario("ome_zarr", tmp_path / "ome", scenario_data)
    jobs = planned_jobs(tmp_path / "ome")
    assert jobs["ingest_ome_zarr"] == 3 and jobs["embed"] == 2 * 3 and "simulate_plate" not in jobs, jobs

    cfg = scenario("frozen", tmp_path / "frozen", scenario_data)
    frozen = tmp_path / "frozen" / cfg["transforms"]["frozen"]  # what a demo scenario run fitted
    for model in ("mae", "mae_seed1"):
        (frozen / model).mkdir(parents=True)
        for name in ("base.npz", "pca.npz", "pca_ica.npz", "pca_rand.npz", "fit_report.json"):
            (frozen / model / name).write_text("")
    jobs = planned_jobs(tmp_path / "frozen")
    assert "fit_transforms" not in jobs and jobs["apply_transform"] == 2 * 4, jobs


@pytest.mark.slow
def test_images_and_ome_zarr_scenarios_ingest_the_screens_tiles(scenario_data, tmp_path):
    """The images scenario ingests and embeds a plate; the ome_zarr scenario's ingested plate
    holds exactly the tiles of the screen it was written from (per well, in site order)."""
    from phenoica.screen import open_plate

    meta = pd.read_parquet(scenario_data / "screen" / "metadata.parquet")
    plate_rows = meta[meta["Metadata_Plate"] == "B02P01"]
    cfg = scenario("images", tmp_path / "images", scenario_data)
    snakemake(tmp_path / "images", f"{cfg['results']}/embeddings/mae/B02P01.parquet")
    emb = pd.read_parquet(tmp_path / "images" / cfg["results"] / "embeddings" / "mae" / "B02P01.parquet")
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
    old_tiles = open_plate(scenario_data / "screen" / "plates" / "B02P01.zarr")[:][original["Metadata_ImageIndex"].to_numpy()]
    assert (new_tiles == old_tiles).all() and new_tiles.shape == old_tiles.shape


@pytest.mark.slow
def test_embeddings_scenario_runs_from_profiles_on(scenario_data, tmp_path):
    """Embeddings computed elsewhere (one list-valued column) are a complete entry point; the
    scenario's gene G1 has a strong effect, G2 none."""
    cfg = scenario("embeddings", tmp_path, scenario_data)
    jobs = planned_jobs(tmp_path)
    assert "embed" not in jobs and "train_mae" not in jobs and jobs["gather_profiles"] == 1
    snakemake(tmp_path)
    guides = pd.read_parquet(tmp_path / cfg["results"] / "scores" / "guides.parquet")
    assert set(guides["model"]) == {"ext"}
    base = guides[(guides["variant"] == "base") & ~guides["is_null_guide"]].set_index("Metadata_Guide")["auroc"]
    assert base["G1_a"] > 0.9 and base["G1_a"] > base["G2_a"]


def test_genome_scale_dag_stays_in_the_low_thousands(tmp_path):
    """17,000 genes x 6 guides, 40 batches, 400 plates, 4 variants: one embed job per plate,
    classification sharded, so the DAG stays small (timings: benchmarks/genome_dag.py)."""
    shutil.copy(REPO / "benchmarks" / "genome_scale.yaml", tmp_path / "config.yaml")
    jobs = planned_jobs(tmp_path)
    assert jobs["embed"] == 400 and jobs["classify"] == 4 * 250
    assert 1000 <= sum(jobs.values()) <= 3000, jobs


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
    assert not (res / "embeddings").exists() and not (res / "models").exists()
    assert not (res / "screen" / "metadata").exists()


# --------------------------------------------------------------------------- kill -9 and resume


def start_snakemake(workdir: Path, log: Path, *args: str) -> subprocess.Popen:
    """Snakemake in the background, in a process group of its own (jobs included)."""
    with open(log, "a") as fh:
        return subprocess.Popen(_command(workdir, args, "config.yaml"), cwd=workdir, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)


def kill_group_when(proc: subprocess.Popen, ready: Callable[[], bool], what: str, timeout: float = 900) -> None:
    """SIGKILL Snakemake's whole process group as soon as ``ready()`` holds."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise AssertionError(f"snakemake ended (rc {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.002)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def finished_by_snakemake(workdir: Path, output: Path) -> bool:
    """Whether Snakemake recorded the job of ``output`` as finished (its metadata record written,
    its incomplete marker gone); an output renamed into place by a job killed before that counts
    as incomplete and is redone by ``--rerun-incomplete``."""
    key = urlsafe_b64encode(str(output.relative_to(workdir)).encode()).decode()
    meta = workdir / ".snakemake"
    return output.exists() and (meta / "metadata" / key).exists() and not (meta / "incomplete" / key).exists()


def jobs_run(text: str) -> dict[str, set[str]]:
    """Rule -> outputs of the jobs a Snakemake run printed (its ``rule NAME:`` blocks)."""
    jobs: dict[str, set[str]] = {}
    for rule, block in re.findall(r"^(?:local)?rule (\w+):\n((?:[ \t]+.*\n)+)", text, re.M):
        out = re.search(r"^\s+output: (.+)$", block, re.M)
        jobs.setdefault(rule, set()).update(out[1].split(", ") if out else [])
    return jobs


def parquet_bytes(results: Path) -> dict[str, bytes]:
    return {str(p.relative_to(results)): p.read_bytes() for p in sorted(results.rglob("*.parquet"))}


@pytest.mark.slow
def test_kill_during_embed_and_classify_then_rerun_resumes(finished_tiny, tmp_path):
    """The resume promise: SIGKILL to Snakemake's process group while plates are embedded and
    again while shards are classified; the rerun (the README's recovery: `snakemake --unlock`,
    then the command with --rerun-incomplete) finishes with every parquet byte-identical to an
    uninterrupted run, embeds only the chunks a killed plate had left, and does not redo the
    shards that had finished."""
    work = tmp_path / "killed"
    work.mkdir()
    shutil.copy(finished_tiny / "config.yaml", work / "config.yaml")
    res, out = work / "results", tmp_path / "snakemake.out"

    def finished_chunks() -> dict[Path, int]:
        """Plates interrupted mid-way: {final parquet: finished chunks}."""
        found = {}
        for parts in res.glob("embeddings/*/*.parquet.parts"):
            final = parts.with_name(parts.name.removesuffix(".parts"))
            done = len(list(parts.glob("chunk_*.parquet")))
            if done and not final.exists():
                found[final] = done
        return found

    # 1. Killed while embedding: as soon as a plate has a finished chunk (a few tries, since a
    #    plate of the tiny screen embeds in well under a second).
    interrupted: dict[Path, int] = {}
    for _ in range(6):
        proc = start_snakemake(work, out, "--rerun-incomplete")
        kill_group_when(proc, lambda: any(res.glob("embeddings/*/*.parquet.parts/chunk_*.parquet")), "embedded chunk")
        interrupted = finished_chunks()
        if interrupted:
            break
        snakemake(work, "--unlock")
    assert interrupted, "never caught a plate between its chunks"

    # A killed run leaves Snakemake's lock: the rerun is refused until `snakemake --unlock`.
    refused = snakemake(work, "--rerun-incomplete", check=False)
    assert refused.returncode != 0 and "--unlock" in refused.stdout + refused.stderr
    snakemake(work, "--unlock")

    # 2. Rerun, killed again as soon as Snakemake has recorded a classification shard as finished.
    def shards_done() -> list[Path]:
        return [p for p in sorted(res.glob("scores/*/*/shard_*.parquet")) if finished_by_snakemake(work, p)]

    proc = start_snakemake(work, out, "--rerun-incomplete")
    kill_group_when(proc, lambda: bool(shards_done()), "finished shard")
    shards = shards_done()
    assert 0 < len(shards) < 16
    done_before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in shards}
    logs_before = {p: (res / "logs" / "classify" / p.relative_to(res / "scores").with_suffix(".log")).read_bytes()
                   for p in shards}

    # 3. Unlock and finish.
    snakemake(work, "--unlock")
    final = snakemake(work, "--rerun-incomplete")
    text = final.stdout + final.stderr

    # Byte-identical to the uninterrupted run, and nothing half-written anywhere.
    ours, reference = parquet_bytes(res), parquet_bytes(finished_tiny / "results")
    assert sorted(ours) == sorted(reference) and len(ours) > 60
    assert [name for name in ours if ours[name] != reference[name]] == []
    assert not list(res.rglob("*.tmp-*")) and not list(res.rglob("*.parts"))

    # Finished chunks are not embedded again: the resumed job embeds exactly the rest.
    for final_path, done in interrupted.items():
        model, plate = final_path.parent.name, final_path.stem
        lines = (res / "logs" / "embed" / model / f"{plate}.log").read_text().splitlines()
        resumed = [i for i, line in enumerate(lines) if "resuming from" in line]
        assert resumed, f"{model}/{plate} was not resumed"
        already, total = map(int, re.search(r"(\d+)/(\d+) chunk\(s\) already done", lines[resumed[-1]]).groups())
        assert already >= done and already < total
        after = lines[resumed[-1]:]
        todo = int(next(m for line in after if (m := re.search(r"embedding \d+ image\(s\) in (\d+) chunk\(s\)", line)))[1])
        assert todo == total - already
        assert sum(bool(re.search(r"plate \S+: chunk \d+/\d+", line)) for line in after) == todo

    # Finished shards are not classified again: untouched outputs and logs, not in the rerun's jobs.
    classified = jobs_run(text)["classify"]
    for shard, (mtime, data) in done_before.items():
        assert shard.stat().st_mtime_ns == mtime and shard.read_bytes() == data
        log = res / "logs" / "classify" / shard.relative_to(res / "scores").with_suffix(".log")
        assert log.read_bytes() == logs_before[shard]
    rest = set(res.glob("scores/*/*/shard_*.parquet")) - set(done_before)
    assert classified == {str(p.relative_to(work)) for p in rest} and len(classified) == 16 - len(done_before)


# --------------------------------------------------------------------------- the user's models


def _embedding_sets(root: Path, names: tuple[str, ...]) -> None:
    """Small parquet files in the embeddings contract, one folder per embedding set."""
    import numpy as np

    rng = np.random.default_rng(0)
    for name in names:
        (root / name).mkdir(parents=True)
        for b in range(3):
            df = pd.DataFrame({"Metadata_Batch": f"B{b}", "Metadata_Plate": f"P{b}", "Metadata_Well": ["A01", "A02"],
                               "Metadata_Gene": ["non-targeting", "G1"], "Metadata_Guide": ["NTC", "G1_a"],
                               "Metadata_PertType": ["control", "perturbation"]})
            for j in range(4):
                df[f"emb_{j:04d}"] = rng.normal(size=2).astype("float32")
            df.to_parquet(root / name / f"B{b}.parquet")


def dry_run(workdir: Path, configfile: str) -> tuple[dict[str, int], set[str]]:
    """Rule -> job count and the output files of one dry run."""
    out = snakemake(workdir, "-n", configfile=configfile).stdout
    jobs = {m.group(1): int(m.group(2)) for line in out.splitlines()
            if (m := re.match(r"^\s*([A-Za-z_]\w*)\s+(\d+)\s*$", line)) and m.group(1) != "total"}
    outputs = {f for line in out.splitlines() if line.strip().startswith("output:")
               for f in line.split(":", 1)[1].strip().split(", ")}
    return jobs, outputs


def test_a_users_config_replaces_the_demo_models(tmp_path):
    """Run from a folder whose workflow config names the demo's models mae and mae_seed1 (the
    demo scenario, as the repository's config.yaml does), `--configfile user.yaml` naming one
    model runs exactly that model."""
    write_config(tmp_path)
    assert set(yaml.safe_load((tmp_path / "config.yaml").read_text())["models"]) == {"mae", "mae_seed1"}
    (tmp_path / "user.yaml").write_text(yaml.safe_dump({"models": {"solo": {
        "img_size": 16, "patch_size": 8, "embed_dim": 32, "depth": 1, "num_heads": 2}}}))
    jobs, outputs = dry_run(tmp_path, "user.yaml")
    assert jobs["train_mae"] == 1 and jobs["embed"] == 3 and jobs["gather_profiles"] == 1, jobs
    assert "align" not in jobs  # one model: no model pairs to align
    assert "results/profiles/solo.parquet" in outputs and not any("/mae" in f for f in outputs)


def test_source_embeddings_means_exactly_the_models_named(tmp_path):
    """One glob is one model (named, or `embeddings`); a {model: glob} mapping is one model per
    set; naming several models for one glob is an error before any job."""
    write_config(tmp_path)  # a workflow config naming the demo's two models
    _embedding_sets(tmp_path / "emb", ("a", "b"))
    one_glob = {"screen": {"source": "embeddings", "embeddings": str(tmp_path / "emb" / "a" / "*.parquet")},
                "transforms": {"n_components": 2}}
    (tmp_path / "named.yaml").write_text(yaml.safe_dump({**one_glob, "models": {"ext": {}}}))
    jobs, outputs = dry_run(tmp_path, "named.yaml")
    assert jobs["gather_profiles"] == 1 and jobs["classify"] == 4 * 2 and "embed" not in jobs, jobs
    assert "align" not in jobs and "train_mae" not in jobs
    assert "results/profiles/ext.parquet" in outputs

    (tmp_path / "unnamed.yaml").write_text(yaml.safe_dump(one_glob))
    assert "results/profiles/embeddings.parquet" in dry_run(tmp_path, "unnamed.yaml")[1]

    two_sets = {**one_glob, "screen": {"source": "embeddings", "embeddings": {
        m: str(tmp_path / "emb" / m / "*.parquet") for m in ("a", "b")}}}
    (tmp_path / "sets.yaml").write_text(yaml.safe_dump(two_sets))
    jobs = planned_jobs(tmp_path, configfile="sets.yaml")
    assert jobs["gather_profiles"] == 2 and jobs["align"] == 4 and jobs["classify"] == 2 * 4 * 2, jobs

    (tmp_path / "twice.yaml").write_text(yaml.safe_dump({**one_glob, "models": {"x": {}, "y": {}}}))
    proc = snakemake(tmp_path, "-n", check=False, configfile="twice.yaml")
    assert proc.returncode != 0
    assert "reads one embedding set" in proc.stdout + proc.stderr and "['x', 'y']" in proc.stdout + proc.stderr
