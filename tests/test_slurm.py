"""The workflow on a real SLURM cluster: a single-node slurmctld + slurmd on this machine
(.ci/slurm-local.sh), driven through profiles/slurm and snakemake-executor-plugin-slurm.

The cluster has no accounting database, so job status comes from squeue (the cluster keeps
finished jobs there for MinJobAge = 10 minutes, which is also how the tests see what SLURM ran)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO

pytest.importorskip("snakemake_executor_plugin_slurm", reason="the `slurm` extra is not installed")

SCRIPT = REPO / ".ci" / "slurm-local.sh"
PROFILE = REPO / "profiles" / "slurm"
UNABLE = 3  # slurm-local.sh: this machine cannot host the cluster (not root, no packages)

# The README's command, plus what this local cluster needs: its partition, squeue for job status
# (no slurmdbd), short polling (jobs take seconds here), and the per-job SLURM logs kept.
SLURM_ARGS = [
    "--profile",
    str(PROFILE),
    "--workflow-profile",
    "none",
    "--default-resources",
    "slurm_partition=debug",
    "--slurm-status-command",
    "squeue",
    "--slurm-init-seconds-before-status-checks",
    "2",
    "--seconds-between-status-checks",
    "2",
    "--slurm-keep-successful-logs",
    "--latency-wait",
    "5",
]
SCORES = ["results/hits/genes.parquet", "results/hits/guides.parquet"]
SUBMITTED = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+) \(log: (\S+)\)\.")


@pytest.fixture(scope="session")
def slurm_cluster():
    """Start the local cluster (installing SLURM if needed); stop it after, if we started it."""
    if os.geteuid() != 0:
        pytest.skip("a local SLURM cluster needs root (apt-get install, slurmctld/slurmd)")
    was_running = subprocess.run([str(SCRIPT), "status"], capture_output=True).returncode == 0
    proc = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, timeout=900)
    if proc.returncode == UNABLE:
        pytest.skip(f"no local SLURM cluster on this machine: {proc.stderr.strip()[-500:]}")
    assert proc.returncode == 0, f"slurm-local.sh start failed:\n{proc.stdout}\n{proc.stderr}"
    yield
    if not was_running:
        subprocess.run([str(SCRIPT), "stop"], capture_output=True, timeout=120)


def tiny_config(workdir: Path, resources: dict) -> None:
    """config/scenarios/demo.yaml cut to one model, two variants and one classification shard, without
    the mAP readout (up to the scores: 15 SLURM jobs in about 10 waves on a 2-CPU node; every job
    starts Snakemake twice, and each wave waits for a status poll), with the given resources."""
    cfg = yaml.safe_load((REPO / "config" / "scenarios" / "demo.yaml").read_text())
    cfg["models"] = {"mae": cfg["models"]["mae"]}
    cfg["transforms"]["variants"] = ["base", "pca_ica"]
    cfg["classify"].update(n_shards=1, map_readout=False)
    cfg["resources"] = resources
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))


def snakemake_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--configfile", "config.yaml", *args]


def run(cmd: list[str], workdir: Path, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout)


def scontrol_job(job_id: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True).stdout
    return dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", out))


def test_profile_keeps_configured_threads_on_the_cluster(tmp_path):
    """A dry run through the profile plans each rule with the threads the config asks for
    (the local default profile's `cores: 2` must not cap them)."""
    tiny_config(
        tmp_path, {"train_mae": {"cpus": 8, "gpus": 1, "gpu_model": "a100", "mem_mb": 32000, "partition": "gpu"}}
    )
    proc = run(snakemake_cmd(*SLURM_ARGS, "-n"), tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    block = proc.stdout[proc.stdout.index("rule train_mae:") :].split("\n\n")[0]
    assert re.search(r"threads: 8\b", block), block
    assert "gpu=1" in block and "gpu_model=a100" in block and "mem_mb=32000" in block, block
    assert "slurm_partition=gpu" in block, block  # resources.<rule>.partition, the config's own key


@pytest.mark.slow
def test_gpu_and_memory_requests_reach_sbatch(tmp_path, slurm_cluster):
    """GPUs, memory and runtime from the config become sbatch's --gpus=MODEL:N, --mem and -t:
    this node has no GPUs, so SLURM itself rejects the job and the plugin reports its call."""
    tiny_config(tmp_path, {"simulate_truth": {"gpus": 1, "gpu_model": "a100", "mem_mb": 3000, "runtime": 240}})
    proc = run(snakemake_cmd(*SLURM_ARGS, "--retries", "0", "results/screen/truth.parquet"), tmp_path, timeout=180)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text[-3000:]
    assert "Invalid generic resource" in text, text[-3000:]  # SLURM's own answer: no such GPU
    call = re.search(r"sbatch --parsable .*", text)
    assert call, text[-3000:]
    assert re.search(r" --gpus=a100:1\b", call[0]) and re.search(r" --mem 3000\b", call[0]), call[0]
    assert re.search(r" -t 240\b", call[0]) and re.search(r" -p debug\b", call[0]), call[0]


@pytest.mark.slow
def test_tiny_workflow_on_slurm_equals_local_run(tmp_path, slurm_cluster):
    """The tiny screen scored through SLURM gives the local run's numbers, every job was a SLURM
    job that completed, and each job got the CPUs, memory and time limit its rule asked for."""
    resources = {
        # Small jobs so several share the node; train_mae asks for more to show per-rule requests.
        "default": {"cpus": 1, "mem_mb": 1500, "runtime": 20},
        "train_mae": {"cpus": 2, "mem_mb": 2000, "runtime": 25},
    }
    on_slurm, local = tmp_path / "slurm", tmp_path / "local"
    tiny_config(on_slurm, resources)
    tiny_config(local, resources)

    # The local run goes alongside: the SLURM run's time is mostly job start-up and status polls
    # (4-8 minutes on a busy 2-core machine; the timeouts only catch hangs).
    local_proc = subprocess.Popen(
        snakemake_cmd("--cores", "2", *SCORES), cwd=local, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        proc = run(snakemake_cmd(*SLURM_ARGS, *SCORES), on_slurm, timeout=900)
        local_out, _ = local_proc.communicate(timeout=900)
    finally:
        if local_proc.poll() is None:
            local_proc.kill()
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"SLURM run failed:\n{text[-6000:]}"
    assert local_proc.returncode == 0, f"local run failed:\n{local_out[-6000:]}"

    # Same numbers: the workflow is seeded and each rule runs with the same threads both ways.
    for table in ("hits/genes.parquet", "hits/guides.parquet", "embed/mae/B01P01.parquet"):
        a = pd.read_parquet(on_slurm / "results" / table)
        b = pd.read_parquet(local / "results" / table)
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=0, atol=1e-9, obj=table)

    # Every job went through SLURM: one submission per planned job, each with its own log.
    submitted = {m[2]: Path(m[3]) for m in SUBMITTED.finditer(text)}
    planned = sum(int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", text, re.M) if rule not in ("total", "all"))
    assert planned >= 15 and len(submitted) == planned, (planned, sorted(submitted))
    assert all(
        log.exists() and log.is_relative_to(on_slurm / ".snakemake" / "slurm_logs") for log in submitted.values()
    )
    rules = {log.relative_to(on_slurm / ".snakemake" / "slurm_logs").parts[0] for log in submitted.values()}
    assert {"rule_simulate_plate", "rule_train_mae", "rule_embed", "rule_classify", "rule_gather_scores"} <= rules

    # ... and SLURM ran them all to completion (squeue keeps finished jobs for MinJobAge).
    run_id = re.search(r"SLURM run ID: (\S+)", text)[1]
    states = subprocess.run(
        ["squeue", "--states=all", "--noheader", "--format=%i|%T", "--name", run_id],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert dict(s.split("|") for s in states) == {job: "COMPLETED" for job in submitted}

    # Per-rule requests reached SLURM: threads -> CPUs, mem_mb -> memory, runtime -> time limit.
    by_rule = {log.relative_to(on_slurm / ".snakemake" / "slurm_logs").parts[0]: job for job, log in submitted.items()}
    train, classify = scontrol_job(by_rule["rule_train_mae"]), scontrol_job(by_rule["rule_classify"])
    assert (train["NumCPUs"], train["MinMemoryNode"], train["TimeLimit"]) == ("2", "2000M", "00:25:00")
    assert (classify["NumCPUs"], classify["MinMemoryNode"], classify["TimeLimit"]) == ("1", "1500M", "00:20:00")
    assert train["Partition"] == "debug" and train["JobState"] == "COMPLETED"
