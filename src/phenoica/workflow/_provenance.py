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
its content key (:mod:`phenoica.workflow._digests`, a param). The Snakefile calls
:func:`check_results_folder` (1), :func:`lock_results`, :func:`record_build` (2), :func:`reconcile`.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import glob
import hashlib
import inspect
import json
import logging
import os
import re
import socket
import sys
import uuid
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Mapping, NamedTuple, NoReturn, Sequence

from phenoica.contract import canonical
from phenoica.utils import MANIFEST, SNAKEMAKE_FILES, atomic_path, end_job, record_written, unlisted_files, walk_files

#: phenoica's own folder inside a results folder (and inside the workflow folder that built it).
RECORD_DIR = ".phenoica"
#: The results folder's record: the token that pairs it with its workflow folder, and its config.
RECORD = f"{RECORD_DIR}/results.json"
#: The lock file of a results folder (an ``flock``; its text names the holder).
LOCK = f"{RECORD_DIR}/lock"
#: Where :func:`set_aside` moves the outputs it does not trust, inside the results folder.
SET_ASIDE = f"{RECORD_DIR}/set-aside"
#: Where each job's stamp is kept, inside the results folder (:func:`write_stamp`).
STAMPS = f"{RECORD_DIR}/stamps"
#: The file Snakemake touches in a ``directory()`` output when its job ends (that output's time).
DIRECTORY_STAMP = ".snakemake_timestamp"
#: The names at the top of a plate store phenoica writes (:func:`phenoica.contract.write_plate`).
STORE_NAMES = frozenset({"zarr.json", "tiles", ".zattrs", ".zgroup", ".zarray", ".zmetadata"})
#: Files named when a folder is refused (then a count).
SHOWN = 5

_held: dict[str, IO[str]] = {}  # results folder -> the open lock file (the lock lives as long as it)
_LOG = logging.getLogger("phenoica.results")


class ResultsFolderError(RuntimeError):
    """A results folder this run may not write: another's files, another workflow's, or in use."""


def _named(paths: Sequence[str], root: Path) -> str:
    """A few of ``paths`` (below ``root``), then how many more."""
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(str(root / p) for p in paths[:SHOWN]) + more


def _read_json(path: Path | str) -> dict[str, Any] | None:
    """A JSON object from a file, or None when absent or unreadable."""
    try:
        found = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def read_record(results: Path | str) -> dict[str, Any] | None:
    """The results folder's record, or None when it has none (or an unreadable one)."""
    return _read_json(Path(results) / RECORD)


def _tokens(workflow_dir: Path | str) -> dict[str, dict[str, Any]]:
    """The tokens of the results folders built from ``workflow_dir``, with what each records."""
    return {p.stem: _read_json(p) or {} for p in (Path(workflow_dir) / RECORD_DIR / "results").glob("*.json")}


def built_here(record: Mapping[str, Any] | None, workflow_dir: Path | str) -> bool:
    """Whether the results folder (its ``record``; none: nothing built yet) was built from ``workflow_dir``."""
    return record is None or record.get("token") in _tokens(workflow_dir)


def foreign_files(
    results: Path | str, replaced: Iterable[Path | str] = (), stores: Iterable[Path | str] = ()
) -> list[str]:
    """The files of a results folder phenoica did not write (1), relative to it: all but its record's
    in a folder without one (none when it holds ``screen/validated.json``: built before records were
    kept); else those of the folders ``replaced`` whole not in their manifests, and of the ``stores``."""
    root = Path(results)
    if not root.is_dir():
        return []
    if read_record(root) is None:
        if (root / "screen" / "validated.json").is_file():
            return []
        return [f for f in walk_files(root) if not f.startswith(RECORD_DIR + "/")]
    found = []
    for folder in map(Path, replaced):
        if folder.is_dir():
            found += [str((folder / f).relative_to(root)) for f in unlisted_files(folder)]
    for store in map(Path, stores):
        if store.is_dir():
            with os.scandir(store) as entries:
                names = sorted(e.name for e in entries if e.name not in STORE_NAMES | SNAKEMAKE_FILES)
            found += [str((store / f).relative_to(root)) for f in names]
    return found


