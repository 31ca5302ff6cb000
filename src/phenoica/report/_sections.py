"""The report as a list of sections: what a section is, what it gets and what it returns.

A :class:`Section` declares the fields of :class:`~phenoica.report.ReportInputs` it reads
(``inputs``) and builds, from them and a :class:`ReportContext`, a :class:`SectionOutput`: the
tables it writes (CSV, by name), the figures it drew (PNG, by name) and the page sections it shows
(:class:`phenoica.report.PageSection`). A section whose inputs are absent returns an empty
output. :func:`phenoica.report.write_report` runs the sections in order, writes their
tables, and puts their page sections on the page in the same order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import pandas as pd

from phenoica.report import _render as render
from phenoica.report._inputs import FIELDS, ReportInputs
from phenoica.report._options import ReportOptions


@dataclass
class SectionOutput:
    """A section's result: ``tables`` to write as ``{tables_dir}/{name}.csv``, ``figures`` it
    wrote (name -> PNG path) and the ``page`` sections it shows, in order."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, Path] = field(default_factory=dict)
    page: list[render.PageSection] = field(default_factory=list)


@dataclass(frozen=True)
class ReportLayout:
    """How the report's page is laid out: its title and the folders (under the report's folder)
    of its tables and figures (empty: the report's folder itself)."""

    title: str = "phenoica report"
    tables_dir: str = "tables"
    figures_dir: str = "figures"


@dataclass
class ReportContext:
    """What every section shares: the report's folder and options
    (:class:`~phenoica.report.ReportOptions`), the score tables checked once (``rows``,
    ``guides``, ``genes``: :mod:`phenoica.report._checks`), the tables the sections before it wrote
    (``tables``, by name) and the page's :class:`ReportLayout`."""

    out_dir: Path
    options: ReportOptions
    rows: pd.DataFrame
    guides: pd.DataFrame
    genes: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    layout: ReportLayout = field(default_factory=ReportLayout)

    def table_path(self, name: str) -> Path:
        """Where table ``name`` is written."""
        return self.out_dir / self.layout.tables_dir / f"{name}.csv"

    def figure_path(self, name: str) -> Path:
        """Where figure ``name`` is written."""
        return self.out_dir / self.layout.figures_dir / f"{name}.png"

    def rel(self, path: Path | str) -> str:
        """``path`` relative to the report's folder, as the page links it."""
        return Path(os.path.relpath(Path(path).absolute(), self.out_dir.absolute())).as_posix()


Build = Callable[[ReportInputs, ReportContext], SectionOutput]


@dataclass(frozen=True)
class Section:
    """One part of the report: its ``name``, the :class:`ReportInputs` fields it reads
    (``inputs``) and its ``build``."""

    name: str
    inputs: tuple[str, ...]
    build: Build

    def __post_init__(self) -> None:
        unknown = sorted(set(self.inputs) - FIELDS)
        if unknown:
            raise ValueError(f"report section {self.name!r}: inputs {unknown} are not fields of ReportInputs")


def p_value_formats(df: pd.DataFrame) -> dict[str, str]:
    """Display formats of a report table: p-values (columns ending ``_p`` or ``p_value``) to 2
    significant digits (the other floats are shown to 3 decimals)."""
    return {str(c): "{:.2g}" for c in df.columns if str(c).endswith("_p") or str(c).endswith("p_value")}


def table_section(heading: str, note: str, df: pd.DataFrame, *extra: render.Block) -> render.PageSection:
    """A page section of a note, a table (floats to 3 decimals, p-values to 2 significant
    digits) and any ``extra`` blocks (figures)."""
    table = render.Table(df, float_format="{:.3f}", formats=p_value_formats(df))
    return render.PageSection(heading, ([note] if note else []) + [table, *extra])


def figure_blocks(figures: Mapping[str, Path], captions: Mapping[str, str], ctx: ReportContext) -> list[render.Block]:
    """Figure blocks of ``figures`` (name -> path) with their ``captions``, linked relative to the page."""
    return [render.Figure(ctx.rel(path), captions[name]) for name, path in figures.items()]
