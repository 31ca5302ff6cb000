"""Rule biomap: one (model, variant)'s gene map: neighbours, consistency, recall, coverage, heatmap."""

from phenoica.utils.io import log_job_cpu, rule_logger

log = rule_logger("phenoica.biomap", snakemake.log[0])  # first: the log holds everything the job prints

import pandas as pd

from phenoica.biomap.gene_map import MapInputs, gene_map
from phenoica.contract.screen import GENE
from phenoica.report.gene_maps import heatmap_figure
from phenoica.screen.annotations import load_sources
from phenoica.utils.io import write_parquet

options = snakemake.params.options
model, variant = snakemake.wildcards.model, snakemake.wildcards.variant
calls = pd.read_parquet(snakemake.input.calls)
calls = calls[(calls["model"] == model) & (calls["variant"] == variant)]
truth = pd.read_parquet(snakemake.input.truth[0]) if snakemake.input.truth else None
inputs = MapInputs(
    pd.read_parquet(snakemake.input.guides),
    pd.read_parquet(snakemake.input.genes),
    calls,
    load_sources(options.annotation_sources()),
    truth,
)
log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
tables, chosen, q, note = gene_map(inputs, options, model=model, variant=variant, log=log)
for name in ("neighbors", "guide_neighbors", "consistency", "recall", "coverage"):
    write_parquet(tables[name], snakemake.output[name])
features = [c for c in chosen.columns if not str(c).startswith("Metadata_")]
heatmap_figure(
    chosen[features].to_numpy(),
    chosen[GENE].tolist(),
    q,
    snakemake.output.heatmap,
    max_genes=options.heatmap_max_genes,
    title=f"{model} / {variant}\n{note}",
)
