"""Outputs phenoica did not write are rebuilt, not trusted.

Snakemake trusts an output that exists and is newer than its inputs: a file put at an output's
path (a profile table from another run, newer than the embeddings) was read as the run's own,
and everything after it followed. Every rule of phenoica has a ``benchmark:`` file, which the job
writes when it ends and which Snakemake then touches after the job's outputs (and ``snakemake
--touch`` does the same), so a job's benchmark file is its receipt: an output newer than its
job's benchmark file, or without one, was not written by that job (unless that job was started
since and killed: its log is newer than its receipt, and Snakemake redoes it). When the DAG is built
(by the run that holds the results folder's lock), :func:`untrusted_outputs` finds them and
:func:`set_aside` moves each into ``.phenoica/set-aside/`` of the results folder (a user's file
is kept, never deleted), and the outputs of the stamped jobs that read it, and of those after
them, go with it (:func:`changed_jobs`), so that the same run rebuilds it wherever it is read (a
file moved aside that no job of the run reads is rebuilt only as a target). A dry run moves nothing:
its notes say what a run would set aside.

Outputs a job checks itself are left to it: the embeddings (``update()`` outputs) record the work
they were made from (:func:`phenoica.embed._jobs.plate_work_key`), and their job redoes a plate
whose file records other work, so a plate finished by a job that was killed is kept.

A replacement with an older modification time (``cp -p`` of an older file) is not told by this
test; the content keys of the user's inputs (:mod:`phenoica.workflow._digests`) rerun what an
input changed.

**Stamps: what decided a job's outputs, kept beside them.** Snakemake's record of the params each
output was made with (each rule's options object, :mod:`phenoica.contract.stage_options`, and
the content keys of the user's inputs, :mod:`phenoica.workflow._digests`) lives in the workflow
folder's ``.snakemake/``, so a run from another workflow folder, or after ``.snakemake/`` was
deleted, could not tell which outputs another config made. Every job therefore ends through
:func:`run_job`, which writes its stamp last (:func:`write_stamp`: the rule and a digest of its
params, serialized as Snakemake records them, in ``.phenoica/stamps/<first output>.json`` of the
results folder, with the inputs it read). When the DAG is built, :func:`check_stamps` evaluates
each rule's params for the jobs whose outputs exist and compares: a job whose stamp holds other
params, and every stamped job that read its outputs in turn (:func:`changed_jobs`), has its
outputs set aside (:func:`set_aside_changed`, update() outputs too), so that they rerun, from any
workflow folder (Snakemake rebuilds a missing file only where a job that runs reads it, so the
whole chain goes); a job whose stamp matches is trusted. A dry run moves nothing and says what a
run rebuilds. A job without a stamp that describes its outputs (built before stamps were kept,
or started again since its stamp and not finished: its log is newer than its stamp) is left to
Snakemake's own record, as before (:func:`phenoica.workflow.check_unstamped` refuses a
run from another workflow folder over such outputs, where that record is not).
"""

from __future__ import annotations

import datetime
import glob
import hashlib
import inspect
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NamedTuple, NoReturn, Sequence

from phenoica.utils import atomic_path, end_job

#: Where :func:`set_aside` moves the outputs it does not trust, inside the results folder.
SET_ASIDE = ".phenoica/set-aside"
#: The file Snakemake touches in a ``directory()`` output when its job ends (that output's time).
DIRECTORY_STAMP = ".snakemake_timestamp"
#: Where each job's stamp is kept, inside the results folder (:func:`write_stamp`).
STAMPS = ".phenoica/stamps"

_WILDCARD = re.compile(r"\{\s*(\w+)\s*(?:,((?:[^{}]|\{[^{}]*\})*))?\}")


class RuleFiles(NamedTuple):
    """A rule's output templates, its benchmark and log templates (``{name}`` or
    ``{name,regex}`` wildcards) and which outputs are folders; for its stamps
    (:func:`check_stamps`): its ``kept`` outputs (``update()``: checked by their own job, not
    against the benchmark file), the template of its first output (its jobs' stamps are named
    by it) and ``params``, the job's params for its wildcards (:func:`rule_params`)."""

    name: str
    outputs: tuple[str, ...]
    benchmark: str
    directories: frozenset[str] = frozenset()
    log: str = ""
    kept: tuple[str, ...] = ()
    first: str = ""
    params: Callable[[Mapping[str, str]], Sequence[Any]] | None = None


