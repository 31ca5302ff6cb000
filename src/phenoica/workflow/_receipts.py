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
is kept, never deleted). Snakemake then rebuilds it where a job reads it (a target, or the input
of a job that runs), and the jobs after it that were made from phenoica's own file are kept.

Outputs a job checks itself are left to it: the embeddings (``update()`` outputs) record the work
they were made from (:func:`phenoica.embed._jobs.plate_work_key`), and their job redoes a plate
whose file records other work, so a plate finished by a job that was killed is kept.

A replacement with an older modification time (``cp -p`` of an older file) is not told by this
test; the content keys of the user's inputs (:mod:`phenoica.workflow._digests`) rerun what an
input changed.
"""

from __future__ import annotations

import datetime
import glob
import logging
import os
import re
from pathlib import Path
from typing import Iterable, NamedTuple, Sequence

#: Where :func:`set_aside` moves the outputs it does not trust, inside the results folder.
SET_ASIDE = ".phenoica/set-aside"
#: The file Snakemake touches in a ``directory()`` output when its job ends (that output's time).
DIRECTORY_STAMP = ".snakemake_timestamp"

_WILDCARD = re.compile(r"\{\s*(\w+)\s*(?:,((?:[^{}]|\{[^{}]*\})*))?\}")


class RuleFiles(NamedTuple):
    """A rule's output templates, its benchmark and log templates (``{name}`` or
    ``{name,regex}`` wildcards) and which outputs are folders."""

    name: str
    outputs: tuple[str, ...]
    benchmark: str
    directories: frozenset[str] = frozenset()
    log: str = ""


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


def set_aside(results: Path | str, outputs: Sequence[tuple[str, str]], log: logging.Logger | None = None) -> list[str]:
    """Move each output of :func:`untrusted_outputs` below ``results/.phenoica/set-aside/<time>/``
    (its path inside the results folder kept), so that Snakemake rebuilds it where it is read; returns the notes,
    logged as warnings (one per output, naming both paths and the benchmark file)."""
    log = log or logging.getLogger("phenoica.results")
    root = Path(results).resolve()
    folder = root / SET_ASIDE / datetime.datetime.now().strftime("%Y%m%dT%H%M%S%f")
    notes = []
    for path, benchmark in outputs:
        if not Path(path).resolve().is_relative_to(root):  # not in the results folder: not phenoica's to move
            continue
        rel = Path(path).resolve().relative_to(root)
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        why = "is newer than its job's benchmark file" if Path(benchmark).exists() else "has no benchmark file"
        notes.append(
            f"results folder {results}: {rel} {why} ({benchmark}): phenoica did not write it there, so it is not "
            f"trusted (rebuilt when a job reads it); the file was moved to {target}"
        )
    for note in notes:
        log.warning("%s", note)
    return notes
