"""The whole workflow through Snakemake on the scenario configs (config/scenarios/; demo = the tiny screen): a real run, lint, the jobs a dry
run plans after adding plates or changing a parameter (speed-only keys plan none), a bad screen
stopped before any plate work, and the resume promise after kill -9 during embed and classify."""

from __future__ import annotations

import ast
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

from tests.conftest import REPO

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
SCENARIOS = REPO / "config" / "scenarios"


Configs = str | tuple[str, ...]


def _command(workdir: Path, args: tuple[str, ...], configfile: Configs) -> list[str]:
    """The Snakemake command in ``workdir``; ``configfile`` names its ``--configfile`` files
    (``()``: none, so the folder's config.yaml is read by the Snakefile itself)."""
    files = (configfile,) if isinstance(configfile, str) else configfile
    configs = ["--configfile", *(str(workdir / f) for f in files)] if files else []
    return [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir), *configs, "--cores", "2", *args]


def snakemake(
    workdir: Path, *args: str, check: bool = True, configfile: Configs = "config.yaml"
) -> subprocess.CompletedProcess:
    proc = subprocess.run(_command(workdir, args, configfile), capture_output=True, text=True, cwd=workdir)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def planned_jobs(workdir: Path, *args: str, configfile: Configs = "config.yaml") -> dict[str, int]:
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


def merge(base: dict, change: dict) -> dict:
    """``base`` with ``change`` merged in, nested dicts merged key by key (a new dict)."""
    out = dict(base)
    for key, value in change.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def probe(workdir: Path, changes: dict, name: str = "probe.yaml") -> tuple[str, str]:
    """The workdir's config and a file holding only ``changes``, for ``--configfile``: Snakemake
    merges the second over the first."""
    (workdir / name).write_text(yaml.safe_dump(changes))
    return ("config.yaml", name)


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
    # one model, 1 embedding job of 8 plates; one classify shard per variant; one sweep: a job per
    # (swept variant, grid point), 3 x 2, and one that gathers them; the other rules that read a
    # variant's table do every variant of the model in one job; no Table 1 (one model)
    assert jobs["simulate_plate"] == 8 and jobs["embed_g0000"] == 1 and jobs["train_mae"] == 1
    assert "embed" not in jobs and "embed_g0001" not in jobs and jobs["classify"] == 1 * 4
    per_model = ("apply_transform", "batch_metrics", "structural", "map_readout", "biomap_profiles", "biomap")
    assert {rule: jobs[rule] for rule in per_model} == dict.fromkeys(per_model, 1)
    assert "align" not in jobs and jobs["component_sweep"] == 1 and jobs["sweep_point"] == 3 * 2
    assert jobs["report"] == 1

    # Table 1's second seed merged on (config/second_seed.yaml): trained, embedded, profiled,
    # transformed, measured and aligned, scored by neither readout nor swept
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "second_seed.yaml", tmp_path / "config" / "second_seed.yaml")
    both = planned_jobs(tmp_path, configfile=("config.yaml", "config/second_seed.yaml"))
    assert both["train_mae"] == 2 and both["embed_g0000"] == 2 and both["align"] == 1
    assert {rule: both[rule] for rule in ("apply_transform", "batch_metrics", "structural")} == dict.fromkeys(
        ("apply_transform", "batch_metrics", "structural"), 2
    )
    scored = ("classify", "sweep_point", "component_sweep", "map_readout", "biomap_profiles", "biomap")
    assert {rule: both[rule] for rule in scored} == {rule: jobs[rule] for rule in scored}


#: Libraries that building the DAG must not import: every Snakemake start (each dry run, each
#: cluster submission's scheduler) would pay their import (torch, timm: about 6 s of a 10 s dry run;
#: LightGBM with scikit-learn, about 1 s: the door records LightGBM's reading of the keys).
NOT_AT_DAG_BUILD = ("torch", "timm", "picard", "lightgbm", "sklearn", "scipy.stats", "matplotlib", "plotly", "zarr")


