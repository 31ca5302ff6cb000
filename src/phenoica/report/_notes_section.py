"""The report's "Notes on this run" section: the run's notes
(:func:`phenoica.report._run_notes.run_notes`) listed as they were written (plain text, escaped),
and in ``notes.csv``."""

from __future__ import annotations

from phenoica.report import _render as render
from phenoica.report._inputs import ReportInputs
from phenoica.report._sections import ReportContext, Section, SectionOutput


def build_notes(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """The notes as a list (none: no section)."""
    notes = inputs.table("notes")
    if notes is None:
        return SectionOutput()
    lead = (
        "What the check of the screen before any job noted, and the component-sweep points that were skipped; "
        f"also in `{ctx.rel(ctx.table_path('notes'))}`."
    )
    items = [render.md_text(f"{s}: {n}") for s, n in notes.itertuples(index=False)]
    return SectionOutput(
        {"notes": notes}, page=[render.PageSection("Notes on this run", [lead, render.Bullets(items)])]
    )


NOTES = Section("notes", ("notes",), build_notes)
