"""Profile and embedding exports as they arrive: Parquet, CSV, TSV (each possibly ``.gz``) or
AnnData ``.h5ad`` files in the exporter's own column names, read as the data contract's profile
table with a config and no code.

``screen.columns`` maps phenoica's roles (batch, plate, well, site, gene, guide, pert_type) to the
file's own columns; ``screen.controls`` says which rows are controls by one column's values
(every other row with a value there is a perturbation, and each control construct keeps its own
name); ``screen.rows`` keeps the rows whose column holds one of the listed values (one image set of
several, one batch). :class:`ExportSpec` holds the three, :func:`to_contract` applies them to one
file's table, and :func:`parquet_source` is what every reader of the embedding files opens: a
Parquet file in the contract read as it is (streamed), anything else as the Parquet encoding of
its translated table, held in memory. The translation:

- renames the mapped columns to the contract's (a contract column the file also holds under
  its own name would be shadowed: refused, naming both); a column mapped to two roles (gene and
  guide: a gene-level screen, each gene its own guide) fills both, noted;
- keeps the rows ``screen.rows`` selects;
- sets ``Metadata_PertType`` from ``screen.controls`` (a file without a control row is noted: a
  plate may take its controls from its batch's other plates; the door refuses a screen whose
  files hold none);
- strips names of surrounding whitespace (noted when that changes any);
- drops rows without a gene, guide or role, as empty wells are exported (noted: the count and the
  first wells).

The notes are returned beside the table (:func:`export_notes`), for the door's record. The
translated table's index is each row's own number in the file (its 0-based data row, the header
not counted: ``pandas.read_csv(path).iloc[n]`` is row n), which :func:`file_rows` gives every
message that names a row, so a row is named as the file numbers it, whatever ``screen.rows`` and
the empty wells dropped before it.
"""

from __future__ import annotations

import functools
import io
import logging
import os
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from phenoica.contract import (
    BATCH,
    CONTROL,
    GENE,
    GUIDE,
    KEY_COLUMNS,
    PERT_TYPE,
    PERTURBATION,
    PLATE,
    SITE,
    WELL,
    ScreenError,
    check_columns,
)
from phenoica.screen._h5ad import is_h5ad, read_h5ad_profiles
from phenoica.utils import TEXT_SUFFIXES, read_table, table_suffix

log = logging.getLogger(__name__)

#: ``screen.columns``' roles and the contract column each becomes.
ROLES: dict[str, str] = {
    "batch": BATCH,
    "plate": PLATE,
    "well": WELL,
    "site": SITE,
    "gene": GENE,
    "guide": GUIDE,
    "pert_type": PERT_TYPE,
}
#: What a row needs to be a perturbation or a control: rows without one of these are empty wells.
ROW_ROLES: tuple[str, ...] = (GENE, GUIDE, PERT_TYPE)
#: File kinds read as they are, by extension (:func:`phenoica.utils.table_suffix`).
PARQUET_SUFFIXES: tuple[str, ...] = (".parquet", ".pq")
#: Every file kind an embeddings glob may match.
EXPORT_SUFFIXES: tuple[str, ...] = PARQUET_SUFFIXES + TEXT_SUFFIXES + (".h5ad",)
#: Examples named in a note.
EXAMPLES = 5
#: How the note on a file without a control row begins (after the file's name).
NO_CONTROLS = "no row is a control"


