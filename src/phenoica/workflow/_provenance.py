"""What phenoica guarantees of a results folder beyond Snakemake's own rerun triggers.

Snakemake reruns a job for its outputs' times and its record of their params, code, input list
and software stack (its default ``--rerun-triggers``, all left on). That record and its lock are
in the *workflow* folder's ``.snakemake/``; it trusts a file at an output's path that is newer
than its inputs; it removes a ``directory()`` output whole before its job. This module adds:

1. **The results folder is phenoica's alone**: one without phenoica's record
   (``.phenoica/results.json``) must be empty; in one with it, a folder a rerun replaces whole
   holds only the files phenoica listed there, a plate store only a store's names. Else the run
   is refused before any job (a dry run too), naming the files, unless ``adopt_results: true``.
2. **One run at a time writes it**: an ``flock`` on ``.phenoica/lock``, released by the system
   however its process ends; a second run names the holder. The record names the config and the
   workflow folder that built it.
3. **An output phenoica did not write is rebuilt, not trusted**: Snakemake touches a job's
   ``benchmark:`` file (every rule has one) after its outputs, so an output newer than it, or
   without one, is someone else's, unless the job's log is newer (killed: Snakemake redoes it).
   It moves to ``.phenoica/set-aside/<time>/``, never deleted; ``update()`` outputs are their
   own job's to check.
4. **Settings are judged from any workflow folder**: every job ends through :func:`run_job`,
   whose last act is its stamp (``.phenoica/stamps/<first output>.json``: rule, params as
   Snakemake serializes them, inputs); a job whose stamp records other params or another rule
   is set aside, so two workflow folders sharing a results folder, a moved workflow folder or a
   deleted ``.snakemake/`` rerun exactly what changed.
5. **What is set aside is rebuilt wherever it is read**: Snakemake remakes a missing file only
   for a job that runs, so the stamped jobs that read it, and those after them, go with it.
6. **Outputs no record describes are not trusted from elsewhere**: outputs without a stamp are
   left to Snakemake's record in the workflow folder that built the results folder (or records
   having built it, its record gone); from any other the run is refused, naming them, unless
   ``adopt_results: true``.
7. **A dry run moves nothing**; its notes say what a run would set aside.

An output replaced by an older copy (``cp -p``) escapes 3; a user's input changed so is caught by
its content key (:mod:`phenoica.workflow._digests`, a param). Guarantees 1 and 2 are
:mod:`phenoica.workflow._results_folder`'s (the Snakefile calls :func:`check_results_folder`,
:func:`lock_results`, :func:`record_build`), the stamp of 4 is written by
:mod:`phenoica.workflow._stamps`; this module checks 3 to 7 before any job (:func:`reconcile`).
"""

from __future__ import annotations

import datetime
import glob
import inspect
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from phenoica.workflow._results_folder import (
    _LOG,
    RECORD,
    RECORD_DIR,
    ResultsFolderError,
    _named,
    _read_json,
    _tokens,
    built_here,
    lock_results,
    read_record,
)
from phenoica.workflow._stamps import _inside, params_digest, stamp_path

#: Where :func:`set_aside` moves the outputs it does not trust, inside the results folder.
SET_ASIDE = f"{RECORD_DIR}/set-aside"
#: The file Snakemake touches in a ``directory()`` output when its job ends (that output's time).
DIRECTORY_STAMP = ".snakemake_timestamp"


class RuleFiles(NamedTuple):
    """A rule's output, benchmark and log templates, its folder and ``update()`` (``kept``) outputs,
    its first output's template (naming its stamps) and its ``params`` for given wildcards."""

    name: str
    outputs: tuple[str, ...]
    benchmark: str
    directories: frozenset[str] = frozenset()
    log: str = ""
    kept: tuple[str, ...] = ()
    first: str = ""
    params: Callable[[Mapping[str, str]], Sequence[Any]] | None = None


def _existing(rule: RuleFiles, templates: Sequence[str]) -> Iterable[tuple[str, dict[str, str], int]]:
    """(path, wildcards, time) of each existing output of ``rule`` among ``templates`` (a
    folder once Snakemake stamped it), one ``glob`` each, matched as :mod:`snakemake.io` matches."""
    from snakemake.io import WILDCARD_REGEX, regex_from_filepattern

    for template in templates:
        pattern = re.compile(regex_from_filepattern(template))
        for path in sorted(glob.glob(WILDCARD_REGEX.sub("*", template))):
            m = pattern.match(path)
            written = _mtime(path, template in rule.directories) if m else None
            if m is not None and written is not None:
                yield path, m.groupdict(), written


def _format(template: str, wildcards: Mapping[str, str]) -> str:
    from snakemake.io import apply_wildcards

    return apply_wildcards(template, wildcards)


