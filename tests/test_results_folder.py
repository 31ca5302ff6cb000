"""A results folder is phenoica's alone (``workflow/_provenance.py``): a folder holding a
user's files is refused before any job and its files are left alone, one run at a time holds its
lock (released when the holder dies, however it dies), and the folder records the config it was
built with. Each job stamps its outputs with what decided them (the same module),
so a run from any workflow folder reruns exactly the jobs whose settings differ; outputs without
a stamp, in a folder built from another workflow folder, are refused unless adopted."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from phenoica.contract import output_paths, validate_config
from phenoica.utils import MANIFEST, record_written
from phenoica.workflow import (
    RuleFiles,
    check_results_folder,
    check_stamps,
    lock_results,
    record_build,
    replaced_folders,
    write_stamp,
)
from phenoica.workflow._provenance import SET_ASIDE, changed_jobs, check_unstamped, set_aside_changed
from phenoica.workflow._results_folder import RECORD, ResultsFolderError, read_record
from phenoica.workflow._stamps import STAMPS, param_text, params_digest
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


def test_a_folder_built_from_another_workflow_folder_is_noted_and_a_copied_pair_is_not(tmp_path):
    work, res, cfg = _built(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    assert check_results_folder(res, other, cfg) == [
        f"results folder {res} was last built from the workflow folder {work.resolve()}: each job's stamp there is "
        "compared with this run's settings, and the jobs whose settings differ rerun"
    ]
    moved = tmp_path / "moved"
    shutil.copytree(work, moved)  # the workflow folder with its results folder inside
    assert check_results_folder(moved / "results", moved, cfg) == []
    record_build(res, other, cfg)  # the other folder builds it now, and the first is the other
    assert check_results_folder(res, other, cfg) == [] and check_results_folder(res, work, cfg) != []


def _job(res: Path, rule: str, inputs: list[str], outputs: list[str], *params) -> SimpleNamespace:
    """A rule's job as its script sees it (``snakemake``), its outputs written."""
    for out in outputs:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(rule)
    return SimpleNamespace(rule=rule, params=list(params), input=inputs, output=outputs, config={"results": str(res)})


def _rules(res: Path, options: dict[str, object]) -> list[RuleFiles]:
    """Two rules in a chain (``fit`` -> ``score`` -> ``gather``); ``options``: each rule's param now."""
    return [
        RuleFiles(
            name,
            (f"{res}/{name}/{{m}}.txt",),
            f"{res}/benchmarks/{name}/{{m}}.tsv",
            log=f"{res}/logs/{name}/{{m}}.log",
            params=lambda w, n=name: [options[n], w["m"]],
        )
        for name in ("fit", "score", "gather")
    ]


def test_jobs_whose_stamp_holds_other_settings_and_the_jobs_after_them_are_set_aside(tmp_path):
    res = tmp_path / "res"
    for m in ("a", "b"):
        fit = _job(res, "fit", [], [f"{res}/fit/{m}.txt"], 1, m)
        score = _job(res, "score", fit.output, [f"{res}/score/{m}.txt"], 2, m)
        gather = _job(res, "gather", score.output, [f"{res}/gather/{m}.txt"], 3, m)
        for job in (fit, score, gather):
            write_stamp(job)
    assert json.loads((res / STAMPS / "score" / "a.txt.json").read_text())["inputs"] == ["fit/a.txt"]
    same = check_stamps(res, _rules(res, {"fit": 1, "score": 2, "gather": 3}))
    assert sorted(c.status for c in same) == ["same"] * 6 and changed_jobs(res, same) == []
    checks = check_stamps(res, _rules(res, {"fit": 1, "score": 7, "gather": 3}))
    jobs = changed_jobs(res, checks)
    assert sorted((c.rule, c.outputs[0].split("/res/")[1], why[:20]) for c, why in jobs) == [
        ("gather", "gather/a.txt", "reads score/a.txt, w"),
        ("gather", "gather/b.txt", "reads score/b.txt, w"),
        ("score", "score/a.txt", "was made with other "),
        ("score", "score/b.txt", "was made with other "),
    ]
    notes = set_aside_changed(res, jobs)
    assert notes[0].startswith(
        f"results folder {res}: 2 output(s) of rule score (score/a.txt, score/b.txt) are rebuilt: was made with other settings"
    )
    assert sorted(p.name for p in res.rglob("*.txt") if SET_ASIDE not in str(p)) == ["a.txt", "b.txt"]  # fit's
    assert len(list((res / SET_ASIDE).rglob("*.txt"))) == 4


def test_a_job_started_since_its_stamp_has_none_and_is_refused_to_another_workflow_folder(tmp_path):
    work, res, cfg = _built(tmp_path)
    fit = _job(res, "fit", [], [f"{res}/fit/a.txt"], 1, "a")
    write_stamp(fit)
    rules = _rules(res, {"fit": 1, "score": 2, "gather": 3})
    assert [c.status for c in check_stamps(res, rules)] == ["same"]
    log = res / "logs" / "fit" / "a.log"
    log.parent.mkdir(parents=True)
    log.write_text("started again")
    os.utime(log, ns=(time.time_ns() + 10**9,) * 2)  # written after the stamp: the job did not finish
    checks = check_stamps(res, rules)
    assert [c.status for c in checks] == ["unstamped"]
    assert check_unstamped(res, work, checks) == []  # its builder's .snakemake/ judges it
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(ResultsFolderError) as err:
        check_unstamped(res, other, checks)
    assert (
        f"results folder {res} was built from the workflow folder {work.resolve()}, not from {other}, and 1 of its "
        f"output(s) have no stamp of the settings they were made with ({res}/fit/a.txt)"
    ) in str(err.value)
    assert "adopted from the workflow folder" in check_unstamped(res, other, checks, adopt=True)[0]