class ExportSpec(NamedTuple):
    """How an export's columns and rows become the contract's (``screen.columns``,
    ``screen.controls``, ``screen.rows``) and how its text files are read (``screen.separator``,
    ``screen.decimal``); the empty spec reads files in the contract as they are."""

    columns: tuple[tuple[str, str], ...] = ()  # (contract column, the file's column)
    controls_column: str | None = None
    control_values: tuple[str, ...] = ()
    rows_column: str | None = None
    rows_values: tuple[str, ...] = ()
    separator: str | None = None  # a text file's column separator (None: by its extension)
    decimal: str = "."  # a text file's decimal mark

    @classmethod
    def from_config(cls, screen_config: Mapping[str, Any]) -> "ExportSpec":
        """The spec of a validated config's ``screen`` section."""
        columns = tuple(sorted((ROLES[role], str(col)) for role, col in (screen_config.get("columns") or {}).items()))
        controls = screen_config.get("controls") or {}
        rows = screen_config.get("rows") or {}
        return cls(
            columns,
            controls.get("column"),
            tuple(str(v) for v in controls.get("values", ())),
            rows.get("column"),
            tuple(str(v) for v in rows.get("values", ())),
            screen_config.get("separator"),
            screen_config.get("decimal") or ".",
        )

    @property
    def is_identity(self) -> bool:
        """Whether the spec changes nothing (files are read in the contract as they are; a
        text file's separator and decimal mark change how it is read, not what it holds)."""
        return not self.columns and self.controls_column is None and self.rows_column is None

    def file_columns(self) -> list[str]:
        """The file's columns the spec reads (mapped, controls and rows columns)."""
        named = [col for _, col in self.columns] + [self.controls_column, self.rows_column]
        return list(dict.fromkeys(c for c in named if c is not None))


def is_text(path: Path | str) -> bool:
    """Whether an embeddings file is a CSV / TSV text table (possibly gzip-compressed)."""
    return table_suffix(path) in TEXT_SUFFIXES


def needs_translation(path: Path | str, spec: ExportSpec) -> bool:
    """Whether a file is read through :func:`to_contract` (not streamed as it is): it is not a
    Parquet file, or the spec maps columns, controls or rows."""
    return is_text(path) or is_h5ad(path) or not spec.is_identity


def read_export(path: Path | str, spec: ExportSpec) -> pd.DataFrame:
    """One export file as a table in its own column names: Parquet, CSV / TSV (``.gz`` too;
    identifier columns and the spec's columns read as text, so that a plate ``001`` stays ``001``)
    or ``.h5ad``. A file of another kind, or one that cannot be read, is an error naming it."""
    path = str(path)
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: embedding file not found")
    suffix = table_suffix(path)
    if suffix not in EXPORT_SUFFIXES:
        raise ScreenError(
            f"{path}: expected a Parquet, CSV, TSV (.gz too) or .h5ad file, got {suffix or 'no extension'}"
        )
    if is_h5ad(path):
        try:
            return read_h5ad_profiles(path)
        except ImportError:
            raise ScreenError(f"{path}: reading .h5ad files needs anndata (pip install 'phenoica[scverse]')") from None
        except (OSError, KeyError, ValueError) as exc:  # h5py and anndata's errors for a file that is not AnnData
            raise ScreenError(f"{path}: not a readable .h5ad file ({type(exc).__name__}: {exc})") from None
    try:
        return read_table(
            path, text_columns=list(KEY_COLUMNS) + spec.file_columns(), sep=spec.separator, decimal=spec.decimal
        )
    except (ValueError, OSError, pa.ArrowException) as exc:
        said = str(exc).startswith(path)  # the reader said what the file is
        raise ScreenError(str(exc) if said else f"{path}: not a readable {suffix} file ({exc})") from None


def _text(values: pd.Series) -> pd.Series:
    """Names as text without surrounding whitespace; missing and empty values missing."""
    out = values.where(values.isna(), values.astype(str).str.strip())
    return out.where(out.ne(""), None)


def _wells(df: pd.DataFrame, mask: np.ndarray) -> str:  # rows named by the file's own numbers (the index)
    """The first (plate, well)s of the rows ``mask`` selects, as text (row numbers without a well)."""
    rows = df[mask].head(EXAMPLES)
    if PLATE in df.columns and WELL in df.columns:
        shown = [f"({p}, {w})" for p, w in zip(rows[PLATE], rows[WELL])]
    else:
        shown = [f"row {i}" for i in rows.index]
    return ", ".join(shown) + (" ..." if int(mask.sum()) > EXAMPLES else "")