def config_changes(before: Mapping[str, Any], after: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two configs, down to the key."""
    out = []
    for key in sorted(set(before) | set(after), key=str):
        a, b = before.get(key), after.get(key)
        name = f"{prefix}{key}"
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += config_changes(a, b, name + ".")
        elif canonical(a) != canonical(b):
            out.append(name)
    return out


def check_results_folder(
    results: Path | str,
    workflow_dir: Path | str,
    config: Mapping[str, Any],
    replaced: Iterable[Path | str] = (),
    stores: Iterable[Path | str] = (),
    log: logging.Logger | None = None,
) -> list[str]:
    """Guarantee 1: raise :class:`ResultsFolderError` naming :func:`foreign_files` unless
    ``adopt_results``; returns the notes (adopted, another builder, another config), logged."""
    log = log or _LOG
    root, workflow_dir = Path(results), Path(workflow_dir)
    record = read_record(root)
    found = foreign_files(root, replaced, stores)
    if found and not config.get("adopt_results"):
        raise ResultsFolderError(
            f"results folder {root} holds {len(found)} file(s) phenoica did not write there: {_named(found, root)}; "
            "a rerun may delete or overwrite files in it. Point results: at a new or empty folder, move those files "
            "out, or set adopt_results: true to let this run write there anyway"
        )
    notes = []
    if found:
        notes.append(
            f"results folder {root}: adopted with {len(found)} file(s) phenoica did not write ({_named(found, root)})"
        )
    if not built_here(record, workflow_dir):
        notes.append(
            f"results folder {root} was last built from the workflow folder "
            f"{(record or {}).get('workflow', 'another workflow folder')}: each job's stamp there is compared "
            "with this run's settings, and the jobs whose settings differ rerun"
        )
    built = record.get("config") if record is not None else None
    changed = config_changes(built, canonical(dict(config))) if isinstance(built, Mapping) else []
    if changed:
        notes.append(
            f"results folder {root} was last built with another config: {len(changed)} key(s) differ "
            f"({', '.join(changed[:8])}{' ...' if len(changed) > 8 else ''}); the jobs that read them rerun"
        )
    for note in notes:
        log.warning("%s", note)
    return notes


def record_build(
    results: Path | str, workflow_dir: Path | str, config: Mapping[str, Any], replaced: Iterable[Path | str] = ()
) -> dict[str, Any]:
    """Write the folder's record and the workflow folder's token for it (2), atomically, the lock held;
    a folder new to records has its folders ``replaced`` whole listed as they are."""
    root, workflow_dir = Path(results), Path(workflow_dir)
    old = read_record(root)
    if old is None:
        record_written(*[f for f in map(Path, replaced) if f.is_dir() and not (f / MANIFEST).exists()])
    old = old or {}
    token = old.get("token") if old.get("token") in _tokens(workflow_dir) else uuid.uuid4().hex
    record = {
        "written_by": "phenoica",
        "token": token,
        "workflow": str(workflow_dir.resolve()),
        "config": canonical(dict(config)),
        "updated": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    with atomic_path(workflow_dir / RECORD_DIR / "results" / f"{token}.json") as tmp:
        tmp.write_text(json.dumps({"results": str(root.resolve())}) + "\n", encoding="utf-8")
    with atomic_path(root / RECORD) as tmp:
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return record


def lock_results(results: Path | str) -> None:
    """Guarantee 2: hold the lock for the life of this process (once), or raise
    :class:`ResultsFolderError` naming the holder (process, host, workflow folder, start)."""
    root, key = Path(results), str(Path(results).resolve())
    if key in _held:
        return
    path = root / LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held open: the lock lives as long as it
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.seek(0)
        holder = handle.read().strip() or "(no holder recorded)"
        handle.close()
        if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            raise ResultsFolderError(f"results folder {root}: cannot lock {path}: {exc}") from None
        raise ResultsFolderError(
            f"results folder {root} is being written by another run ({holder}); one run at a time writes a results "
            f"folder: wait for it to end, or give this run its own results: folder. The lock ({path}) is released "
            "when that process ends, however it ends"
        ) from None
    handle.seek(0)
    handle.truncate()
    started = datetime.datetime.now().isoformat(timespec="seconds")
    handle.write(
        f"pid {os.getpid()} on host {socket.gethostname()}, workflow folder {os.getcwd()}, started {started}: "
        f"{' '.join(sys.argv[:6])}\n"
    )
    handle.flush()
    _held[key] = handle


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


def param_text(value: Any) -> str | None:
    """A param as Snakemake's record serializes it (``repr`` of a builtin value, a pandas object by
    its hash), or None for one it leaves out."""
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
    """Where the stamp of the job of ``first_output`` is kept; None when outside ``results``."""
    rel = _inside(results, first_output)
    return None if os.path.isabs(rel) else Path(os.path.abspath(results), STAMPS, f"{rel}.json")


def write_stamp(job: Any) -> Path | None:
    """Write a job's stamp (4; ``job``: its script's ``snakemake`` object) atomically; returns its
    path, None when the job's first output is outside the results folder."""
    results = job.config["results"]
    path = stamp_path(results, job.output[0])
    if path is None:
        return None
    stamp = {
        "rule": str(job.rule),
        "params": params_digest(job.params),
        "inputs": [_inside(results, f) for f in job.input],
        "outputs": [_inside(results, f) for f in job.output],
    }
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf-8")
    return path


def run_job(main: Callable[[], object], log: logging.Logger, job: Any) -> NoReturn:
    """How every rule's script ends: :func:`phenoica.utils.end_job` of ``main``, the stamp written last."""
    end_job(main, log, after=lambda: write_stamp(job))


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
