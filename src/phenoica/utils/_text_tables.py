"""A text table (CSV, TSV, each possibly gzip-compressed) read as the file it is, or refused
saying what the file is instead of what pandas met first.

pandas reads what it can and reports a problem where it meets it: a repeated column name becomes
a second column ``name.1``, a last line cut mid-way becomes missing values, a second header
(two files concatenated) becomes a row of text in numeric columns, a Parquet file named ``.csv``
or a file written with ``;`` and decimal commas a tokenizing error about a field count, a
non-UTF-8 byte an offset inside pandas' own buffer. :func:`read_text_table` reads the file's
bytes once, checks them, and parses them:

- a Parquet file under a text name (its first bytes ``PAR1``) is named as such;
- a byte that is not UTF-8 is named by its offset in the (decompressed) file and its line;
- a header that names a column twice is refused, naming the column, its positions and the file;
- another separator (``;``, tab, ``|``) in a one-column header is named, with a decimal comma
  when the rows hold numbers written so, and how to read or re-save the file;
- a data line equal to the header (files concatenated with their headers) is named by line;
- a last line without its line break and with fewer fields than the header (a file cut
  mid-write) is named by line, with the fields it holds.

Line numbers count from 1 at the header line, as an editor shows them.
"""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from pathlib import Path
from typing import Sequence

import pandas as pd

#: Separators a one-column header is searched for, and how a message names each.
SEPARATORS: dict[str, str] = {";": "';'", "\t": "tab", "|": "'|'", ",": "','"}
#: The first bytes of a Parquet file.
PARQUET_MAGIC = b"PAR1"


def _raw(path: Path, suffix: str) -> bytes:
    """The file's bytes (decompressed for ``.gz``); a damaged ``.gz`` is a ValueError naming it."""
    data = path.read_bytes()
    if not suffix.endswith(".gz"):
        return data
    try:
        return gzip.decompress(data)
    except (EOFError, OSError, zlib.error) as exc:  # a truncated or corrupt .gz
        raise ValueError(f"{path}: not a readable {suffix} file ({type(exc).__name__}: {exc})") from None


def _decoded(path: Path, data: bytes) -> str:
    """The file's text; a byte that is not UTF-8 is a ValueError naming its offset and line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        line = data.count(b"\n", 0, start) + 1
        raise ValueError(
            f"{path}: not UTF-8 text (byte {data[start]:#04x} at byte offset {start:,}, line {line}, counted from 1 at "
            "the header); expected a UTF-8 CSV: re-save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from None


def _head(text: str, n: int) -> list[str]:
    """The file's first ``n`` physical lines (without their line breaks)."""
    return text[: 1 << 20].splitlines()[:n]


def duplicate_header_problem(header: Sequence[str], source: str) -> str | None:
    """A column named twice or more in ``header``: the names, how often and at which positions
    (1-based), or None."""
    seen: dict[str, list[int]] = {}
    for i, name in enumerate(header, 1):
        seen.setdefault(str(name), []).append(i)
    repeated = {n: pos for n, pos in seen.items() if len(pos) > 1}
    if not repeated:
        return None
    shown = "; ".join(f"{n!r} at columns {pos}" for n, pos in list(repeated.items())[:5])
    more = f" and {len(repeated) - 5} more" if len(repeated) > 5 else ""
    return (
        f"{source}: {len(repeated)} column name(s) appear more than once in the header: {shown}{more} (columns "
        "counted from 1); a repeated name would be read as another column (pandas renames it name.1), or the wrong "
        "copy used: rename or remove the repeats"
    )


def _separator_problem(path: Path, header: str, lines: list[str], sep: str) -> str | None:
    """A one-column header that holds another separator: which, whether the rows write decimals
    with a comma, and how to read the file."""
    found = next((c for c in SEPARATORS if c != sep and c in header), None)
    if found is None:
        return None
    expected = "tab" if sep == "\t" else "comma"
    rows = [line for line in lines[1:6] if line.strip()]
    comma_decimals = found != "," and any(
        part.strip().lstrip("-").replace(",", "", 1).isdigit() and "," in part for r in rows for part in r.split(found)
    )
    decimals = " and decimal commas (1,5 for 1.5)" if comma_decimals else ""
    setting = f"screen.separator: {found!r}" + (", screen.decimal: ','" if decimals else "")
    return (
        f"{path}: the header is one column {header[:80]!r}, which holds {SEPARATORS[found]} characters: the file looks "
        f"{SEPARATORS[found]}-separated{decimals}; expected {expected}-separated columns with decimal points. Set "
        f"{setting} to read it as it is (source embeddings), or re-save it as comma-separated .csv with decimal "
        "points"
    )


def _repeated_header(text: str, first: str) -> list[int]:
    """The lines (from 1) after the first that equal the header line ``first``."""
    found, start = [], len(first)
    while first:
        at = text.find("\n" + first, start)
        if at < 0:
            break
        end = at + 1 + len(first)
        if text[end : end + 1] in ("", "\n") or text[end : end + 2] == "\r\n":
            found.append(text.count("\n", 0, at + 1) + 1)
        start = end
    return found


def _shape_problems(path: Path, text: str, header: list[str], sep: str) -> list[str]:
    """A data line that repeats the header, and a last line cut mid-way (see the module doc)."""
    problems = []
    first = _head(text, 1)[0] if text else ""
    repeated = _repeated_header(text, first)
    if repeated:
        problems.append(
            f"{path}: the header line repeats at line(s) {repeated[:5]}{' ...' if len(repeated) > 5 else ''} (lines "
            "counted from 1 at the header): files concatenated with their headers? Each would be read as a row of "
            "text; keep one header (or give the files as separate files of screen.embeddings)"
        )
    breaks = text.rfind("\n")
    if text and not text.endswith(("\n", "\r")) and breaks >= 0:
        last = next(csv.reader([text[breaks + 1 :]], delimiter=sep), [])
        if len(last) < len(header):
            line = text.count("\n") + 1
            problems.append(
                f"{path}: the last line (line {line}, counted from 1 at the header) holds {len(last)} of the "
                f"header's {len(header)} fields and no line break: the file looks cut mid-write (truncated); export "
                "or copy it again"
            )
    return problems


def read_text_table(
    path: Path | str, suffix: str, sep: str, text_columns: Sequence[str] = (), decimal: str = "."
) -> pd.DataFrame:
    """A CSV / TSV file (``suffix``, ``.gz`` decompressed; columns separated by ``sep``, numbers
    written with ``decimal``) as a table, the columns of ``text_columns`` it has read as text; a
    ValueError naming the file and what it is otherwise (the module doc)."""
    path = Path(path)
    data = _raw(path, suffix)
    if data.startswith(PARQUET_MAGIC):
        raise ValueError(f"{path}: a Parquet file named {suffix} (its first bytes are PAR1): rename it to .parquet")
    text = _decoded(path, data)
    del data
    lines = _head(text, 6)
    header = next(csv.reader(lines[:1], delimiter=sep), []) if lines else []
    if len(header) == 1 and lines:
        problem = _separator_problem(path, lines[0], lines, sep)
        if problem:
            raise ValueError(problem)
    problem = duplicate_header_problem(header, str(path))
    problems = ([problem] if problem else []) + _shape_problems(path, text, header, sep)
    if problems:
        raise ValueError("\n".join(problems))
    try:
        return pd.read_csv(io.StringIO(text), sep=sep, decimal=decimal, dtype={c: str for c in text_columns})
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty (no header line)") from None
    except pd.errors.ParserError as exc:
        raise ValueError(f"{path}: not a readable {suffix} file ({exc})") from None