def dag_build_imports(workdir: Path) -> list[str]:
    """The libraries of :data:`NOT_AT_DAG_BUILD` a dry run in ``workdir`` imported (in one process)."""
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['snakemake', '-s', {str(REPO / 'Snakefile')!r}, '--directory', {str(workdir)!r}, "
        f"'--configfile', {str(workdir / 'config.yaml')!r}, '--cores', '1', '-n', '--quiet']\n"
        "try:\n    runpy.run_module('snakemake', run_name='__main__')\nexcept SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        f"print('imported:', sorted(m for m in {NOT_AT_DAG_BUILD!r} if m in sys.modules), flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = re.findall(r"^imported: (.*)$", proc.stdout, re.M)
    assert len(found) == 1, proc.stdout[-2000:]
    return ast.literal_eval(found[0])


def test_building_the_dag_imports_no_model_library(tmp_path):
    """The first dry run of the tiny config checks the screen against its models without
    building them (read from their specs: no torch, no timm) and reads the schema's LightGBM keys
    as LightGBM read them for this version (shipped: no LightGBM); once the check is recorded the
    Snakefile and its rules import neither torch nor timm, nor LightGBM nor any other heavy
    library (what the rules need at DAG build lives in modules that do not)."""
    write_config(tmp_path)
    assert dag_build_imports(tmp_path) == []  # the first dry run checks the screen and records the check
    assert (tmp_path / "results" / "screen" / "validated.json").exists()
    assert dag_build_imports(tmp_path) == []


def test_lint_is_clean(tmp_path):
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    proc = snakemake(tmp_path, "--lint", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in text, text[-3000:]


@pytest.mark.slow
def test_tiny_workflow_end_to_end_and_incremental(finished_tiny):
    res = finished_tiny / "results"
    genes = pd.read_parquet(res / "hits" / "genes.parquet")
    assert set(genes["variant"]) == {"base", "pca", "pca_ica", "pca_rand"}
    assert genes["auroc"].between(0, 1).all()
    emb = pd.read_parquet(res / "embed" / "mae" / "B01P01.parquet")
    assert emb.filter(like="emb_").shape[1] == 32 and emb["Metadata_ImageIndex"].is_monotonic_increasing
    assert (res / "report" / "index.html").exists() and (res / "report" / "report.md").exists()
    table1 = pd.read_parquet(res / "identifiability" / "table1.parquet")
    assert len(table1) == 4 * 2 and set(table1["model_a"]) == {"mae", "mae_seed1"}
    assert table1[["perm", "rigid", "linear", "ica"]].notna().all().all()
    assert (table1["rms_train_linear"] <= table1["rms_train_rigid"] + 1e-9).all()
    structural = pd.read_parquet(res / "identifiability" / "structural.parquet")
    assert len(structural) == 2 * 4 and structural["mcc"].between(0, 1).all()
    assert (res / "report" / "figures" / "identifiability.png").exists()
    batch = pd.read_parquet(res / "biomap" / "batch_metrics.parquet")
    assert len(batch) == 2 * 4 * 2 and set(batch["subset"]) == {"controls", "all"}
    recall = pd.read_parquet(res / "biomap" / "recall.parquet")
    assert {"corum_demo", "simulated_complexes"} <= set(recall["source"])
    assert (res / "report" / "figures" / "biomap_batch_vs_biology.png").exists()
    assert "Gene maps: batch removed vs biology kept" in (res / "report" / "report.md").read_text()
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
    from phenoica.report import _render as render

    work = tmp_path / "work"
    shutil.copytree(finished_tiny, work, symlinks=True)
    study = work / "results" / "studies" / "disentangle"
    study.mkdir(parents=True)
    (study / "index.html").write_text("<html></html>")
    render.write_verdict(study, "Disentanglement benchmark", "scenes: AE + ICA - AE InfoM +0.10 [+0.02, +0.18].")
    receipt = work / "results" / "benchmarks" / "disentangle" / "report.tsv"  # written when the study job ends
    receipt.parent.mkdir(parents=True, exist_ok=True)
    receipt.write_text("s\n")
    assert planned_jobs(work) == {"report": 1, "all": 1}
    snakemake(work)
    page = (work / "results" / "report" / "index.html").read_text()
    assert '<a href="../studies/disentangle/index.html">Disentanglement benchmark</a>: scenes: AE + ICA' in page
    tables = sorted((finished_tiny / "results" / "report" / "tables").glob("*.csv"))
    assert tables and all(
        (work / "results" / "report" / "tables" / t.name).read_bytes() == t.read_bytes() for t in tables
    )


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
    "embed.compile_options": {"epilogue_fusion": False},
    "embed.compile_cache": "compile_cache",
    "profiles.batch_rows": 50,
    "transforms.batch_rows": 50,
    "biomap.block_rows": 7,
    "classify.lightgbm.num_threads": 2,
    "classify.lightgbm.n_jobs": 2,  # LightGBM's aliases of a speed-only key are dropped alike
    "classify.lightgbm.verbosity": 1,
}
#: The other aliases (their params are checked in tests/test_params.py, without a dry run).
LIGHTGBM_ALIASES = {
    "classify.lightgbm.num_thread",
    "classify.lightgbm.nthread",
    "classify.lightgbm.nthreads",
    "classify.lightgbm.verbose",
}

BIOMAP = "biomap"
#: Jobs that re-run after the fitted variants change (every variant re-applied, and all downstream;
#: apply_transform, map_readout, structural and the gene-map rules do a model's variants in one job,
#: align every variant in one).
AFTER_THE_VARIANTS = {
    "apply_transform": 2,
    "classify": 16,
    "map_readout": 2,
    "align": 1,
    "structural": 2,
    "gather_identifiability": 1,
    "gather_scores": 1,
    "call_hits": 1,
    "biomap_profiles": 2,
    BIOMAP: 2,
    "batch_metrics": 2,
    "gather_biomap": 1,
    "report": 1,
    "all": 1,
}

#: Keys that do change results, and exactly the jobs a change must rerun (tiny config:
#: 2 models x 3 plates, 4 variants, 2 shards; one job per model of the rules that do every variant).
RESULT_CHANGES: dict[str, tuple[Any, dict[str, int]]] = {
    # the gene maps read the gene calls: whatever reruns the hit calls reruns them (biomap, gather_biomap)
    "classify.num_boost_round": (
        12,
        {"classify": 16, "gather_scores": 1, "call_hits": 1, BIOMAP: 2, "gather_biomap": 1, "report": 1, "all": 1},
    ),
    "classify.lightgbm.num_leaves": (
        7,
        {"classify": 16, "gather_scores": 1, "call_hits": 1, BIOMAP: 2, "gather_biomap": 1, "report": 1, "all": 1},
    ),
    # the mAP readout spends its extra null draws near the q threshold's cut
    "hits.q_threshold": (
        0.1,
        {"map_readout": 2, "gather_scores": 1, "call_hits": 1, BIOMAP: 2, "gather_biomap": 1, "report": 1, "all": 1},
    ),
    "classify.map_readout": (
        False,
        {"gather_scores": 1, "call_hits": 1, BIOMAP: 2, "gather_biomap": 1, "report": 1, "all": 1},
    ),
    "classify.map_null_size": (
        500,
        {"map_readout": 2, "gather_scores": 1, "call_hits": 1, BIOMAP: 2, "gather_biomap": 1, "report": 1, "all": 1},
    ),
    "classify.map_max_null_size": (
        20000,
        {"map_readout": 2, "gather_scores": 1, "call_hits": 1, BIOMAP: 2, "gather_biomap": 1, "report": 1, "all": 1},
    ),
    # the readouts score the first model only: its calls and gene map again, the second's none
    "classify.models": (1, {"gather_scores": 1, "call_hits": 1, BIOMAP: 1, "gather_biomap": 1, "report": 1, "all": 1}),
    "biomap.n_neighbors": (5, {BIOMAP: 2, "gather_biomap": 1, "report": 1, "all": 1}),
    "biomap.center_on_controls": (False, {"biomap_profiles": 2, BIOMAP: 2, "gather_biomap": 1, "report": 1, "all": 1}),
    "biomap.batch_neighbors": (5, {"batch_metrics": 2, "gather_biomap": 1, "report": 1, "all": 1}),
    "identifiability.knn_k": (5, {"align": 1, "gather_identifiability": 1, "report": 1, "all": 1}),
    "identifiability.factor_bins": (10, {"structural": 2, "gather_identifiability": 1, "report": 1, "all": 1}),
    "splits.holdout_fraction": (0.3, {}),  # leave-one-batch-out does not read it
    "transforms.ica_max_iter": (300, {"fit_transforms": 2, **AFTER_THE_VARIANTS}),
    "embed.intensity_max": (
        200.0,
        {
            "embed": 6,
            "gather_profiles": 2,
            "fit_transforms": 2,
            "splits": 2,
            "plate_positions": 1,
            **AFTER_THE_VARIANTS,
        },
    ),
}


def test_every_run_time_key_has_a_dry_run_case():
    """Every key a stage's options read at run time only is changed by the dry run below (the
    LightGBM mapping through its speed-only keys; the demo's plate counts decide which plates exist)."""
    from phenoica.contract import settings_of
    from phenoica.workflow.config_reference import load_stage_options

    run_time = {s.key for cls in load_stage_options().values() for s in settings_of(cls).values() if s.run_time}
    lightgbm = {k for k in SPEED_ONLY_CHANGES if k.startswith("classify.lightgbm.")} | LIGHTGBM_ALIASES
    assert lightgbm and run_time == (set(SPEED_ONLY_CHANGES) - lightgbm) | {
        "classify.lightgbm",
        "demo.n_batches",
        "demo.plates_per_batch",
    }


@pytest.mark.slow
def test_speed_only_keys_and_key_order_plan_no_job(finished_tiny):
    """A key that changes only speed, memory, storage layout or logs reruns nothing; nor does
    a per-rule resource, nor the order of the keys in the config file.

    The speed-only keys and the resources are changed together in one dry run (a job reruns
    when its params, code or inputs change, and no job's params read a combination of these keys
    that could cancel out); only when that run plans a job is each key tried alone, to name it."""
    resources = {"default": {"runtime": 30}, "classify": {"cpus": 2, "mem_mb": 1000}, "embed": {"cpus": 1}}
    changes: list[tuple[str, dict]] = [(key, nested(key, value)) for key, value in SPEED_ONLY_CHANGES.items()]
    changes.append(("resources", {"resources": resources}))
    together: dict = {}
    for _, change in changes:
        together = merge(together, change)
    planned = {"every speed-only key": planned_jobs(finished_tiny, configfile=probe(finished_tiny, together))}
    # The combined probe is live: with one result-changing key added it plans that key's jobs.
    control = merge(together, nested("classify.num_boost_round", RESULT_CHANGES["classify.num_boost_round"][0]))
    assert (
        planned_jobs(finished_tiny, configfile=probe(finished_tiny, control))
        == (RESULT_CHANGES["classify.num_boost_round"][1])
    )
    if planned["every speed-only key"]:
        planned.update(
            {key: planned_jobs(finished_tiny, configfile=probe(finished_tiny, change)) for key, change in changes}
        )
    original = (finished_tiny / "config.yaml").read_text()
    cfg = yaml.safe_load(original)
    reordered = {
        k: (dict(reversed(list(v.items()))) if isinstance(v, dict) else v) for k, v in reversed(list(cfg.items()))
    }
    try:
        (finished_tiny / "config.yaml").write_text(yaml.safe_dump(reordered, sort_keys=False))
        planned["key order"] = planned_jobs(finished_tiny)
    finally:
        (finished_tiny / "config.yaml").write_text(original)
    assert planned == {key: {} for key in planned}, {k: v for k, v in planned.items() if v}


@pytest.mark.slow
def test_result_changing_keys_rerun_exactly_the_jobs_that_read_them(finished_tiny):
    planned = {
        key: planned_jobs(finished_tiny, configfile=probe(finished_tiny, nested(key, value)))
        for key, (value, _) in RESULT_CHANGES.items()
    }
    expected = {key: jobs for key, (_, jobs) in RESULT_CHANGES.items()}
    assert planned == expected


def test_a_bad_screen_stops_before_any_job(tmp_path):
    """The whole screen is checked against the models when the DAG is built: a crop larger than
    the images stops a dry run and a run before any job, so no plate is simulated, no model
    trained, nothing embedded. A passed check is recorded and not redone."""
    write_config(
        tmp_path,
        models={
            "mae": {
                "img_size": 64,
                "patch_size": 8,
                "embed_dim": 32,
                "depth": 1,
                "num_heads": 2,
                "decoder_embed_dim": 32,
                "decoder_depth": 1,
                "decoder_num_heads": 2,
            }
        },
    )
    for args in (("-n",), ()):
        proc = snakemake(tmp_path, *args, check=False)
        assert proc.returncode != 0
        assert "smaller than model mae's crop size 64" in proc.stdout + proc.stderr
    res = tmp_path / "results"
    assert not res.exists() or not any(res.rglob("*.parquet")) and not list(res.rglob("*.zarr"))
    write_config(tmp_path)
    assert planned_jobs(tmp_path)["embed"] == 6
    assert '"crop_size": [' in (res / "screen" / "validated.json").read_text()


def test_genome_scale_dag_stays_in_the_low_thousands(tmp_path):
    """17,000 genes x 6 guides, 40 batches, 400 plates, 4 variants: one embed job per plate,
    classification sharded, so the DAG stays small (timings: benchmarks/genome_dag.py)."""
    shutil.copy(REPO / "benchmarks" / "genome_scale.yaml", tmp_path / "config.yaml")
    jobs = planned_jobs(tmp_path)
    assert jobs["embed"] == 400 and jobs["classify"] == 4 * 250
    assert 1000 <= sum(jobs.values()) <= 3000, jobs


# --------------------------------------------------------------------------- kill -9 and resume


def start_snakemake(workdir: Path, log: Path, *args: str) -> subprocess.Popen:
    """Snakemake in the background, in a process group of its own (jobs included)."""
    with open(log, "a") as fh:
        return subprocess.Popen(
            _command(workdir, args, "config.yaml"),
            cwd=workdir,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


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
    shards that had finished. Every run targets the classification shards: the stages after them
    are never interrupted here, and their own runs are the module's uninterrupted reference."""
    work = tmp_path / "killed"
    work.mkdir()
    shutil.copy(finished_tiny / "config.yaml", work / "config.yaml")
    res, out = work / "results", tmp_path / "snakemake.out"
    targets = [
        str(p.relative_to(finished_tiny)) for p in sorted(finished_tiny.glob("results/classify/*/*/shard_*.parquet"))
    ]
    assert len(targets) == 16

    def finished_chunks() -> dict[Path, int]:
        """Plates interrupted mid-way: {final parquet: finished chunks}."""
        found = {}
        for parts in res.glob("embed/*/*.parquet.parts"):
            final = parts.with_name(parts.name.removesuffix(".parts"))
            done = len(list(parts.glob("chunk_*.parquet")))
            if done and not final.exists():
                found[final] = done
        return found

    # 1. Killed while embedding: as soon as a plate has a finished chunk (a few tries, since a
    #    plate of the tiny screen embeds in well under a second).
    interrupted: dict[Path, int] = {}
    for _ in range(6):
        proc = start_snakemake(work, out, "--rerun-incomplete", *targets)
        kill_group_when(proc, lambda: any(res.glob("embed/*/*.parquet.parts/chunk_*.parquet")), "embedded chunk")
        interrupted = finished_chunks()
        if interrupted:
            break
        snakemake(work, "--unlock")
    assert interrupted, "never caught a plate between its chunks"

    # A killed run leaves Snakemake's lock: the rerun is refused until `snakemake --unlock`.
    refused = snakemake(work, "--rerun-incomplete", *targets, check=False)
    assert refused.returncode != 0 and "--unlock" in refused.stdout + refused.stderr
    snakemake(work, "--unlock")

    # 2. Rerun, killed again as soon as Snakemake has recorded a classification shard as finished.
    def shards_done() -> list[Path]:
        return [p for p in sorted(res.glob("classify/*/*/shard_*.parquet")) if finished_by_snakemake(work, p)]

    proc = start_snakemake(work, out, "--rerun-incomplete", *targets)
    kill_group_when(proc, lambda: bool(shards_done()), "finished shard")
    shards = shards_done()
    assert 0 < len(shards) < 16
    done_before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in shards}
    logs_before = {
        p: (res / "logs" / "classify" / p.relative_to(res / "classify").with_suffix(".log")).read_bytes()
        for p in shards
    }

    # 3. Unlock and finish.
    snakemake(work, "--unlock")
    final = snakemake(work, "--rerun-incomplete", *targets)
    text = final.stdout + final.stderr

    # Byte-identical to the uninterrupted run (every table up to the shards), nothing half-written.
    ours = parquet_bytes(res)
    upstream = ("screen", "embed", "profiles", "transforms", "splits")  # the simulated truth: read after the shards
    shard_names = {str(Path(t).relative_to("results")) for t in targets}
    reference = {
        name: data
        for name, data in parquet_bytes(finished_tiny / "results").items()
        if (name.split("/")[0] in upstream and name != "screen/truth.parquet") or name in shard_names
    }
    # 6 screen tables (3 plates), 6 embeddings, 2 profiles, 8 variants, 2 fold tables, 16 shards
    assert sorted(ours) == sorted(reference) and len(ours) == 40
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
        after = lines[resumed[-1] :]
        todo = int(
            next(m for line in after if (m := re.search(r"embedding \d+ image\(s\) in (\d+) chunk\(s\)", line)))[1]
        )
        assert todo == total - already
        assert sum(bool(re.search(r"plate \S+: chunk \d+/\d+", line)) for line in after) == todo

    # Finished shards are not classified again: untouched outputs and logs, not in the rerun's jobs.
    classified = jobs_run(text)["classify"]
    for shard, (mtime, data) in done_before.items():
        assert shard.stat().st_mtime_ns == mtime and shard.read_bytes() == data
        log = res / "logs" / "classify" / shard.relative_to(res / "classify").with_suffix(".log")
        assert log.read_bytes() == logs_before[shard]
    rest = set(res.glob("classify/*/*/shard_*.parquet")) - set(done_before)
    assert classified == {str(p.relative_to(work)) for p in rest} and len(classified) == 16 - len(done_before)
