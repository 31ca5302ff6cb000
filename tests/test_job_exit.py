"""A job's exit path. A rare abort at exit was seen once in about 30 workflow runs ("terminate
called without an active exception", SIGABRT: a native thread pool torn down while a worker is
alive, after the job's last log line). Every rule's script therefore ends through
``phenoica.utils.end_job`` (``phenoica.workflow.run_job``), which flushes the log and
leaves with ``os._exit`` and the job's own status, without the interpreter's teardown: the status
of a return, ``sys.exit(n)`` and an exception is kept, what the job printed is in its log, and a
thread left running neither holds nor aborts the process. The exit path of a process that read
and wrote parquet tables (as ``gather_scores`` does, through pyarrow's thread pools) is run again
and again, without and with the fence (slow: 60 processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

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


#: The gather job's exit path through the fence, as the rule's script ends.
FENCED_JOB = """
import sys
from phenoica.utils import rule_logger
log = rule_logger("phenoica.gather_scores", sys.argv[1])
from phenoica.classify import split_control_rows
from phenoica.utils import end_job, read_parquets, write_parquet
def main():
    rows, controls = split_control_rows(read_parquets(sys.argv[3:]))
    write_parquet(rows, sys.argv[2])
    log.info("%d guide-fold rows", len(rows))
end_job(main, log)
"""

#: A job that logs, prints a line left unflushed, then does ``{end}``, ending through the fence.
ENDING = """
import sys, threading, time
from phenoica.utils import end_job, rule_logger
log = rule_logger("phenoica.job", sys.argv[1])
def main():
    log.info("working")
    sys.stdout.reconfigure(line_buffering=False)
    print("printed, not yet flushed", end="")
    import ctypes
    ctypes.CDLL(None).printf(b"printed by C, not yet flushed\\n")
    {end}
end_job(main, log)
"""


@pytest.mark.parametrize(
    ("end", "status", "logged"),
    [
        ("return None", 0, []),
        ("sys.exit(3)", 3, []),
        ("sys.exit('cannot go on')", 1, ["cannot go on"]),
        ("raise RuntimeError('broke')", 1, ["phenoica.job ERROR failed: broke", "Traceback", "RuntimeError: broke"]),
        ("threading.Thread(target=time.sleep, args=(600,)).start()", 0, []),  # a non-daemon thread left running
    ],
    ids=["return", "exit-3", "exit-text", "exception", "thread"],
)
def test_a_job_ends_with_its_own_status_its_log_flushed_and_no_wait(tmp_path, end, status, logged):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    log = tmp_path / "job.log"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", ENDING.format(end=end), str(log)], env=env, timeout=300)
    assert proc.returncode == status
    assert time.monotonic() - start < 120  # the thread's 600 s are not waited for
    text = log.read_text()
    assert "phenoica.job INFO working" in text and "printed, not yet flushed" in text
    assert "printed by C, not yet flushed" in text  # the C library's buffer (the log is no terminal)
    assert all(line in text for line in logged), text
    assert text.rstrip().splitlines()[-1].endswith(" s") and "job cpu end" in text.rstrip().splitlines()[-1]


def test_a_job_stamps_its_outputs_last_and_only_when_it_succeeds(tmp_path):
    """run_job writes the job's stamp after its log's last line (a later start of the job makes
    the log newer than the stamp), and no stamp when the job fails."""
    code = """
import sys
from types import SimpleNamespace
from phenoica.utils import rule_logger
from phenoica.workflow import run_job
res = sys.argv[2]
job = SimpleNamespace(rule="r", params=[1], input=[], output=[res + "/out.txt"], config={"results": res})
log = rule_logger("phenoica.job", sys.argv[1])
def main():
    open(res + "/out.txt", "w").write("x")
    if sys.argv[3] == "fail":
        raise ValueError("no")
run_job(main, log, job)
"""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    res = tmp_path / "res"
    res.mkdir()
    stamp = res / ".phenoica" / "stamps" / "out.txt.json"
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.log"), str(res), "ok"], env=env, timeout=300)
    assert proc.returncode == 0 and stamp.stat().st_mtime_ns >= (tmp_path / "a.log").stat().st_mtime_ns
    stamp.unlink()
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "b.log"), str(res), "fail"], env=env, timeout=300)
    assert proc.returncode == 1 and not stamp.exists()


@pytest.mark.slow
def test_the_gather_jobs_exit_path_ends_cleanly_every_time(tmp_path):
    shards = []
    for i in range(4):
        path = tmp_path / f"shard_{i}.parquet"
        make_rows(ica_gain, n_genes=6, model=f"m{i}").to_parquet(path)
        shards.append(str(path))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    for run in range(60):
        log = tmp_path / f"run{run}.log"
        job = JOB if run % 2 else FENCED_JOB
        proc = subprocess.run(
            [sys.executable, "-c", job, str(log), str(tmp_path / "out.parquet"), *shards], env=env, timeout=120
        )
        text = log.read_text()
        assert proc.returncode == 0, (run, proc.returncode, text[-2000:])
        assert "terminate called" not in text and text.rstrip().endswith("s"), text[-500:]  # last line: job cpu end
