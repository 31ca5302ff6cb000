"""Small file utilities every stage uses: atomic writes and per-step logging.

Every output is written to a temporary sibling and renamed into place, so a crash or a kill
never leaves a half-written file that looks finished. A rule's script logs through
:func:`rule_logger`, so its log holds everything the job printed: log lines, Python warnings,
what native libraries write to standard error, and the traceback of a failure; it ends through
:func:`end_job`, which leaves the process with its exit status once the log is flushed, without
the interpreter's teardown (where a native library's thread pool still alive can abort the
process after the job's work is done).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import logging
import os
import resource
import shutil
import sys
import unicodedata
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NoReturn, Sequence

import pandas as pd


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it onto ``path``.

    Works for files and folders (e.g. a Zarr store). On error the temporary is removed and
    ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()


def write_parquet(df: pd.DataFrame, path: Path | str) -> Path:
    """Write ``df`` to ``path`` atomically (no index)."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)
    return Path(path)


def check_same_variants(inputs: Mapping[str, Any], outputs: Mapping[str, Any], kind: str) -> None:
    """A job of several variants (a stage's ``*_files`` function) reads and writes the same
    variants: a ValueError naming both sets when the keys of ``inputs`` (its ``kind``: profiles,
    tables, transforms) and of ``outputs`` differ."""
    if set(inputs) != set(outputs):
        raise ValueError(f"variants of the {kind} {sorted(inputs)} and of the outputs {sorted(outputs)} differ")


def read_parquets(paths: Sequence[Path | str]) -> pd.DataFrame:
    """The parquet files ``paths`` as one table, rows in the order given (a fresh index); an
    empty table (no columns) when ``paths`` is empty."""
    if not paths:
        return pd.DataFrame()
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)


def write_json(value: Any, path: Path | str, indent: int = 2) -> Path:
    """Write ``value`` as JSON (non-JSON values as their ``str``) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(value, indent=indent, default=str) + "\n", encoding="utf-8")
    return Path(path)


#: Text tables :func:`read_table` reads (a ``.gz`` of each is read as it is, decompressed on the fly).
TEXT_SUFFIXES: tuple[str, ...] = (".csv", ".tsv", ".txt", ".csv.gz", ".tsv.gz", ".txt.gz")


def table_suffix(path: Path | str) -> str:
    """A table file's kind by its extension, lower case, with ``.gz`` kept on the kind it
    compresses (``x.CSV.gz`` -> ``.csv.gz``)."""
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        return Path(name[:-3]).suffix + ".gz"
    return Path(name).suffix


def read_table(
    path: Path | str, text_columns: Sequence[str] = (), sep: str | None = None, decimal: str = "."
) -> pd.DataFrame:
    """Read a parquet or CSV table, chosen by extension; a clear error names the file otherwise.

    CSV: UTF-8 text, comma-separated (``.tsv``: tab-separated; either may be gzip-compressed,
    ``.csv.gz``). The columns of
    ``text_columns`` that a CSV has are read as text, so that a plate ``001`` stays ``001``
    (not the number 1). A file that is not UTF-8, written with another separator, a Parquet file
    under a text name, a header naming a column twice, a repeated header line or a last line cut
    mid-write is an error naming the file and what it is
    (:func:`phenoica.utils._text_tables.read_text_table`). A Parquet file naming a column twice
    is refused too. ``sep`` and ``decimal``: a text file's column separator (None: comma, tab for
    ``.tsv``) and decimal mark.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: file not found")
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a folder; expected a .parquet or .csv table file")
    suffix = table_suffix(path)
    if suffix in {".parquet", ".pq"}:
        import pyarrow.parquet as pq

        from phenoica.utils._text_tables import duplicate_header_problem

        problem = duplicate_header_problem(pq.read_schema(path).names, str(path))
        if problem:
            raise ValueError(problem)
        return pd.read_parquet(path)
    if suffix not in TEXT_SUFFIXES:
        raise ValueError(f"{path}: expected a .parquet or .csv table, got {suffix or 'no extension'}")
    from phenoica.utils._text_tables import read_text_table

    sep = sep or ("\t" if suffix.startswith(".tsv") else ",")
    return read_text_table(path, suffix, sep, text_columns, decimal)


