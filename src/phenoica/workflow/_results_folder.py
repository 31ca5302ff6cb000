"""A results folder is phenoica's alone, and one run at a time writes it: guarantees 1 and 2 of
:mod:`phenoica.workflow._provenance` (the folder's record, the files phenoica did not write there,
the lock).
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
