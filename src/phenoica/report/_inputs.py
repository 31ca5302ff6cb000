"""What the report reads, built once: the score tables and the optional stage outputs
(:class:`ReportInputs`, field names are the report rule's input and param names). The report's
settings are :class:`phenoica.report.ReportOptions`.

:func:`read_inputs` builds the inputs from the rule's files; tests build :class:`ReportInputs`
from tables directly. Each section of the report (:mod:`phenoica.report._sections`) declares the
fields it reads.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from phenoica.report._run_notes import run_notes

#: The gathered biomap tables the report reads, by file stem (``results/biomap/{stem}.parquet``).
BIOMAP_TABLES: tuple[str, ...] = ("recall", "coverage", "consistency", "neighbors", "batch_metrics")


@dataclass(frozen=True)
class StudyLink:
    """A study page the report links to: its title, its one-line verdict and where it is."""

    title: str
    verdict: str
    page: str


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report's sections read. ``guide_folds``, ``guides`` and ``genes`` are the
    classification stage's score tables; every other field is optional (None or empty: the
    sections that read it are left out).

    ``maps``: the copairs mAP table; ``hits``: :func:`phenoica.hits._readouts.hit_table`; ``null``: the null
    summary; ``controls``: each control construct's call against the other controls
    (:func:`phenoica.hits.control_calls`); ``truth``: a demo screen's truth; ``fit_reports``: model -> variant -> fit report;
    ``table1`` / ``structural``: the identifiability tables; ``studies``: the study pages to link;
    ``biomap_tables``: the gathered gene-map tables by :data:`BIOMAP_TABLES` stem;
    ``biomap_heatmaps``: (model, variant) -> heatmap PNG; ``sweep``: the component sweep of every
    model; ``gallery_embeddings``: the image embeddings the gallery reads; ``stores``: plate ->
    store (None: no hit gallery and no interactive page; ``{}``: a screen without plate stores);
    ``annotations``: the annotation files the gene maps read (their sources are named by
    :attr:`phenoica.report.ReportOptions.annotation_sources` and loaded with the biomap
    tables); ``profile_hygiene``: model -> the profile hygiene's plan
    (:meth:`phenoica.profiles._hygiene.HygienePlan.as_dict`); ``notes``: the run's notes
    (:func:`phenoica.report._run_notes.run_notes`); ``plate_wells``, ``positions``, ``null_layout``:
    the plate's wells, the position summary and the null's layout (:mod:`phenoica.hits._positions`);
    ``reference``: each construct against its declared reference (:mod:`phenoica.hits._reference`);
    ``retrieval``: each guide's replicate retrieval across batches per (model, variant)
    (:func:`phenoica.classify.guide_retrieval`)."""

    guide_folds: pd.DataFrame
    guides: pd.DataFrame
    genes: pd.DataFrame
    maps: pd.DataFrame | None = None
    hits: pd.DataFrame | None = None
    null: pd.DataFrame | None = None
    controls: pd.DataFrame | None = None
    truth: pd.DataFrame | None = None
    fit_reports: Mapping[str, Any] | None = None
    table1: pd.DataFrame | None = None
    structural: pd.DataFrame | None = None
    studies: Sequence[StudyLink] = ()
    biomap_tables: Mapping[str, pd.DataFrame] | None = None
    biomap_heatmaps: Mapping[tuple[str, str], Path] = field(default_factory=dict)
    sweep: pd.DataFrame | None = None
    gallery_embeddings: Sequence[str] = ()
    stores: Mapping[str, str] | None = None
    annotations: Sequence[str] = ()
    profile_hygiene: Mapping[str, Any] | None = None
    notes: pd.DataFrame | None = None
    plate_wells: pd.DataFrame | None = None
    positions: pd.DataFrame | None = None
    null_layout: pd.DataFrame | None = None
    reference: pd.DataFrame | None = None
    retrieval: pd.DataFrame | None = None

    def present(self, name: str) -> bool:
        """Whether field ``name`` holds something to report (not None, not empty)."""
        value = getattr(self, name)
        return value is not None and (not hasattr(value, "__len__") or len(value) > 0)

    def table(self, name: str) -> pd.DataFrame | None:
        """The table of field ``name`` when it has rows, else None."""
        return getattr(self, name) if self.present(name) else None


FIELDS: frozenset[str] = frozenset(f.name for f in dataclasses.fields(ReportInputs))


def read_biomap(tables: Sequence[Path | str], heatmaps: Sequence[Path | str]) -> tuple[dict, dict]:
    """The gathered biomap tables by stem (each of :data:`BIOMAP_TABLES` is required) and the
    heatmaps ``.../{model}/{variant}/heatmap.png`` by (model, variant)."""
    by_stem = {Path(p).stem: pd.read_parquet(p) for p in tables}
    missing = [s for s in BIOMAP_TABLES if s not in by_stem]
    if missing:
        raise FileNotFoundError(f"biomap report: gathered table(s) {missing} not among the inputs {list(tables)}")
    maps = {(Path(p).parent.parent.name, Path(p).parent.name): Path(p) for p in heatmaps}
    return by_stem, maps


def read_inputs(inp: Any, params: Any) -> ReportInputs:
    """The report's inputs from the report rule's ``snakemake.input`` and its ``snakemake.params``
    (the models, the study pages, the stores, the door's notes and the sweep's logs)."""
    biomap, heatmaps = read_biomap(inp.biomap_tables, inp.biomap_heatmaps) if inp.biomap_tables else (None, {})
    sweep = [pd.read_parquet(p) for p in inp.sweep]
    return ReportInputs(
        guide_folds=pd.read_parquet(inp.guide_folds),
        guides=pd.read_parquet(inp.guides),
        genes=pd.read_parquet(inp.genes),
        maps=pd.read_parquet(inp.maps),
        hits=pd.read_parquet(inp.hits),
        null=pd.read_parquet(inp.null),
        controls=pd.read_parquet(inp.controls),
        truth=pd.read_parquet(inp.truth[0]) if inp.truth else None,
        fit_reports={m: json.loads(Path(p).read_text()) for m, p in zip(params.model_names, inp.fit_reports)},
        table1=pd.read_parquet(inp.table1),
        structural=pd.read_parquet(inp.structural),
        studies=[StudyLink(**page) for page in params.studies],
        biomap_tables=biomap,
        biomap_heatmaps=heatmaps,
        sweep=pd.concat(sweep, ignore_index=True) if sweep else None,
        gallery_embeddings=list(inp.gallery_embeddings),
        stores=dict(params.stores),
        annotations=list(inp.annotations),
        profile_hygiene={m: json.loads(Path(p).read_text()) for m, p in zip(params.model_names, inp.profile_hygiene)},
        notes=run_notes(params.notes, params.sweep_logs),
        plate_wells=pd.read_parquet(inp.plate_wells),
        positions=pd.read_parquet(inp.positions),
        null_layout=pd.read_parquet(inp.null_layout),
        reference=pd.read_parquet(inp.reference[0]) if inp.reference else None,
        retrieval=pd.read_parquet(inp.retrieval),
    )