def to_contract(df: pd.DataFrame, spec: ExportSpec, source: str) -> tuple[pd.DataFrame, list[str]]:
    """One export's table in the data contract, and the notes on what was changed (see the
    module's docstring); its index is each row's 0-based data row in the file. Every refusal names
    ``source``, the column and what was expected."""
    notes: list[str] = []
    present = [str(c) for c in df.columns]
    if df.empty:
        raise ScreenError(
            f"{source}: the file holds a header ({len(present)} columns) and no data rows; expected one row per well "
            "or image: export it again, or leave it out of screen.embeddings"
        )
    check_columns(present, spec.file_columns(), source, "screen.columns / controls / rows name")
    for target, col in spec.columns:
        if target in present and target != col:
            raise ScreenError(
                f"{source}: screen.columns maps {col!r} to {target}, but the file also has a column {target}: "
                f"one of the two would be dropped silently; map {target} to it, or rename one of them"
            )
    if spec.controls_column is not None and PERT_TYPE in present and PERT_TYPE not in dict(spec.columns):
        raise ScreenError(
            f"{source}: screen.controls sets {PERT_TYPE} from column {spec.controls_column!r}, but the file "
            f"already has a {PERT_TYPE} column; leave screen.controls unset to use it, or rename it"
        )
    if spec.rows_column is not None:
        kept = _text(df[spec.rows_column]).isin(spec.rows_values).to_numpy()
        if not kept.any():
            found = sorted(_text(df[spec.rows_column]).dropna().unique().tolist())[: 2 * EXAMPLES]
            raise ScreenError(
                f"{source}: screen.rows keeps rows whose {spec.rows_column!r} is one of {list(spec.rows_values)}; "
                f"none is (the column holds {found})"
            )
        if not kept.all():
            notes.append(
                f"{source}: screen.rows keeps {int(kept.sum())} of {len(df)} rows ({spec.rows_column} in "
                f"{list(spec.rows_values)})"
            )
        df = df[kept]
    control_role = None
    if spec.controls_column is not None:
        values = _text(df[spec.controls_column])
        is_control = values.isin(spec.control_values).to_numpy()
        if not is_control.any():  # a plate without control wells: the door weighs it against the others
            found = sorted(values.dropna().unique().tolist())[: 2 * EXAMPLES]
            notes.append(
                f"{source}: {NO_CONTROLS}: screen.controls marks rows whose {spec.controls_column!r} is one of "
                f"{list(spec.control_values)} as controls, and the column holds {found}"
            )
        control_role = np.where(is_control, CONTROL, PERTURBATION).astype(object)
        control_role[values.isna().to_numpy()] = None
    first = {col: target for target, col in reversed(spec.columns)}  # a column's first role (contract order)
    df = df.rename(columns=first)
    shared = [(target, first[col]) for target, col in spec.columns if first[col] != target]
    if shared:  # one column in two roles (gene and guide: each gene is its own guide)
        df = pd.concat([df, pd.DataFrame({t: df[s] for t, s in shared}, index=df.index)], axis=1)
        pairs = ", ".join(f"{s} and {t} both from {dict(spec.columns)[t]!r}" for t, s in shared)
        own = (
            " (each gene is its own guide: a gene-level screen)"
            if {GENE, GUIDE} <= {x for p in shared for x in p}
            else ""
        )
        notes.append(f"{source}: screen.columns gives one column two roles: {pairs}{own}")
    if control_role is not None:  # one concatenation: a wide export is not copied column by column
        df = pd.concat([df, pd.DataFrame({PERT_TYPE: control_role}, index=df.index)], axis=1)
    for col in KEY_COLUMNS:
        if col not in df.columns:
            continue
        before = df[col]
        after = _text(before)
        changed = before.notna().to_numpy() & (before.astype(str) != after.astype(str)).to_numpy()
        changed &= after.notna().to_numpy()
        if changed.any():
            pairs = pd.DataFrame({"was": before[changed].astype(str), "is": after[changed]}).drop_duplicates()
            shown = ", ".join(f"{w!r} -> {i!r}" for w, i in zip(pairs["was"].head(EXAMPLES), pairs["is"]))
            notes.append(
                f"{source}: {int(changed.sum())} name(s) in {col} lost surrounding whitespace ({len(pairs)} distinct: "
                f"{shown}); they are read as the stripped names"
            )
        df[col] = after
    needed = [c for c in ROW_ROLES if c in df.columns]
    empty = df[needed].isna().any(axis=1).to_numpy() if needed else np.zeros(len(df), bool)
    if empty.any():
        which = {c: int(df[c].isna().sum()) for c in needed if df[c].isna().any()}
        notes.append(
            f"{source}: {int(empty.sum())} row(s) without a gene, guide or role dropped as empty wells "
            f"({', '.join(f'{n} without {c}' for c, n in which.items())}): {_wells(df, empty)}"
        )
        df = df[~empty]
    if df.empty:
        raise ScreenError(f"{source}: no row left with a gene, a guide and a role; expected one row per well or image")
    return df, notes


