"""Every job's stamp, its last act (guarantee 4 of :mod:`phenoica.workflow._provenance`): the rule,
its params as Snakemake's record serializes them and its inputs, kept in the results folder so that
settings are judged from any workflow folder. :func:`run_job` is how every rule's script ends.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, NoReturn

from phenoica.utils import atomic_path, end_job
from phenoica.workflow._results_folder import RECORD_DIR

#: Where each job's stamp is kept, inside the results folder (:func:`write_stamp`).
STAMPS = f"{RECORD_DIR}/stamps"


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