#: Unicode categories no name may hold: controls, format characters (bidi overrides, zero-width
#: characters), line and paragraph separators.
INVISIBLE_CATEGORIES: tuple[str, ...] = ("Cc", "Cf", "Zl", "Zp")


#: The most UTF-8 bytes of a name that becomes part of a file name (a model or plate name): a
#: file system holds 255 bytes a file name, and the longest name phenoica makes of one adds 42
#: (``.biomap_heatmap_{model}_pca_rand.png.tmp-XXXXXXXX``, a figure's temporary name).
MAX_PATH_PART_BYTES = 200


def path_part_problem(name: Any) -> str | None:
    """Why ``name`` cannot be one part of a file path (a model, plate, variant or gene name
    that becomes a folder or file name under results/), or None when it can: it must be a
    non-empty string without ``/`` or ``\\``, other than ``.`` and ``..``, without control
    characters and without surrounding whitespace, of at most :data:`MAX_PATH_PART_BYTES`
    bytes in UTF-8."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a string"
    if not name:
        return "is empty"
    if name in (".", ".."):
        return f"is {name!r}, which names a folder, not a file"
    if "/" in name or "\\" in name:
        return "holds a path separator ('/' or '\\')"
    bad = [ch for ch in name if unicodedata.category(ch) in INVISIBLE_CATEGORIES]
    if bad:
        return f"holds the control character(s) {sorted({hex(ord(c)) for c in bad})}"
    if name != name.strip():
        return "has surrounding whitespace"
    size = len(name.encode("utf-8", errors="surrogatepass"))
    if size > MAX_PATH_PART_BYTES:
        return f"is {size} bytes long in UTF-8; expected at most {MAX_PATH_PART_BYTES} (a file name holds 255 bytes)"
    return None


LOG_FORMAT = logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S")

#: The prefix of the lines in which a rule's job logs its CPU seconds (:func:`log_job_cpu`);
#: ``benchmarks/run_cost.py`` reads them.
JOB_CPU = "job cpu"


def process_cpu_seconds() -> float:
    """User + system CPU seconds of this process (all its threads) and of its finished children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def log_job_cpu(log: logging.Logger, point: str) -> None:
    """Log the job's CPU seconds so far at ``point``: a line ``job cpu <point>: <seconds> s``.

    :func:`rule_logger` logs ``start`` (interpreter, Snakemake's script preamble, the first
    imports) and, at the process's exit, ``end``; a script logs ``work`` just before its library
    call, so everything before that line (imports, reading inputs) is the job's cost outside the
    library's work.
    """
    log.info("%s %s: %.3f s", JOB_CPU, point, process_cpu_seconds())


def _log_job_cpu_at_exit(log: logging.Logger) -> None:
    """:func:`log_job_cpu` ``end``, unless a handler's stream is already closed (a process that
    called :func:`rule_logger` in passing, e.g. a test run, closes its streams before exit)."""
    handlers = [h for lg in (log, logging.getLogger()) for h in lg.handlers]
    if any(getattr(getattr(h, "stream", None), "closed", False) for h in handlers):
        return
    log_job_cpu(log, "end")


def rule_logger(name: str, log_file: Path | str) -> logging.Logger:
    """The logger of a rule's script, and everything else the job prints, into the rule's log.

    The process's standard error and standard output (file descriptors 2 and 1: Python's
    ``sys.stderr`` / ``sys.stdout`` and what C/C++ code such as LightGBM, PyTorch or BLAS writes)
    are redirected into ``log_file`` (appended, so a resumed job's log keeps the earlier run);
    Python warnings (``logging.captureWarnings``: ICA non-convergence, undefined metrics, ...)
    and the library's own loggers (``phenoica.*``) are logged there with a timestamp; an uncaught
    exception is logged with its traceback. Call it first in a script, before the imports that
    may warn. Meant for a process that is one job: it changes the process's standard streams.
    The job's CPU seconds are logged at this call and at the process's exit (:func:`log_job_cpu`).
    """
    path = Path(log_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LOG_FORMAT)
    logging.captureWarnings(True)
    for logger_name in (name, "phenoica", "py.warnings"):
        target = logging.getLogger(logger_name)
        target.handlers = [handler]
        target.setLevel(logging.INFO)
        target.propagate = False
    logger = logging.getLogger(name)

    def log_uncaught(exc_type, exc, tb):  # type: ignore[no-untyped-def]
        logger.error("failed: %s", exc, exc_info=(exc_type, exc, tb))

    sys.excepthook = log_uncaught
    log_job_cpu(logger, "start")
    atexit.register(_log_job_cpu_at_exit, logger)
    return logger


