"""A results folder that is phenoica's alone: its record, its lock, and the files it may replace.

Snakemake removes a ``directory()`` output whole before the job that writes it, and keeps its
record of how each file was made (rule, params, code) and its lock in the *workflow* folder
(``.snakemake/``), not beside the files. So, left alone, a ``results:`` folder that already held
a user's files lost those under the report's folders without a word, and two workflow folders
writing one results folder mixed the files of two configs, each run trusting the other's files
by their modification times. This module makes the results folder say whose it is:

- :func:`check_results_folder` (when the DAG is built, before any job; a dry run too): a folder
  phenoica has no record of must be empty, else it is refused naming a few of its files; and
  every folder that a rerun replaces whole (the report's figures, tables, gallery and
  gene-panel assets, the study pages, the plates' stores) holds only the files phenoica listed
  when it wrote it (:func:`phenoica.utils.record_written`). ``adopt_results: true``
  takes over such a folder instead.
- Every job's stamp in the results folder (:mod:`phenoica.workflow._receipts`: its rule and
  params) is compared with this run's when the DAG is built, so a run from any workflow folder
  (two checkouts sharing one ``results:``, a workflow folder moved, its ``.snakemake/``
  deleted) reruns exactly the jobs whose settings differ and trusts the others. The folder's
  record names the workflow folder that last built it (a token in both records, so the pair
  may be moved or copied together); :func:`check_unstamped` refuses a run from another
  workflow folder over outputs that have no stamp (built before stamps were kept), which only
  the builder's ``.snakemake/`` can judge, unless ``adopt_results: true``. A folder whose record
  is gone (its ``.phenoica/`` deleted, or not copied with it) is no one's: its outputs without a
  stamp are refused the same way, unless the workflow folder of this run records having built it
  (:func:`claimed_by`).
- :func:`lock_results` (when jobs are about to run): one run at a time writes a results folder;
  the lock is an ``flock`` on ``.phenoica/lock`` held by the Snakemake process, so the system
  releases it when that process ends, however it ends; a second run names the holder.
- :func:`record_build`: the config the folder was last built with and the workflow folder it
  was built from (``.phenoica/results.json``); a run with another config logs the keys that
  differ.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import logging
import os
import socket
import sys
import uuid
from pathlib import Path
from typing import IO, Any, Iterable, Mapping, Sequence

from phenoica.contract import canonical
from phenoica.utils import MANIFEST, SNAKEMAKE_FILES, atomic_path, record_written, unlisted_files, walk_files

#: phenoica's own folder inside a results folder (and inside the workflow folder that built it).
RECORD_DIR = ".phenoica"
#: The results folder's record: the token that pairs it with its workflow folder, and its config.
RECORD = f"{RECORD_DIR}/results.json"
#: The lock file of a results folder (an ``flock``; its text names the holder).
LOCK = f"{RECORD_DIR}/lock"
#: The names at the top of a plate store phenoica writes (:func:`phenoica.contract.write_plate`).
STORE_NAMES = frozenset({"zarr.json", "tiles", ".zattrs", ".zgroup", ".zarray", ".zmetadata"})
#: Files named when a folder is refused (then a count).
SHOWN = 5

_held: dict[str, IO[str]] = {}  # results folder -> the open lock file (the lock lives as long as it)


class ResultsFolderError(RuntimeError):
    """A results folder this run may not write: another's files, another workflow's, or in use."""


def _named(paths: Sequence[str], root: Path) -> str:
    """A few of ``paths`` (below ``root``), then how many more."""
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(str(root / p) for p in paths[:SHOWN]) + more


def read_record(results: Path | str) -> dict[str, Any] | None:
    """The results folder's record, or None when it has none (or an unreadable one)."""
    try:
        record = json.loads((Path(results) / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _workflow_tokens(workflow_dir: Path) -> set[str]:
    """The tokens of the results folders built from ``workflow_dir``."""
    folder = workflow_dir / RECORD_DIR / "results"
    return {p.stem for p in folder.glob("*.json")} if folder.is_dir() else set()


def foreign_store_entries(store: Path | str) -> list[str]:
    """The names at the top of a plate store that phenoica does not write there."""
    with os.scandir(store) as entries:
        return sorted(e.name for e in entries if e.name not in STORE_NAMES | SNAKEMAKE_FILES)


def foreign_files(
    results: Path | str, replaced: Iterable[Path | str] = (), stores: Iterable[Path | str] = ()
) -> list[str]:
    """The files of a results folder that phenoica did not write (relative to it): every file of
    a folder without a record (one that holds ``screen/validated.json`` was built before the
    record was kept: none); in a folder with one, the files of the folders ``replaced`` whole
    that their manifests do not list, and the names at the top of the plate ``stores`` that a
    store does not hold."""
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
            found += [str((store / f).relative_to(root)) for f in foreign_store_entries(store)]
    return found


def config_changes(before: Mapping[str, Any], after: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two configs (a section that differs in a key
    is named down to that key)."""
    out = []
    for key in sorted(set(before) | set(after), key=str):
        a, b = before.get(key), after.get(key)
        name = f"{prefix}{key}"
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += config_changes(a, b, name + ".")
        elif canonical(a) != canonical(b):
            out.append(name)
    return out


def claimed_by(workflow_dir: Path | str, results: Path | str) -> bool:
    """Whether ``workflow_dir`` records having built the results folder ``results`` (a token of
    its own naming that folder), whatever the results folder's record says or lacks."""
    folder, root = Path(workflow_dir) / RECORD_DIR / "results", str(Path(results).resolve())
    for path in folder.glob("*.json") if folder.is_dir() else ():
        try:
            if json.loads(path.read_text(encoding="utf-8")).get("results") == root:
                return True
        except (OSError, ValueError, AttributeError):
            continue
    return False


def built_here(record: Mapping[str, Any] | None, workflow_dir: Path | str) -> bool:
    """Whether the results folder (its ``record``) was last built from ``workflow_dir`` (or has
    no record: nothing built there yet)."""
    return record is None or record.get("token") in _workflow_tokens(Path(workflow_dir))


def _builder_notes(root: Path, record: Mapping[str, Any] | None, workflow_dir: Path) -> list[str]:
    """[] when the results folder (its ``record``) was built from ``workflow_dir`` or has no
    record; else a note naming the workflow folder it was built from."""
    if built_here(record, workflow_dir):
        return []
    built = record.get("workflow", "another workflow folder") if record else "another workflow folder"
    return [
        f"results folder {root} was last built from the workflow folder {built}: each job's stamp there is compared "
        "with this run's settings, and the jobs whose settings differ rerun"
    ]


def check_unstamped(
    results: Path | str, workflow_dir: Path | str, checks: Sequence[Any], adopt: bool = False
) -> list[str]:
    """The results folder's outputs without a stamp (``checks``:
    :func:`phenoica.workflow.check_stamps`) may be trusted by this run: it was built
    from ``workflow_dir`` (Snakemake's record there judges them), or ``adopt``. Raises
    :class:`ResultsFolderError` naming a few of them otherwise; returns the note of a folder
    adopted with such outputs."""
    root = Path(results)
    record = read_record(root)
    unstamped = sorted(p for c in checks if c.status == "unstamped" for p in c.outputs)
    if not unstamped or (built_here(record, workflow_dir) if record is not None else claimed_by(workflow_dir, root)):
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
    logging.getLogger("phenoica.results").warning("%s", note)
    return [note]


def check_results_folder(
    results: Path | str,
    workflow_dir: Path | str,
    config: Mapping[str, Any],
    replaced: Iterable[Path | str] = (),
    stores: Iterable[Path | str] = (),
    log: logging.Logger | None = None,
) -> list[str]:
    """The results folder may be written by this run (called when the DAG is built, before any
    job): it holds only files phenoica wrote (:func:`foreign_files`), unless
    ``config["adopt_results"]``. Raises :class:`ResultsFolderError` naming the files; returns
    the notes (keys changed since the folder was built, another workflow folder that built it,
    a folder adopted), logged as warnings."""
    log = log or logging.getLogger("phenoica.results")
    root, workflow_dir = Path(results), Path(workflow_dir)
    adopt = bool(config.get("adopt_results"))
    record = read_record(root)
    notes: list[str] = []
    found = foreign_files(root, replaced, stores)
    if found and not adopt:
        raise ResultsFolderError(
            f"results folder {root} holds {len(found)} file(s) phenoica did not write there: {_named(found, root)}; "
            "a rerun may delete or overwrite files in it. Point results: at a new or empty folder, move those files "
            "out, or set adopt_results: true to let this run write there anyway"
        )
    if found:
        notes.append(
            f"results folder {root}: adopted with {len(found)} file(s) phenoica did not write ({_named(found, root)})"
        )
    notes += _builder_notes(root, record, workflow_dir)
    if record is not None and isinstance(record.get("config"), Mapping):
        changed = config_changes(record["config"], canonical(dict(config)))
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
    """Write the results folder's record (atomically): its token (kept, or new), the workflow
    folder it is built from (which records the token too) and ``config``; called when jobs are
    about to run, after :func:`check_results_folder` passed and with the lock held. A folder
    without a record yet (new, or built before phenoica kept one) has the files of its folders
    ``replaced`` whole listed as they are (the check found them phenoica's)."""
    root, workflow_dir = Path(results), Path(workflow_dir)
    old = read_record(root)
    if old is None:
        record_written(*[f for f in map(Path, replaced) if f.is_dir() and not (f / MANIFEST).exists()])
    old = old or {}
    token = old.get("token") if old.get("token") in _workflow_tokens(workflow_dir) else uuid.uuid4().hex
    record = {
        "written_by": "phenoica",
        "token": token,
        "workflow": str(workflow_dir.resolve()),
        "config": canonical(dict(config)),
        "updated": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    mine = workflow_dir / RECORD_DIR / "results" / f"{token}.json"
    with atomic_path(mine) as tmp:
        tmp.write_text(json.dumps({"results": str(root.resolve())}) + "\n", encoding="utf-8")
    with atomic_path(root / RECORD) as tmp:
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return record


def lock_results(results: Path | str) -> None:
    """Hold the results folder's lock for the life of this process (released by the system when
    it ends, on success, error, SIGKILL or a lost node alike); raise :class:`ResultsFolderError`
    naming the holder (process, host, workflow folder, start) when another run holds it. Taking it
    twice in one process is a no-op."""
    root = Path(results)
    key = str(root.resolve())
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


def replaced_folders(out: Any, plates: Iterable[str], source: str) -> tuple[list[str], list[str]]:
    """(the folders a rerun replaces whole, the plate stores phenoica writes) of a run: the
    report's ``directory()`` outputs, and each plate's store below the results folder (not for
    source ``zarr``, whose stores are the user's). ``out`` is the run's output table
    (:func:`phenoica.contract.output_paths`)."""
    report = out.report
    folders = [report.figures, report.tables, report.gallery, report.interactive_assets]
    stores = [] if source in ("zarr", "embeddings") else [out.screen.store.format(plate=p) for p in plates]
    return folders, stores
