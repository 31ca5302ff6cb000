"""The files phenoica wrote into a folder that a rerun replaces whole (a ``directory()`` output:
the report's figures, tables, gallery and gene-panel assets), listed in the folder's
:data:`MANIFEST`, so that the check of the results folder
(:func:`phenoica.workflow.check_results_folder`) tells them from files a user put
there, which Snakemake would delete with the folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

from phenoica.utils._io import atomic_path

#: The list of the files phenoica wrote into a folder that a rerun replaces whole.
MANIFEST = ".phenoica-files.json"
#: Files Snakemake itself writes into a ``directory()`` output.
SNAKEMAKE_FILES = frozenset({".snakemake_timestamp"})


def walk_files(root: Path) -> Iterator[str]:
    """Every file below ``root``, as a path relative to it (sorted, symlinks not followed)."""
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        rel = Path(folder).relative_to(root)
        for name in sorted(files):
            yield str(rel / name) if str(rel) != "." else name


def record_written(*folders: Path | str, complete: bool = True) -> None:
    """List the files of each folder (written by phenoica, which a rerun replaces whole) in its
    :data:`MANIFEST`, so that :func:`phenoica.workflow.check_results_folder` can tell them from files added later.
    A job calls it with ``complete=False`` before it writes (a folder of a job that was killed
    holds phenoica's files, unlisted) and with ``complete=True`` when it has written them all."""
    for folder in map(Path, folders):
        folder.mkdir(parents=True, exist_ok=True)
        files = [f for f in walk_files(folder) if Path(f).name not in (MANIFEST, *SNAKEMAKE_FILES)] if complete else []
        with atomic_path(folder / MANIFEST) as tmp:
            tmp.write_text(json.dumps({"complete": complete, "files": files}, indent=0) + "\n", encoding="utf-8")


def unlisted_files(folder: Path | str) -> list[str]:
    """The files of a folder phenoica replaces whole that its :data:`MANIFEST` does not list,
    relative to the folder: every file when it has no manifest, none while its writer had not
    finished (the manifest says so)."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        listed = set(manifest["files"]) if manifest["complete"] else None
    except (OSError, ValueError, TypeError, KeyError):
        listed = set()
    if listed is None:
        return []
    skip = {MANIFEST, *SNAKEMAKE_FILES}
    return [
        f for f in walk_files(folder) if f not in listed and Path(f).name not in skip and ".tmp-" not in Path(f).name
    ]
