"""Names a user supplies (genes, guides, plates, batches, wells, PertTypes, channels) as text.

A name travels into file names, log lines, tables, pages and figures. Two kinds of name break
that, whatever else the screen holds, and are refused at the door:

- a name holding a control character (NUL, a line break, a tab), a bidirectional override or
  isolate (U+202A..U+202E, U+2066..U+2069: ``RTL\\u202Egnp.exe`` reads ``RTLexe.png``) or another
  invisible format character (Unicode categories Cc, Cf, Zl, Zp);
- a name longer than :data:`MAX_NAME_LENGTH` characters (file systems hold 255 bytes a name).

A name a spreadsheet would read as a formula (``=HYPERLINK(...)``, ``+cmd|...``) is legal and
noted at the door (:func:`formula_name_notes`): the CSV tables write it as text
(:func:`phenoica.utils.write_csv`).
"""

from __future__ import annotations

import unicodedata
from typing import Any, Iterable, Sequence

import pandas as pd

from phenoica.utils import FORMULA_STARTS, INVISIBLE_CATEGORIES, TEXT_MARK, is_formula_like

#: The longest name (characters) of a gene, guide, plate, batch, well, PertType or channel.
MAX_NAME_LENGTH = 200
#: Rows named per column and kind of problem.
EXAMPLES = 5


def name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be shown as the text it is, or None when it can: it holds a control
    or format character (named by code point), or it is longer than :data:`MAX_NAME_LENGTH`."""
    text = str(name)
    bad = sorted({f"U+{ord(ch):04X}" for ch in text if unicodedata.category(ch) in INVISIBLE_CATEGORIES})
    if bad:
        return f"holds control or format character(s) {', '.join(bad)}"
    if len(text) > MAX_NAME_LENGTH:
        return f"is {len(text)} characters long"
    return None


#: What a name must be, said once per message.
RULE = (
    f"a name is plain text: no control or format characters (NUL, line breaks, tabs, bidi overrides, zero-width "
    f"characters) and at most {MAX_NAME_LENGTH} characters"
)


def row_name(label: Any) -> str:
    """A row label in a message: ``row 3`` (a file's 0-based data row), or the label itself
    when it names its file already (``B0.parquet row 3``, a screen read from several files)."""
    return label if isinstance(label, str) else f"row {label}"


def _shown(name: str) -> str:
    return repr(name if len(name) <= 40 else name[:40] + "...")


def name_problems(df: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """One problem per column of ``columns`` (those present) whose names :func:`name_problem`
    refuses: the column, how many rows, and the first :data:`EXAMPLES` rows (the table's index
    labels) with their names and why."""
    problems = []
    for col in columns:
        if col not in df.columns:  # an absent column is the column check's to name
            continue
        values = df[col]
        text = values[values.notna()].astype(str)
        if text.empty:
            continue
        why = {name: name_problem(name) for name in pd.unique(text)}
        bad = text[text.map(why).notna()]
        if bad.empty:
            continue
        shown = "; ".join(f"{row_name(label)} {_shown(name)} {why[name]}" for label, name in bad.head(EXAMPLES).items())
        more = f" and {len(bad) - EXAMPLES} more row(s)" if len(bad) > EXAMPLES else ""
        problems.append(f"column {col}: {len(bad)} row(s) hold a name that is not plain text: {shown}{more}; {RULE}")
    return problems


def listed_name_problems(names: Iterable[Any], where: str) -> list[str]:
    """Problems of a list of names (channels) that ``where`` names: each refused name."""
    return [f"{where}: {_shown(str(n))} {why}; {RULE}" for n in names if (why := name_problem(n)) is not None]


def config_name_problems(names: Iterable[Any], key: str) -> list[str]:
    """Problems of the names a config key lists (channels): each refused name with ``key``."""
    return listed_name_problems(names, f"config key {key}")


def formula_name_notes(df: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """One note per column of ``columns`` (those present) holding names a spreadsheet would read
    as a formula (:func:`phenoica.utils.is_formula_like`: starting with ``=``, ``+``, ``-``, ``@``,
    a tab or a carriage return): how many distinct names, the first :data:`EXAMPLES` with a row
    each, and what phenoica does with them (a leading ``'`` in every CSV table it writes)."""
    notes = []
    for col in columns:
        if col not in df.columns:
            continue
        values = df[col]
        text = values[values.notna()].astype(str)
        names = [n for n in pd.unique(text) if is_formula_like(n)]
        if not names:
            continue
        first = {name: text.index[text.eq(name)][0] for name in names[:EXAMPLES]}
        shown = "; ".join(f"{_shown(n)} ({row_name(label)})" for n, label in first.items())
        more = f" and {len(names) - EXAMPLES} more" if len(names) > EXAMPLES else ""
        notes.append(
            f"column {col}: {len(names)} name(s) start with {', '.join(repr(c) for c in FORMULA_STARTS)}, which a "
            f"spreadsheet reads as a formula: {shown}{more}. They are analysed as they are; every CSV table phenoica "
            f"writes shows them with a leading {TEXT_MARK!r} (text, not a formula), the Parquet tables and pages as they are"
        )
    return notes
