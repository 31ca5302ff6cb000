"""The report's two companion pages, from the report rule's files: the hit gallery
(:mod:`phenoica.report.gallery`) and the interactive results page (:mod:`phenoica.report.interactive`).

:func:`report_pages` writes both and returns the report's sections for them (a link to the
interactive page, the gallery); a gallery that cannot be drawn because a plate store moved
names the store and the report still builds.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from phenoica.report import render
from phenoica.report.gallery import gallery_section, report_gallery
from phenoica.report.interactive import ASSETS, PAGE, PageInputs, write_interactive

log = logging.getLogger("phenoica.report.pages")


def _biomap_inputs(files: Sequence[str], genes: pd.DataFrame) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The gathered map's neighbours and its batch-vs-biology summary (None without a map)."""
    by_stem = {Path(f).stem: f for f in files}
    if not {"neighbors", "recall", "batch_metrics", "consistency"} <= set(by_stem):
        return None, None
    from phenoica.report.gene_maps import biomap_summary

    read = {k: pd.read_parquet(by_stem[k]) for k in ("neighbors", "recall", "batch_metrics", "consistency")}
    summary = biomap_summary(read["recall"], read["batch_metrics"], read["consistency"], genes)
    return read["neighbors"], summary


def report_pages(
    report_dir: Path | str,
    scores: Mapping[str, pd.DataFrame],
    biomap_files: Sequence[str],
    gallery_files: Sequence[str],
    stores: Mapping[str, str],
    settings: Mapping[str, Any],
) -> list[render.Section]:
    """Write ``report_dir/gallery/``, ``report_dir/interactive.html`` and its assets; return the
    sections the report shows for them.

    ``scores``: the gathered ``hits``, ``genes`` and ``guide_folds`` tables. ``settings``: the
    config's ``gallery``, ``channels``, ``seed``, ``screen.source``, the annotation keys of
    ``biomap`` and ``q_threshold``."""
    out = Path(report_dir)
    gallery = report_gallery(out / "gallery", scores["genes"], gallery_files, stores, settings)
    for line in gallery.missing_stores:
        log.warning("gallery: %s", line)
    log.info(
        "gallery: %d images read (%.1f MB in %d chunks) from %d plates",
        gallery.stats.images,
        gallery.stats.bytes / 1e6,
        gallery.stats.chunks,
        len(gallery.stats.plates),
    )
    neighbors, summary = _biomap_inputs(biomap_files, scores["genes"])
    annotations: dict[str, pd.DataFrame] = {}
    if settings.get("biomap"):
        from phenoica.biomap.annotations import load_sources

        annotations = load_sources(settings["biomap"])
    inputs = PageInputs(
        hits=scores["hits"],
        genes=scores["genes"],
        guide_folds=scores["guide_folds"],
        neighbors=neighbors,
        annotations=annotations,
        biomap_summary=summary,
        gallery=gallery.panels[gallery.panels["panel"].fillna("").astype(str) != ""],
        q_threshold=float(settings["q_threshold"]),
    )
    written = write_interactive(out, inputs)
    log.info("interactive page: %s (%d asset files)", written["page"], len(written) - 1)
    link = render.Section(
        "Interactive results page",
        [
            f"[{PAGE}]({PAGE}): volcano per model/variant (hover, click a gene), gene panels (guides per "
            f"held-out batch, nearest genes, known relationships, gallery), variant comparison, a filterable "
            f"hit table and batch vs biology. One file plus its folder `{ASSETS}/`; it needs no network."
        ],
    )
    return [link, gallery_section(gallery, out, out / "gallery")]