@functools.lru_cache(maxsize=64)
def _translated(path: str, size: int, mtime_ns: int, spec: ExportSpec) -> tuple[bytes, tuple[str, ...], np.ndarray]:
    """The Parquet encoding of one file's translated table, the notes and each row's number in
    the file; cached by path, size, modification time and spec, since the readers open a file
    several times (footer, metadata, rows)."""
    table, notes = to_contract(read_export(path, spec), spec, path)
    rows = table.index.to_numpy(dtype=np.int64)
    rows.setflags(write=False)
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    log.info(
        "%s: read as a profile table in the data contract (%d rows, %d bytes as parquet)",
        path,
        len(table),
        buffer.tell(),
    )
    return buffer.getvalue(), tuple(notes), rows


def _cached(path: Path | str, spec: ExportSpec) -> tuple[bytes, tuple[str, ...], np.ndarray]:
    st = os.stat(path)
    return _translated(str(path), st.st_size, st.st_mtime_ns, spec)


def parquet_source(path: Path | str, spec: ExportSpec = ExportSpec()) -> Any:
    """What the Parquet readers of the embedding files open: a Parquet file in the contract its
    path, unchanged (streamed); any other file (text, ``.h5ad``, or a spec that maps columns or
    rows) the Parquet encoding of its translated table (:func:`to_contract`) as an in-memory
    ``pyarrow.BufferReader``, so that every check on it is that of a Parquet file in the contract."""
    if not needs_translation(path, spec):
        return path
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: embedding file not found")
    return pa.BufferReader(_cached(path, spec)[0])


def export_notes(paths: Sequence[Path | str], spec: ExportSpec) -> list[str]:
    """What reading ``paths`` through ``spec`` changed (:func:`to_contract`'s notes), in order."""
    notes: list[str] = []
    for path in paths:
        if needs_translation(path, spec):
            notes += list(_cached(path, spec)[1])
    return notes


def file_rows(path: Path | str, spec: ExportSpec = ExportSpec()) -> np.ndarray | None:
    """Each row of what :func:`parquet_source` opens for ``path``, as its 0-based data row in the
    file (the header not counted): the rows ``screen.rows`` keeps and the empty wells dropped
    leave gaps. None for a file read as it is (its rows are its own)."""
    return _cached(path, spec)[2] if needs_translation(path, spec) else None


def row_number(rows: np.ndarray | None, i: int) -> int:
    """The file's own number of row ``i`` of a table read through :func:`parquet_source`
    (``rows``: :func:`file_rows`)."""
    return int(i) if rows is None else int(rows[int(i)])
