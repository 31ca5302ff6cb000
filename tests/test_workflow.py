"""The whole workflow through Snakemake on the tiny config: a real run, lint, and the jobs a
dry run plans after adding plates or changing a parameter."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO

SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(workdir / "config.yaml"), "--cores", "2", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def planned_jobs(workdir: Path, *args: str) -> dict[str, int]:
    """Rule -> job count of a dry run (the 'Job stats' table)."""
    out = snakemake(workdir, "-n", "--quiet", "rules", *args).stdout
    counts = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([A-Za-z_]\w*)\s+(\d+)\s*$", line)
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def write_config(workdir: Path, **changes) -> dict:
    cfg = yaml.safe_load((REPO / "tests" / "data" / "tiny.yaml").read_text())
    for section, values in changes.items():
        cfg.setdefault(section, {}).update(values)
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    return cfg


def test_default_config_dry_run_plans_every_stage(tmp_path):
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    jobs = planned_jobs(tmp_path)
    assert jobs["simulate_plate"] == 8 and jobs["embed"] == 8 and jobs["train_mae"] == 1
    assert jobs["classify"] == 4 * 2 and jobs["apply_transform"] == 4 and jobs["report"] == 1


def test_lint_is_clean(tmp_path):
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    proc = snakemake(tmp_path, "--lint", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in text, text[-3000:]


@pytest.mark.slow
def test_tiny_workflow_end_to_end_and_incremental(tmp_path):
    write_config(tmp_path)
    snakemake(tmp_path)
    res = tmp_path / "results"
    genes = pd.read_parquet(res / "scores" / "genes.parquet")
    assert set(genes["variant"]) == {"base", "pca", "pca_ica", "pca_rand"}
    assert genes["auroc"].between(0, 1).all()
    emb = pd.read_parquet(res / "embeddings" / "mae" / "B01P01.parquet")
    assert emb.filter(like="emb_").shape[1] == 32 and emb["Metadata_ImageIndex"].is_monotonic_increasing
    assert (res / "report" / "index.html").exists() and (res / "report" / "report.md").exists()
    for rule in ("embed", "classify", "train_mae"):
        assert any((res / "logs").rglob("*.log")), rule
    assert any((res / "benchmarks" / "embed").rglob("*.tsv"))

    # Nothing to do on a rerun.
    assert planned_jobs(tmp_path) == {}

    # Adding plates (a new batch) re-runs only their simulation and embedding + what gathers them.
    write_config(tmp_path, demo={"n_batches": 4})
    jobs = planned_jobs(tmp_path)
    assert jobs.get("simulate_plate") == 1 and jobs.get("embed") == 1, jobs
    assert "train_mae" not in jobs and jobs.get("gather_profiles") == 1

    # Changing a classification parameter re-runs classification and report, not embedding.
    write_config(tmp_path, classify={"num_boost_round": 12})
    jobs = planned_jobs(tmp_path)
    assert "embed" not in jobs and "train_mae" not in jobs and "fit_transforms" not in jobs, jobs
    assert jobs.get("classify") == 8 and jobs.get("report") == 1
