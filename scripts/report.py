"""Rule report: tables and figures in the paper's shapes, hit calls, calibration."""

from phenoica.io import rule_logger

log = rule_logger("phenoica.report", snakemake.log[0])  # first: the log holds everything the job prints

import json
from pathlib import Path

import pandas as pd

from phenoica.report.write import StudyLink, write_report

inp = snakemake.input
maps = pd.read_parquet(inp.maps)
# --- issue 15 hook: the gene-map sections (phenoica.report.gene_maps), appended to the report
biomap = None
if inp.biomap_tables:
    from phenoica.report.gene_maps import biomap_report_files

    _, biomap_figures, biomap_sections = biomap_report_files(
        Path(snakemake.output.markdown).parent,
        inp.biomap_tables,
        inp.biomap_heatmaps,
        gene_calls=pd.read_parquet(inp.genes),
        map_df=maps if len(maps) else None,
    )
    biomap = (biomap_sections, biomap_figures)
# --- end of the issue 15 hook
# --- issue 21: the component sweep (phenoica.sweep), appended likewise
from phenoica.sweep import sweep_report_files

sweep_sections, sweep_figures = sweep_report_files(Path(snakemake.output.markdown).parent, inp.sweep)
if sweep_sections:
    biomap = ((biomap or ([], {}))[0] + sweep_sections, {**(biomap or ([], {}))[1], **sweep_figures})
# --- issue 25 hook: the hit gallery and the interactive page (phenoica.report.pages)
from phenoica.report.pages import report_pages

scores = {k: pd.read_parquet(inp[k]) for k in ("hits", "genes", "guide_folds")}
par = snakemake.params
pages = report_pages(
    Path(snakemake.output.markdown).parent,
    scores,
    inp.biomap_tables,
    inp.gallery_embeddings,
    par.stores,
    {
        "gallery": par.gallery,
        "channels": par.channels,
        "seed": par.seed,
        "screen": {"source": par.source},
        "biomap": par.annotations if inp.biomap_tables else None,
        "q_threshold": par.q_threshold,
    },
)
# --- end of the issue 25 hook
fit_report = {m: json.loads(Path(p).read_text()) for m, p in zip(snakemake.params.models, inp.fit_reports)}
paths = write_report(
    Path(snakemake.output.markdown).parent,
    scores["guide_folds"],
    pd.read_parquet(inp.guides),
    scores["genes"],
    map_df=maps if len(maps) else None,
    truth=pd.read_parquet(inp.truth[0]) if inp.truth else None,
    fit_report=fit_report,
    table1=pd.read_parquet(inp.table1),
    structural=pd.read_parquet(inp.structural),
    hits=scores["hits"],
    null=pd.read_parquet(inp.null),
    lightgbm=snakemake.params.lightgbm,
    q_threshold=snakemake.params.q_threshold,
    seed=snakemake.params.seed,
    studies=[StudyLink(**page) for page in snakemake.params.studies],
    extra=biomap,  # issue 15 hook
    pages=pages,  # issue 25 hook
)
log.info("report written: %s", sorted(paths))