def _mtime(path: str, directory: bool = False) -> int | None:
    """Modification time (ns) of a file, or of a folder output's Snakemake stamp; None when absent."""
    try:
        return os.stat(os.path.join(path, DIRECTORY_STAMP) if directory else path).st_mtime_ns
    except OSError:
        return None


def untrusted_outputs(rules: Iterable[RuleFiles]) -> list[tuple[str, str]]:
    """Guarantee 3: (output, its job's benchmark file) of each output not written by its job."""
    found = []
    for rule in rules:
        for path, wildcards, written in _existing(rule, rule.outputs):
            benchmark = _format(rule.benchmark, wildcards)
            receipt = _mtime(benchmark)
            if receipt is not None and written <= receipt:
                continue
            logged = _mtime(_format(rule.log, wildcards)) if rule.log else None
            if logged is not None and (receipt is None or logged > receipt):
                continue  # its job started since its last receipt and did not end
            found.append((path, benchmark))
    return found


def _mover(results: Path | str, move: bool) -> tuple[Path, Callable[[str], Path | None]]:
    """(a new ``set-aside/<time>`` folder, a function moving a path there (not in a dry run) that
    returns its path in the results folder, None for one outside)."""
    root = Path(results).resolve()
    folder = root / SET_ASIDE / datetime.datetime.now().strftime("%Y%m%dT%H%M%S%f")

    def aside(path: str) -> Path | None:
        if not Path(path).resolve().is_relative_to(root):  # not in the results folder: not phenoica's to move
            return None
        rel = Path(path).resolve().relative_to(root)
        if move and os.path.lexists(path):
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, folder / rel)
        return rel

    return folder, aside


def set_aside(
    results: Path | str, outputs: Sequence[tuple[str, str]], log: logging.Logger | None = None, move: bool = True
) -> list[str]:
    """Set aside :func:`untrusted_outputs` (3, 7); one note per output, logged."""
    folder, aside = _mover(results, move)
    notes = []
    for path, benchmark in outputs:
        rel = aside(path)
        if rel is None:
            continue
        moved = f"the file was moved to {folder / rel}" if move else ""
        done = moved or "left in place by this dry run; a run moves it aside"
        why = "is newer than its job's benchmark file" if Path(benchmark).exists() else "has no benchmark file"
        notes.append(
            f"results folder {results}: {rel} {why} ({benchmark}): phenoica did not write it there, so it is not "
            f"trusted: rebuilt by this run, with the jobs that read it; {done}"
        )
    for note in notes:
        (log or _LOG).warning("%s", note)
    return notes


def _rule_params(values: Sequence[Any]) -> Callable[[Mapping[str, str]], list[Any]]:
    """A rule's params (values, or functions of the wildcards) as a function of a job's wildcards."""
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
    """A job whose outputs exist: its stamp's verdict (``same``, ``changed``, ``unstamped``) and inputs."""

    rule: str
    stamp: str
    outputs: tuple[str, ...]
    status: str
    inputs: tuple[str, ...] = ()


def _job_status(rule: RuleFiles, wildcards: Mapping[str, str], stamp: Path) -> tuple[str, tuple[str, ...]] | None:
    """The verdict and recorded inputs of ``rule``'s job; None when this config cannot evaluate its
    params (a job of another config)."""
    recorded = _read_json(stamp)
    logged = _mtime(_format(rule.log, wildcards)) if rule.log else None
    if recorded is None or (logged is not None and logged > (_mtime(str(stamp)) or 0)):
        return "unstamped", ()
    try:
        now = params_digest(rule.params(wildcards) if rule.params else [])
    except Exception:  # a job this config does not define
        return None
    same = recorded.get("rule") == rule.name and recorded.get("params") == now
    return ("same" if same else "changed"), tuple(map(str, recorded.get("inputs") or ()))


def check_stamps(results: Path | str, rules: Iterable[RuleFiles]) -> list[JobCheck]:
    """Guarantee 4: each job of ``rules`` with an existing output, and its stamp's verdict."""
    checks: dict[str, JobCheck] = {}
    for rule in rules:
        templates = rule.outputs + rule.kept
        first = rule.first or (templates[0] if templates else "")
        for _, wildcards, _ in _existing(rule, templates):
            stamp = stamp_path(results, _format(first, wildcards))
            if stamp is None or str(stamp) in checks:
                continue
            found = _job_status(rule, wildcards, stamp)
            if found is not None:
                outputs = tuple(p for p in (_format(t, wildcards) for t in templates) if _mtime(p) is not None)
                checks[str(stamp)] = JobCheck(rule.name, str(stamp), outputs, *found)
    return list(checks.values())


