"""The report: a list of sections (:data:`SECTIONS`) run in order into one folder.

:func:`write_report` checks the score tables once, runs every section of :data:`SECTIONS` (each
declares the :class:`~phenoica.report.ReportInputs` fields it reads and returns tables,
figures and page sections: :mod:`phenoica.report._sections`), writes each section's tables as CSV
(atomically), and renders one page (``report.md`` + ``index.html``) through
:mod:`phenoica.report._render`: the sections' page parts in order, then the list of files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from phenoica.report import _render as render
from phenoica.report import _score_sections as scores
from phenoica.report._checks import check_genes, check_guides, check_rows
from phenoica.report._gene_maps import GENE_MAPS
from phenoica.report._hygiene_section import HYGIENE
from phenoica.report._inputs import ReportInputs
from phenoica.report._notes_section import NOTES
from phenoica.report._options import ReportOptions
from phenoica.report._pages import PAGES
from phenoica.report._plates_section import PLATES, REFERENCE
from phenoica.report._retrieval_section import RETRIEVAL
from phenoica.report._sections import ReportContext, ReportLayout, Section, SectionOutput
from phenoica.report._sweep_section import SWEEP
from phenoica.utils import write_csv


def build_studies(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """One line per study page that exists: a link to it (relative to the report's folder) and
    its one-line verdict."""
    if not inputs.studies:
        return SectionOutput()
    lines: list[render.Block] = [f"[{s.title}]({ctx.rel(s.page)}): {s.verdict}" for s in inputs.studies]
    return SectionOutput(page=[render.PageSection("Studies", lines)])


STUDIES = Section("studies", ("studies",), build_studies)

#: The report's sections in page order (a section may read the tables of those before it).
SECTIONS: tuple[Section, ...] = (
    scores.HEADLINE,
    NOTES,
    STUDIES,
    PAGES,
    scores.HIT_CALLS,
    scores.VARIANTS,
    RETRIEVAL,
    PLATES,
    REFERENCE,
    HYGIENE,
    scores.TRUTH,
    scores.ACTIVITY,
    GENE_MAPS,
    SWEEP,
    scores.IDENTIFIABILITY,
    scores.COST,
    scores.SKIPS,
    scores.FIGURES,
)


def write_report(
    out_dir: Path | str,
    inputs: ReportInputs,
    options: ReportOptions,
    sections: Sequence[Section] = SECTIONS,
    layout: ReportLayout = ReportLayout(),
) -> dict[str, Path]:
    """Write every file of the report (atomically) into ``out_dir`` and return them by name:
    each section's tables (``{tables_dir}/{name}.csv``) and figures (``{figures_dir}/{name}.png``,
    folders of ``layout``), ``report_md`` and ``index_html``. A section whose inputs are absent
    adds nothing; ``options`` are the report's settings
    (:class:`~phenoica.report.ReportOptions`)."""
    out = Path(out_dir)
    ctx = ReportContext(
        out,
        options,
        rows=check_rows(inputs.guide_folds),
        guides=check_guides(inputs.guides),
        genes=check_genes(inputs.genes),
        layout=layout,
    )
    page = render.Page(layout.title)
    written: dict[str, Path] = {}
    for section in sections:
        result = section.build(inputs, ctx)
        for name, df in result.tables.items():
            written[name] = write_csv(df, ctx.table_path(name))
        ctx.tables.update(result.tables)
        written.update(result.figures)
        page.sections += result.page
    tables = [(p.name, ctx.rel(p)) for p in written.values() if p.suffix == ".csv"]
    page.sections.append(render.PageSection("Files", [render.Links(tables, label="Tables:")]))
    files = render.write_page(page, out)
    written["report_md"], written["index_html"] = files["report.md"], files["index.html"]
    return written
