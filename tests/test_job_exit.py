"""A job's exit path, run again and again: the process that read and wrote parquet tables (as
``gather_scores`` does, through pyarrow's thread pools) ends with status 0 and nothing after its
last log line. A rare abort at exit was seen once in about 30 workflow runs ("terminate called
without an active exception", SIGABRT: a native thread pool torn down while a worker is alive);
this test catches it if it comes back often enough to matter (slow: 30 processes)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.test_report import ica_gain, make_rows

JOB = """
import sys
from phenoica.utils._io import rule_logger
log = rule_logger("phenoica.gather_scores", sys.argv[1])
from phenoica.classify._null import split_control_rows
from phenoica.utils._io import read_parquets, write_parquet
rows, controls = split_control_rows(read_parquets(sys.argv[3:]))
write_parquet(rows, sys.argv[2])
log.info("%d guide-fold rows", len(rows))
"""


@pytest.mark.slow
def test_the_gather_jobs_exit_path_ends_cleanly_every_time(tmp_path):
    shards = []
    for i in range(4):
        path = tmp_path / f"shard_{i}.parquet"
        make_rows(ica_gain, n_genes=6, model=f"m{i}").to_parquet(path)
        shards.append(str(path))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    for run in range(30):
        log = tmp_path / f"run{run}.log"
        proc = subprocess.run(
            [sys.executable, "-c", JOB, str(log), str(tmp_path / "out.parquet"), *shards], env=env, timeout=120
        )
        text = log.read_text()
        assert proc.returncode == 0, (run, proc.returncode, text[-2000:])
        assert "terminate called" not in text and text.rstrip().endswith("s"), text[-500:]  # last line: job cpu end