def test_a_params_digest_is_the_set_of_the_texts_snakemake_records():
    from phenoica.classify import ClassifyOptions

    options = ClassifyOptions.from_config(validate_config({}))
    assert params_digest([options, "x", 3]) == params_digest([3, options, "x", object()])  # no text of an object
    assert params_digest([options]) != params_digest([options._replace(num_boost_round=options.num_boost_round + 1)])
    assert param_text(options) == repr(options) and param_text(object()) is None


def test_a_stamps_param_texts_are_snakemakes_own():
    """The stamp's texts are those Snakemake's record keeps (its persistence's serializer), so a
    stamp and Snakemake's params trigger judge a job alike: a value it leaves out (an object, the
    content key of a job that reads no user file) is left out of the stamp too."""
    from snakemake.persistence import UNREPRESENTABLE, PersistenceBase

    from phenoica.classify import ClassifyOptions
    from phenoica.workflow._digests import NOT_KEYED

    snakemake = SimpleNamespace(_serialize_param_builtin=lambda v: PersistenceBase._serialize_param_builtin(None, v))
    options = ClassifyOptions.from_config(validate_config({}))
    values = [options, "x", 3, 0.5, None, True, [1, "a"], {"k": (1, 2)}, frozenset({2}), b"\0", range(3)]
    values += [pd.DataFrame({"a": [1, 2]}), pd.Series([3.0]), pd.Index(["p"]), object(), NOT_KEYED]
    for value in values:
        text = PersistenceBase._serialize_param_pandas(snakemake, value)  # reads no state of a record
        assert param_text(value) == (None if text is UNREPRESENTABLE else text), value


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
from phenoica.workflow._results_folder import lock_results
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


def _embeddings_config(tmp_path: Path, results: Path, num_boost_round: int) -> dict:
    """The smallest whole run (the embeddings of ``phenoica.screen.scenarios``, two classify shards)."""
    from phenoica.screen.scenarios import write_embeddings

    if not (tmp_path / "store").exists():
        write_embeddings(tmp_path / "store", 0)
    return {
        "seed": 0,
        "results": str(results),
        "screen": {
            "source": "embeddings",
            "embeddings": str(tmp_path / "store" / "*.parquet"),
            "embedding_column": "vector",
        },
        "models": {"ext": {}},
        "transforms": {"n_components": 6, "variants": ["base", "pca"]},
        "classify": {"n_shards": 2, "num_boost_round": num_boost_round, "n_null_guides": 20, "min_train_samples": 3},
        "sweep": {"points": 0},
    }


def _workflow_folder(tmp_path: Path, name: str, results: Path, num_boost_round: int) -> Path:
    import yaml

    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    config = _embeddings_config(tmp_path, results, num_boost_round)
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return folder


def _tables(results: Path) -> dict[str, pd.DataFrame]:
    return {
        str(p.relative_to(results)): pd.read_parquet(p)
        for p in sorted(results.rglob("*.parquet"))
        if not str(p.relative_to(results)).startswith(".phenoica")
    }


def _ran(workdir: Path, target: str) -> dict[str, int]:
    """Run the workflow in ``workdir`` to ``target``: rule -> the jobs that ran."""
    from tests.test_workflow import snakemake

    proc = snakemake(workdir, target)
    counts: dict[str, int] = {}
    for rule in re.findall(r"^(?:local)?rule (\w+):$", proc.stdout + proc.stderr, flags=re.M):
        counts[rule] = counts.get(rule, 0) + 1
    return counts


@pytest.mark.slow
def test_two_workflow_folders_one_results_folder_rerun_exactly_what_their_settings_change(tmp_path):
    """Workflow folders a and b write one results folder: b's other classify.num_boost_round reruns
    the classify shards and the jobs after them, nothing else, and the tables equal a clean run of
    b's config; a folder with a's config reruns nothing; with b's .snakemake/ deleted, another
    change reruns what it affects; a dry run says so and moves nothing."""
    shared = tmp_path / "shared"
    target = str(shared / "hits" / "hits.parquet")
    a = _workflow_folder(tmp_path, "a", shared, 20)
    assert _ran(a, target)["classify"] == 4
    assert _ran(_workflow_folder(tmp_path, "same", shared, 20), target) == {}
    b = _workflow_folder(tmp_path, "b", shared, 30)
    classify_chain = {"classify": 4, "gather_scores": 1, "call_hits": 1}
    assert _ran(b, target) == classify_chain
    assert _ran(b, target) == {}
    clean = tmp_path / "clean"
    _ran(_workflow_folder(tmp_path, "c", clean, 30), str(clean / "hits" / "hits.parquet"))
    ours, theirs = _tables(shared), _tables(clean)
    assert sorted(ours) == sorted(theirs) and len(ours) > 10
    for name, table in theirs.items():
        pd.testing.assert_frame_equal(ours[name], table, obj=name)
    # Snakemake's script: runs the jobs whose scripts end through run_job: logs whole, benchmark files written
    assert (shared / "benchmarks" / "gather_scores.tsv").exists()
    assert "job cpu end" in (shared / "logs" / "gather_scores.log").read_text().rstrip().splitlines()[-1]
    shutil.rmtree(b / ".snakemake")
    _workflow_folder(tmp_path, "b", shared, 25)
    from tests.test_workflow import snakemake

    dry = snakemake(b, "-n", target)
    assert "4 output(s) of rule classify" in dry.stderr and "left in place by this dry run" in dry.stderr
    assert (shared / "classify" / "ext" / "pca" / "shard_0.parquet").exists()
    assert _ran(b, target) == classify_chain
    assert _ran(a, target) == classify_chain  # a's config again: back to its own settings
