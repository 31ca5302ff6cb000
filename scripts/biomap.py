"""Rule biomap: the gene map of each variant of a model (every variant in one job): neighbours,
consistency, recall, coverage, heatmap."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.biomap", snakemake.log[0])  # first: the log holds everything the job prints

import pandas as pd

from phenoica.biomap import MAP_TABLES, MapFiles, gene_map_files
from phenoica.report import heatmap_figure
from phenoica.screen import load_sources
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    options, inp, out = snakemake.params.options, snakemake.input, snakemake.output
    files = {
        variant: MapFiles(inp.guides[i], inp.genes[i], {name: out[name][i] for name in MAP_TABLES}, out.heatmap[i])
        for i, variant in enumerate(snakemake.params.variants)
    }
    calls = pd.read_parquet(inp.calls)
    truth = pd.read_parquet(inp.truth[0]) if inp.truth else None
    sources = load_sources(options.annotation_sources())
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    gene_map_files(
        files, calls, sources, truth, options, model=snakemake.wildcards.model, heatmap=heatmap_figure, log=log
    )


run_job(main, log, snakemake)
