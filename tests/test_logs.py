"""Logs hold everything: a rule's script logs through phenoica.utils._io.rule_logger, so Python warnings,
what native code writes to stderr/stdout, library log lines and a failure's traceback all land in
the rule's log (and nothing on the console)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap

from tests.conftest import REPO

SRC = str(REPO / "src")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}


def test_warnings_native_stderr_library_logs_and_traceback_land_in_the_log(tmp_path):
    log = tmp_path / "logs" / "job.log"
    log.parent.mkdir()
    log.write_text("earlier run\n")  # a resumed job's log keeps the earlier lines
    code = textwrap.dedent(f"""
        import logging, os, sys, warnings
        from phenoica.utils._io import rule_logger
        log = rule_logger("phenoica.some_rule", {str(log)!r})
        log.info("started")
        warnings.warn("FastICA did not converge", UserWarning)
        os.write(2, b"native stderr line\\n")   # what C/C++ code (LightGBM, BLAS) writes
        print("a print to stdout")
        logging.getLogger("phenoica.classify").info("a library log line")
        raise RuntimeError("boom")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env())
    assert proc.returncode != 0
    assert proc.stdout == "" and proc.stderr == "", (proc.stdout, proc.stderr)
    text = log.read_text()
    assert text.startswith("earlier run\n")
    for expected in (
        "phenoica.some_rule INFO started",
        "py.warnings WARNING",
        "UserWarning: FastICA did not converge",
        "native stderr line",
        "a print to stdout",
        "phenoica.classify INFO a library log line",
        "phenoica.some_rule ERROR failed: boom",
        "Traceback",
        "RuntimeError: boom",
    ):
        assert expected in text, expected
    lines = text.splitlines()
    assert lines.index("native stderr line") > next(i for i, l in enumerate(lines) if "UserWarning" in l)  # in order


def test_a_warning_raised_in_a_snakemake_script_lands_in_its_rule_log(tmp_path):
    """Through Snakemake's own script runner, as every rule runs."""
    (tmp_path / "warns.py").write_text(
        textwrap.dedent('''
        """A rule script that warns, as a real one does (ICA not converged, an undefined metric)."""
        from phenoica.utils._io import rule_logger

        log = rule_logger("phenoica.warns", snakemake.log[0])

        import warnings

        warnings.warn("Precision is ill-defined and being set to 0.0", RuntimeWarning)
        open(snakemake.output[0], "w").write("done\\n")
        log.info("wrote %s", snakemake.output[0])
    ''')
    )
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent("""
        rule warns:
            output: "out.txt"
            log: "logs/warns.log"
            script: "warns.py"
    """)
    )
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (tmp_path / "logs" / "warns.log").read_text()
    assert "RuntimeWarning: Precision is ill-defined and being set to 0.0" in text
    assert "phenoica.warns INFO wrote out.txt" in text
    assert "Precision is ill-defined" not in proc.stdout + proc.stderr


def test_every_rule_script_logs_through_rule_logger_first():
    """Each script's first statement after its docstring imports rule_logger and the next
    installs it on the rule's log, before any import that could warn; each marks the start of
    its library call once (the CPU seconds before it are the job's start-up), and ends through
    ``run_job``."""
    scripts = sorted((REPO / "scripts").glob("*.py"))
    assert len(scripts) > 20
    for path in scripts:
        body = ast.parse(path.read_text()).body
        first, second = body[1], body[2]
        assert (
            isinstance(first, ast.ImportFrom)
            and first.module == "phenoica.utils"
            and "rule_logger" in [a.name for a in first.names]
            and {a.name for a in first.names} <= {"rule_logger", "log_job_cpu"}
        ), path.name
        assert ast.unparse(second).startswith("log = rule_logger(") and ast.unparse(second).endswith(
            ", snakemake.log[0])"
        ), path.name
        assert "get_logger" not in path.read_text(), path.name
        assert path.read_text().count('log_job_cpu(log, "work")') == 1, path.name
        # its work is main(), and run_job ends the process (exit status kept, no interpreter teardown)
        assert ast.unparse(body[-1]) == "run_job(main, log, snakemake)", path.name
        assert [n.name for n in body if isinstance(n, ast.FunctionDef)][-1] == "main", path.name


def test_a_job_logs_its_cpu_seconds_at_start_work_and_exit(tmp_path):
    """The lines benchmarks/run_cost.py reads: start, the script's own mark, and the end at exit,
    in that order and growing; a resumed job's log keeps the earlier run's lines before them."""
    log = tmp_path / "job.log"
    log.write_text("2026-01-01 00:00:00 phenoica.some_rule INFO job cpu start: 9.000 s\n")
    code = textwrap.dedent(f"""
        from phenoica.utils._io import log_job_cpu, rule_logger
        log = rule_logger("phenoica.some_rule", {str(log)!r})
        log_job_cpu(log, "work")
        total = sum(i * i for i in range(3_000_000))  # CPU between the work mark and the end
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env())
    assert proc.returncode == 0, proc.stderr
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from run_cost import job_marks
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    marks = job_marks(log)
    assert list(marks) == ["start", "work", "end"]
    assert 0 < marks["start"] <= marks["work"] < marks["end"]
    assert marks["end"] - marks["work"] > 0.05