def _pattern(template: str) -> re.Pattern[str]:
    """A regex that matches the paths of ``template`` and names its wildcards."""
    out, seen, last = [], set(), 0
    for m in _WILDCARD.finditer(template):
        out.append(re.escape(template[last : m.start()]))
        name, regex = m.group(1), m.group(2) or "[^/]+"
        out.append(f"(?P={name})" if name in seen else f"(?P<{name}>{regex})")
        seen.add(name)
        last = m.end()
    out.append(re.escape(template[last:]))
    return re.compile("".join(out))


def _format(template: str, wildcards: dict[str, str]) -> str:
    return _WILDCARD.sub(lambda m: wildcards[m.group(1)], template)


def _mtime(path: str, directory: bool = False) -> int | None:
    """Modification time (ns) of a file or output (a folder's: of the stamp Snakemake touches in
    it); None when absent."""
    try:
        return os.stat(os.path.join(path, DIRECTORY_STAMP) if directory else path).st_mtime_ns
    except OSError:
        return None


def untrusted_outputs(rules: Iterable[RuleFiles]) -> list[tuple[str, str]]:
    """(output, its job's benchmark file) of every existing output that is newer than its job's
    benchmark file or has none: phenoica did not write it there. An output whose job's log was
    written after its benchmark file (or without one) is left alone: a job of phenoica ran since
    and did not end (killed), and Snakemake, which marked its outputs incomplete, redoes it. One
    ``glob`` per output template (its wildcards as ``*``: no deeper walk) and two or three
    ``stat`` calls per output."""
    found = []
    for rule in rules:
        for template in rule.outputs:
            pattern = _pattern(template)
            directory = template in rule.directories
            for path in sorted(glob.glob(_WILDCARD.sub("*", template))):
                m = pattern.fullmatch(path)
                if m is None:
                    continue
                written = _mtime(path, directory)
                if written is None:  # a folder Snakemake never stamped: not one of its outputs yet
                    continue
                benchmark = _format(rule.benchmark, m.groupdict())
                receipt = _mtime(benchmark)
                if receipt is not None and written <= receipt:
                    continue
                logged = _mtime(_format(rule.log, m.groupdict())) if rule.log else None
                if logged is not None and (receipt is None or logged > receipt):
                    continue  # its job started since its last receipt and did not end
                found.append((path, benchmark))
    return found


def _aside_folder(results: Path | str) -> Path:
    """A new folder below ``results/.phenoica/set-aside/``, named by the time."""
    return Path(results).resolve() / SET_ASIDE / datetime.datetime.now().strftime("%Y%m%dT%H%M%S%f")


def _move_aside(root: Path, folder: Path, path: str) -> tuple[Path, Path] | None:
    """Move ``path`` (inside the results folder ``root``) to ``folder``, its path inside the
    results folder kept; returns (that path, where it went), or None for a path outside."""
    if not Path(path).resolve().is_relative_to(root):  # not in the results folder: not phenoica's to move
        return None
    rel = Path(path).resolve().relative_to(root)
    target = folder / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, target)
    return rel, target


def set_aside(
    results: Path | str, outputs: Sequence[tuple[str, str]], log: logging.Logger | None = None, move: bool = True
) -> list[str]:
    """Move each output of :func:`untrusted_outputs` below ``results/.phenoica/set-aside/<time>/``
    (its path inside the results folder kept), so that Snakemake rebuilds it (with
    :func:`changed_jobs` given it, the jobs that read it are set aside too, so this run rebuilds
    it wherever it is read); returns the notes, logged as warnings (one per output, naming both
    paths and the benchmark file). Not ``move`` (a dry run, which changes nothing): the notes say
    what a run does, and the files stay."""
    log = log or logging.getLogger("phenoica.results")
    root, folder = Path(results).resolve(), _aside_folder(results)
    notes = []
    for path, benchmark in outputs:
        if not Path(path).resolve().is_relative_to(root):  # not in the results folder: not phenoica's to move
            continue
        rel = Path(path).resolve().relative_to(root)
        done = (
            f"the file was moved to {folder / rel}" if move else "left in place by this dry run; a run moves it aside"
        )
        if move:
            _move_aside(root, folder, path)
        why = "is newer than its job's benchmark file" if Path(benchmark).exists() else "has no benchmark file"
        notes.append(
            f"results folder {results}: {rel} {why} ({benchmark}): phenoica did not write it there, so it is not "
            f"trusted: rebuilt by this run, with the jobs that read it; {done}"
        )
    for note in notes:
        log.warning("%s", note)
    return notes