def changed_jobs(
    results: Path | str, checks: Sequence[JobCheck], gone: Sequence[str] = ()
) -> list[tuple[JobCheck, str]]:
    """Guarantee 5: (job, why) of the jobs whose stamps differ, then of each stamped job that read an
    output of one, a path ``gone`` or a file inside one, in turn."""
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
        path = queue.pop()
        for check in readers.get(path, ()):
            if id(check) not in taken:
                taken.add(id(check))
                out.append((check, f"reads {path}, which is rebuilt"))
                queue.extend(_inside(root, p) for p in check.outputs)
    return out


def set_aside_changed(
    results: Path | str, jobs: Sequence[tuple[JobCheck, str]], log: logging.Logger | None = None, move: bool = True
) -> list[str]:
    """Set aside the outputs of :func:`changed_jobs` (4, 5, 7); one note per rule, logged."""
    folder, aside = _mover(results, move)
    by_rule: dict[str, list[str]] = {}
    reasons: dict[str, str] = {}
    for check, why in jobs:
        for path in check.outputs:
            rel = aside(path)
            if rel is not None:
                by_rule.setdefault(check.rule, []).append(str(rel))
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
        (log or _LOG).warning("%s", note)
    return notes


def check_unstamped(
    results: Path | str, workflow_dir: Path | str, checks: Sequence[Any], adopt: bool = False
) -> list[str]:
    """Guarantee 6: raise :class:`ResultsFolderError` naming outputs without a stamp, unless built
    from ``workflow_dir`` or ``adopt`` (returns the note)."""
    root = Path(results)
    record = read_record(root)
    unstamped = sorted(p for c in checks if c.status == "unstamped" for p in c.outputs)
    claimed = any(mine.get("results") == str(root.resolve()) for mine in _tokens(workflow_dir).values())
    if not unstamped or (built_here(record, workflow_dir) if record is not None else claimed):
        return []
    rel = [os.path.relpath(p, root) for p in unstamped]
    built = (record or {}).get(
        "workflow", "another workflow folder" if record else "an unknown workflow folder (no record)"
    )
    if not adopt and record is None:
        raise ResultsFolderError(
            f"results folder {root} has no record ({RECORD} is missing: its {RECORD_DIR}/ folder was deleted or not "
            f"copied), and {len(rel)} of its output(s) have no stamp of the settings they were made with "
            f"({_named(rel, root)}); no workflow folder records having built it but its own, and {workflow_dir} does "
            "not. Outputs without a record are not trusted: this run cannot tell whether they match its config. Run "
            "from the workflow folder that built it, give this run its own results: folder (or empty this one), or "
            "set adopt_results: true to trust them by their times (a job that reruns stamps its outputs)"
        )
    if not adopt:
        raise ResultsFolderError(
            f"results folder {root} was built from the workflow folder {built}, not from {workflow_dir}, and "
            f"{len(rel)} of its output(s) have no stamp of the settings they were made with ({_named(rel, root)}): "
            "made before phenoica kept stamps, or by a job that did not finish. Snakemake's record of them is in that "
            "folder's .snakemake/, so this run cannot tell whether they match its config. Run from that folder, give "
            "this run its own results: folder, or set adopt_results: true to trust them by their times (a job that "
            "reruns stamps its outputs)"
        )
    note = (
        f"results folder {root}: adopted from the workflow folder {built}; {len(rel)} output(s) without a stamp "
        f"are trusted by their times ({_named(rel, root)})"
    )
    _LOG.warning("%s", note)
    return [note]


def rule_files(rules: Iterable[Any]) -> list[RuleFiles]:
    """The :class:`RuleFiles` of Snakemake's rules that have a benchmark file."""
    from snakemake.io import is_flagged

    return [
        RuleFiles(
            r.name,
            tuple(str(f) for f in r.output if not is_flagged(f, "update")),
            str(r.benchmark),
            frozenset(str(f) for f in r.output if is_flagged(f, "directory")),
            str(r.log[0]) if r.log else "",
            kept=tuple(str(f) for f in r.output if is_flagged(f, "update")),
            first=str(r.output[0]) if r.output else "",
            params=_rule_params(list(r.params)),
        )
        for r in rules
        if r.benchmark
    ]


def reconcile(
    results: Path | str, workflow_dir: Path | str, rules: Iterable[Any], adopt: bool, dryrun: bool
) -> list[str]:
    """Guarantees 3 to 7 over Snakemake's ``rules``, the lock held (else left alone, said on stderr)."""
    try:
        lock_results(results)
    except ResultsFolderError as exc:
        print(f"phenoica: outputs not checked against their jobs' records: {exc}", file=sys.stderr)
        return []
    found = rule_files(rules)
    checks = check_stamps(results, found)
    check_unstamped(results, workflow_dir, checks, adopt)
    untrusted = untrusted_outputs(found)
    notes = set_aside(results, untrusted, move=not dryrun)
    gone = [path for path, _ in untrusted]
    return notes + set_aside_changed(results, changed_jobs(results, checks, gone), move=not dryrun)
