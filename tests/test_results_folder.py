"""A results folder is phenoica's alone (``phenoica.workflow._ownership``): a folder holding a
user's files is refused before any job and its files are left alone, a folder built from another
workflow folder is refused, one run at a time holds its lock (released when the holder dies,
however it dies), and the folder records the config it was built with."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from phenoica.contract import output_paths, validate_config
from phenoica.utils import MANIFEST, record_written
from phenoica.workflow import ResultsFolderError, check_results_folder, lock_results, record_build, replaced_folders
from phenoica.workflow._ownership import RECORD, read_record
from tests.conftest import REPO


def _folders(results: Path) -> tuple[list[str], list[str]]:
    return replaced_folders(output_paths(str(results)), ["P1"], "demo")


def _built(tmp_path: Path, **config) -> tuple[Path, Path, dict]:
    """A workflow folder and its results folder, built once (the record written) with ``config``."""
    work, res = tmp_path / "work", tmp_path / "work" / "results"
    work.mkdir()
    cfg = validate_config({"results": str(res), **config})
    check_results_folder(res, work, cfg, *_folders(res))
    record_build(res, work, cfg, _folders(res)[0])
    return work, res, cfg


def test_a_folder_holding_a_users_files_is_refused_and_left_alone(tmp_path):
    res = tmp_path / "mine"
    (res / "report" / "figures").mkdir(parents=True)
    (res / "notes.txt").write_text("my notes")
    (res / "report" / "figures" / "draft.png").write_bytes(b"png")
    cfg = validate_config({"results": str(res)})
    with pytest.raises(ResultsFolderError) as err:
        check_results_folder(res, tmp_path, cfg, *_folders(res))
    assert f"results folder {res} holds 2 file(s) phenoica did not write there: {res}/notes.txt, {res}/report" in str(
        err.value
    )
    assert "set adopt_results: true" in str(err.value)
    assert (res / "notes.txt").read_text() == "my notes" and (res / "report" / "figures" / "draft.png").exists()
    # said otherwise: a note, and the run goes on
    notes = check_results_folder(res, tmp_path, {**cfg, "adopt_results": True}, *_folders(res))
    assert notes == [
        f"results folder {res}: adopted with 2 file(s) phenoica did not write ({res}/notes.txt, {res}/report/figures/draft.png)"
    ]


def test_an_empty_or_new_folder_passes_and_a_folder_of_an_earlier_phenoica_is_taken_as_its(tmp_path):
    cfg = validate_config({})
    assert check_results_folder(tmp_path / "new", tmp_path, cfg) == []
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    assert check_results_folder(tmp_path / "empty", tmp_path, cfg) == []
    old = tmp_path / "old"
    (old / "screen").mkdir(parents=True)
    (old / "screen" / "validated.json").write_text("{}")
    (old / "report" / "figures").mkdir(parents=True)
    (old / "report" / "figures" / "a.png").write_bytes(b"png")
    assert check_results_folder(old, tmp_path, cfg, *_folders(old)) == []
    record_build(old, tmp_path, cfg, _folders(old)[0])  # the figures it holds are listed as phenoica's
    assert check_results_folder(old, tmp_path, cfg, *_folders(old)) == []


def test_a_file_put_into_a_folder_a_rerun_replaces_is_named(tmp_path):
    work, res, cfg = _built(tmp_path)
    figures = Path(_folders(res)[0][0])
    record_written(figures, complete=False)  # the report job starts ...
    (figures / "a.png").write_bytes(b"png")
    assert check_results_folder(res, work, cfg, *_folders(res)) == []  # ... and is killed: its files are its own
    record_written(figures)  # ... or ends
    assert sorted(p.name for p in figures.iterdir()) == [MANIFEST, "a.png"]
    (figures / "mine.png").write_bytes(b"user")
    store = Path(_folders(res)[1][0])
    (store / "tiles").mkdir(parents=True)
    (store / "zarr.json").write_text("{}")
    (store / "README").write_text("user")
    with pytest.raises(
        ResultsFolderError,
        match=r"holds 2 file\(s\) phenoica did not write there: .*report/figures/mine.png, .*screen/plates/P1.zarr/README",
    ):
        check_results_folder(res, work, cfg, *_folders(res))


def test_a_folder_built_from_another_workflow_folder_is_refused_and_a_copied_pair_is_not(tmp_path):
    work, res, cfg = _built(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(ResultsFolderError) as err:
        check_results_folder(res, other, cfg)
    assert f"results folder {res} was built from the workflow folder {work.resolve()}, not from {other}" in str(
        err.value
    )
    with pytest.raises(ResultsFolderError, match="was built from the workflow folder"):
        record_build(res, other, cfg)  # a run that passed the check before the other run wrote its record
    assert "adopted from the workflow folder" in check_results_folder(res, other, {**cfg, "adopt_results": True})[0]
    moved = tmp_path / "moved"
    shutil.copytree(work, moved)  # the workflow folder with its results folder inside
    assert check_results_folder(moved / "results", moved, cfg) == []


def test_the_folder_records_its_config_and_a_run_with_another_names_the_keys_that_differ(tmp_path):
    work, res, cfg = _built(tmp_path, classify={"num_boost_round": 40})
    assert read_record(res)["config"]["classify"]["num_boost_round"] == 40
    changed = validate_config({"results": str(res), "classify": {"num_boost_round": 12}, "seed": 3})
    notes = check_results_folder(res, work, changed)
    assert notes == [
        f"results folder {res} was last built with another config: 2 key(s) differ "
        "(classify.num_boost_round, seed); the jobs that read them rerun"
    ]
    token = read_record(res)["token"]
    record_build(res, work, changed)
    assert read_record(res)["token"] == token and read_record(res)["config"]["seed"] == 3
    assert check_results_folder(res, work, changed) == []


HOLD = """
import sys, time
from phenoica.workflow._ownership import lock_results
lock_results(sys.argv[1])
print("held", flush=True)
time.sleep(60)
"""


def test_one_run_at_a_time_holds_the_lock_which_names_its_holder_and_ends_with_it(tmp_path):
    res = tmp_path / "res"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(res)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ResultsFolderError) as err:
            lock_results(res)
        assert f"results folder {res} is being written by another run (pid {holder.pid} on host" in str(err.value)
    finally:
        holder.send_signal(signal.SIGKILL)  # a crash: no clean-up runs
        holder.wait()
    lock_results(res)  # released by the system with the process
    lock_results(res)  # and taken once per process
    assert str(os.getpid()) in (res / ".phenoica" / "lock").read_text()
    assert not (res / RECORD).exists()  # the lock is not the record


def test_the_workflow_refuses_a_users_folder_before_any_job(tmp_path):
    """A dry run stops at the results folder (before the screen is checked), which keeps its files."""
    from tests.test_workflow import snakemake, write_config

    write_config(tmp_path)
    mine = tmp_path / "results" / "report" / "figures" / "mine.png"
    mine.parent.mkdir(parents=True)
    mine.write_bytes(b"user")
    start = time.time()
    proc = snakemake(tmp_path, "-n", check=False)
    assert proc.returncode != 0
    assert "holds 1 file(s) phenoica did not write there: results/report/figures/mine.png" in proc.stdout + proc.stderr
    assert mine.read_bytes() == b"user" and not (tmp_path / "results" / "screen").exists()
    assert time.time() - start < 120