def param_text(value: Any) -> str | None:
    """A param as Snakemake records it (``persistence``: the ``repr`` of a builtin value, an
    options object included; a pandas object by its hash), or None for one it leaves out."""
    if value is None or isinstance(
        value, (int, float, bool, str, complex, range, list, tuple, dict, set, frozenset, bytes, bytearray)
    ):
        return repr(value)
    pandas = sys.modules.get("pandas")  # imported by the job whose param it is
    if pandas is not None and isinstance(value, (pandas.DataFrame, pandas.Series, pandas.Index)):
        return repr(pandas.util.hash_pandas_object(value).tolist())
    return None


def params_digest(values: Iterable[Any]) -> str:
    """SHA-256 of a job's params as Snakemake compares them (their texts, as a set)."""
    texts = sorted({t for t in map(param_text, values) if t is not None})
    return hashlib.sha256(json.dumps(texts).encode()).hexdigest()


def _inside(results: Path | str, path: Path | str) -> str:
    """``path`` relative to the results folder when inside it, else absolute."""
    root, full = os.path.abspath(results), os.path.abspath(path)
    return full[len(root) + 1 :] if full.startswith(root + os.sep) else full


def stamp_path(results: Path | str, first_output: Path | str) -> Path | None:
    """Where the stamp of the job whose first output is ``first_output`` is kept; None when that
    output is not inside ``results``."""
    rel = _inside(results, first_output)
    return None if os.path.isabs(rel) else Path(os.path.abspath(results), STAMPS, f"{rel}.json")


def write_stamp(job: Any) -> Path | None:
    """Write the stamp of a rule's job (``job``: the ``snakemake`` object of its script: its
    rule, params, inputs, outputs and config's ``results``), atomically: the rule, the digest of
    its params (:func:`params_digest`) and its inputs and outputs (relative to the results folder
    where inside it); returns its path (None when the job's first output is not in the results
    folder)."""
    path = stamp_path(job.config["results"], job.output[0])
    if path is None:
        return None
    stamp = {
        "rule": str(job.rule),
        "params": params_digest(job.params),
        "inputs": [_inside(job.config["results"], f) for f in job.input],
        "outputs": [_inside(job.config["results"], f) for f in job.output],
    }
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf-8")
    return path


def run_job(main: Callable[[], object], log: logging.Logger, job: Any) -> NoReturn:
    """How every rule's script ends: run its ``main`` and leave the process with its exit status
    (:func:`phenoica.utils.end_job`: logs flushed, no interpreter teardown), the job's stamp
    (:func:`write_stamp`) written last when ``main`` returned."""
    end_job(main, log, after=lambda: write_stamp(job))


def read_stamp(path: Path | str) -> dict[str, Any] | None:
    """A stamp, or None when absent or unreadable."""
    try:
        stamp = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def rule_params(values: Sequence[Any]) -> Callable[[Mapping[str, str]], list[Any]]:
    """A rule's params (``rule.params``: values, or functions of the job's wildcards) as a
    function of a job's wildcards; a function that takes anything else raises TypeError."""
    from snakemake.iocontainers import Wildcards

    def evaluate(wildcards: Mapping[str, str]) -> list[Any]:
        w = Wildcards(fromdict=dict(wildcards))
        out = []
        for value in values:
            if callable(value):
                if len(inspect.signature(value).parameters) != 1:
                    raise TypeError("a param function of more than the wildcards")
                value = value(w)
            out.append(value)
        return out

    return evaluate


class JobCheck(NamedTuple):
    """One job whose outputs exist: its rule, stamp path, existing outputs, what its stamp says
    (``same``: this run's params; ``changed``: other params or another rule; ``unstamped``: no
    stamp that describes its outputs) and the inputs its stamp records (relative to the results
    folder where inside it)."""

    rule: str
    stamp: str
    outputs: tuple[str, ...]
    status: str
    inputs: tuple[str, ...] = ()


def _job_status(rule: RuleFiles, wildcards: Mapping[str, str], stamp: Path) -> tuple[str, tuple[str, ...]] | None:
    """What the stamp of ``rule``'s job for ``wildcards`` says (:class:`JobCheck`) and the inputs
    it records, or None when this run's params for it cannot be evaluated (a job of another
    config: a model no longer named)."""
    recorded = read_stamp(stamp)
    logged = _mtime(_format(rule.log, dict(wildcards))) if rule.log else None
    if recorded is None or (logged is not None and logged > (_mtime(str(stamp)) or 0)):
        return "unstamped", ()
    try:
        now = params_digest(rule.params(wildcards)) if rule.params else params_digest([])
    except Exception:  # a job this config does not define
        return None
    same = recorded.get("rule") == rule.name and recorded.get("params") == now
    return ("same" if same else "changed"), tuple(map(str, recorded.get("inputs") or ()))


