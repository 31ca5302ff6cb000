"""The report's two companion pages as one section: the hit gallery
(:mod:`phenoica.report._gallery`) and the interactive results page
(:mod:`phenoica.report._interactive`).

:func:`report_pages` writes both and returns the page sections the report shows for them (a
link to the interactive page, the gallery); a gallery that cannot be drawn because a plate store
moved names the store and the report still builds. :data:`PAGES` is the report's section.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from phenoica.report import _render as render
from phenoica.report._gallery import gallery_section, report_gallery
from phenoica.report._gene_maps import biomap_summary
from phenoica.report._inputs import ReportInputs
from phenoica.report._interactive import ASSETS, PAGE, PageInputs, write_interactive
from phenoica.report._options import ReportOptions
from phenoica.report._sections import ReportContext, Section, SectionOutput

log = logging.getLogger("phenoica.report._pages")


def _biomap_inputs(inputs: ReportInputs) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The gathered map's neighbours and its batch-vs-biology summary (None without a map)."""
    read = inputs.biomap_tables
    if read is None:
        return None, None
    summary = biomap_summary(read["recall"], read["batch_metrics"], read["consistency"], inputs.genes)
    return read["neighbors"], summary


def report_pages(report_dir: Path | str, inputs: ReportInputs, options: ReportOptions) -> list[render.PageSection]:
    """Write ``report_dir/gallery/``, ``report_dir/interactive.html`` and its assets from
    ``inputs`` (``hits``, ``genes``, ``guide_folds``, the biomap tables, ``gallery_embeddings``
    and ``stores``) as ``options`` ask (the gallery, the channels, the q threshold and, with the
    biomap tables, the annotation sources); return the page sections the report shows for them."""
    out = Path(report_dir)
    stores = inputs.stores or {}
    gallery = report_gallery(out / "gallery", inputs.genes, inputs.gallery_embeddings, stores, options)
    for line in gallery.missing_stores:
        log.warning("gallery: %s", line)
    log.info(
        "gallery: %d images read (%.1f MB in %d chunks) from %d plates",
        gallery.stats.images,
        gallery.stats.bytes / 1e6,
        gallery.stats.chunks,
        len(gallery.stats.plates),
    )
    neighbors, summary = _biomap_inputs(inputs)
    annotations: dict[str, pd.DataFrame] = {}
    if inputs.biomap_tables is not None:
        from phenoica.screen import load_sources

        annotations = load_sources(options.annotation_sources)
    page_inputs = PageInputs(
        hits=inputs.hits if inputs.hits is not None else pd.DataFrame(),
        genes=inputs.genes,
        guide_folds=inputs.guide_folds,
        neighbors=neighbors,
        annotations=annotations,
        biomap_summary=summary,
        gallery=gallery.panels[gallery.panels["panel"].fillna("").astype(str) != ""],
        q_threshold=float(options.q_threshold),
    )
    written = write_interactive(out, page_inputs)
    log.info("interactive page: %s (%d asset files)", written["page"], len(written) - 1)
    link = render.PageSection(
        "Interactive results page",
        [
            f"[{PAGE}]({PAGE}): volcano per model/variant (hover, click a gene), gene panels (guides per "
            f"held-out batch, nearest genes, known relationships, gallery), variant comparison, a filterable "
            f"hit table and batch vs biology. One file plus its folder `{ASSETS}/`; it needs no network."
        ],
    )
    return [link, gallery_section(gallery, out, out / "gallery")]


def build_pages(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """The companion pages when the plate stores are given (the report rule gives them, ``{}`` for
    a screen without stores; a report built from tables alone has none: no pages)."""
    if inputs.stores is None:
        return SectionOutput()
    return SectionOutput(page=report_pages(ctx.out_dir, inputs, ctx.options))


PAGES = Section(
    "pages",
    (
        "hits",
        "genes",
        "guide_folds",
        "biomap_tables",
        "gallery_embeddings",
        "stores",
        "annotations",
    ),
    build_pages,
)