def get_logger(name: str, log_file: Path | str | None = None) -> logging.Logger:
    """A logger writing timestamped lines to stderr and, if given, to ``log_file`` (for library
    code and Python use; a rule's script uses :func:`rule_logger`, which also captures warnings
    and the process's standard streams).

    With a ``log_file``, an uncaught exception is also written there with its traceback.
    """
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    fmt = LOG_FORMAT
    if not any(
        isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) is sys.stderr for h in logger.handlers
    ):
        stream = logging.StreamHandler(sys.stderr)
        stream.setFormatter(fmt)
        logger.addHandler(stream)
    if log_file is not None:
        log_file = Path(log_file)
        log_file.parent.mkdir(parents=True, exist_ok=True)
        if not any(
            isinstance(h, logging.FileHandler) and Path(h.baseFilename) == log_file.resolve() for h in logger.handlers
        ):
            fh = logging.FileHandler(log_file)
            fh.setFormatter(fmt)
            logger.addHandler(fh)

        def log_uncaught(exc_type, exc, tb):  # type: ignore[no-untyped-def]
            logger.error("failed: %s", exc, exc_info=(exc_type, exc, tb))

        sys.excepthook = log_uncaught
    log_job_cpu(logger, "start")
    atexit.register(_log_job_cpu_at_exit, logger)
    return logger


def exit_status(code: object) -> int:
    """The exit status Python gives ``sys.exit(code)``: 0 for None, an int as it is, 1 for any
    other value (which Python prints to standard error first, as :func:`end_job` does)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def flush_logs() -> None:
    """Flush every logging handler, Python's standard streams and the C library's (what native
    code such as LightGBM printed): what a job printed reaches its log before ``os._exit``,
    which flushes nothing."""
    for ref in list(logging._handlerList):  # the handlers logging.shutdown flushes
        handler = ref()
        if handler is None:
            continue
        with contextlib.suppress(Exception):
            handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).fflush(None)  # every C stdio stream (exit() would flush them)


def end_job(main: Callable[[], object], log: logging.Logger, after: Callable[[], object] | None = None) -> NoReturn:
    """Run a job's ``main``, then leave the process at once with its exit status: 0 when it
    returns, the code of ``sys.exit(n)`` (``SystemExit``), 1 when it raises (the traceback
    logged), 130 on ``KeyboardInterrupt``. Before leaving, the job's CPU seconds are logged
    (``job cpu end``) and every log handler and standard stream is flushed; ``after`` runs then,
    once ``main`` returned, as the job's last act (a failure there fails the job, logged). Then
    ``os._exit`` ends the process without the interpreter's teardown: no ``atexit`` handler runs,
    and no thread left running (a native thread pool, a non-daemon thread) is joined or torn
    down, so none can abort the process or hold it after its work is done. A job's outputs are
    whole files by then (written through :func:`atomic_path` and closed)."""
    try:
        main()
        status = 0
    except SystemExit as exc:
        status = exit_status(exc.code)
    except KeyboardInterrupt:
        log.error("interrupted")
        status = 130
    except BaseException as exc:  # every failure ends the job with status 1, logged
        log.error("failed: %s", exc, exc_info=True)
        status = 1
    with contextlib.suppress(Exception):
        _log_job_cpu_at_exit(log)
    flush_logs()
    if status == 0 and after is not None:
        try:
            after()
        except BaseException as exc:  # the job fails, logged
            log.error("failed after the job's work: %s", exc, exc_info=True)
            flush_logs()
            status = 1
    os._exit(status)