def check_stamps(results: Path | str, rules: Iterable[RuleFiles]) -> list[JobCheck]:
    """Every job of ``rules`` with an existing output in ``results``, and what its stamp says
    against this run's params (one ``glob`` per output template, one stamp read per job)."""
    checks: dict[str, JobCheck] = {}
    for rule in rules:
        templates = rule.outputs + rule.kept
        first = rule.first or (templates[0] if templates else "")
        for template in templates:
            pattern = _pattern(template)
            for path in sorted(glob.glob(_WILDCARD.sub("*", template))):
                m = pattern.fullmatch(path)
                if m is None or (template in rule.directories and _mtime(path, True) is None):
                    continue
                wildcards = m.groupdict()
                stamp = stamp_path(results, _format(first, wildcards))
                if stamp is None or str(stamp) in checks:
                    continue
                found = _job_status(rule, wildcards, stamp)
                if found is None:
                    continue
                outputs = tuple(p for p in (_format(t, wildcards) for t in templates) if _mtime(p) is not None)
                checks[str(stamp)] = JobCheck(rule.name, str(stamp), outputs, *found)
    return list(checks.values())


def changed_jobs(
    results: Path | str, checks: Sequence[JobCheck], gone: Sequence[str] = ()
) -> list[tuple[JobCheck, str]]:
    """(job, why) of every job to rerun: those whose stamp records other params, and, in turn,
    every stamped job that read one of their outputs, or one of the paths ``gone`` (outputs
    :func:`set_aside` moves), or a file inside one (by the inputs its stamp records), so that the
    whole chain after a changed job or a file set aside is rebuilt by this run (Snakemake
    rebuilds a missing file only where a job that runs reads it). One pass over the recorded
    inputs."""
    root = os.path.abspath(results)
    readers: dict[str, list[JobCheck]] = {}  # a path, or a folder above it -> the jobs that read it
    for check in checks:
        if check.status == "same":
            for i in check.inputs:
                for key in {i, *map(str, Path(i).parents)} - {"."}:
                    readers.setdefault(key, []).append(check)
    out = [
        (c, "was made with other settings than this run's (its job's stamp records other params)")
        for c in checks
        if c.status == "changed"
    ]
    queue = [_inside(root, p) for c, _ in out for p in c.outputs] + [_inside(root, p) for p in gone]
    taken = {id(c) for c, _ in out}
    while queue:
        gone = queue.pop()
        for check in readers.get(gone, ()):
            if id(check) not in taken:
                taken.add(id(check))
                out.append((check, f"reads {gone}, which is rebuilt"))
                queue.extend(_inside(root, p) for p in check.outputs)
    return out


def set_aside_changed(
    results: Path | str, jobs: Sequence[tuple[JobCheck, str]], log: logging.Logger | None = None, move: bool = True
) -> list[str]:
    """Move the outputs of :func:`changed_jobs` below ``results/.phenoica/set-aside/<time>/`` (as
    :func:`set_aside`), so that they and the jobs after them rerun; returns one note per rule
    (its jobs counted, a few outputs named), logged as warnings. Not ``move`` (a dry run, which
    changes nothing): the notes say what a run rebuilds, and the files stay."""
    log = log or logging.getLogger("phenoica.results")
    root, folder = Path(results).resolve(), _aside_folder(results)
    by_rule: dict[str, list[str]] = {}
    reasons: dict[str, str] = {}
    for check, why in jobs:
        for path in check.outputs:
            if not Path(path).resolve().is_relative_to(root):  # not in the results folder: not phenoica's to move
                continue
            if move and os.path.lexists(path):
                _move_aside(root, folder, path)
            by_rule.setdefault(check.rule, []).append(str(Path(path).resolve().relative_to(root)))
        reasons.setdefault(check.rule, why)
    notes = []
    for rule, paths in by_rule.items():
        more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
        done = f"moved to {folder}" if move else "left in place by this dry run; a run moves them aside"
        notes.append(
            f"results folder {results}: {len(paths)} output(s) of rule {rule} ({', '.join(paths[:3])}{more}) are "
            f"rebuilt: {reasons[rule]}; {done}"
        )
    for note in notes:
        log.warning("%s", note)
    return notes
