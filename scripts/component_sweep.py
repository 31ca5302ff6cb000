"""Rule component_sweep: one model's screen scored again at a grid of whitened component counts."""

from phenoica.utils.io import log_job_cpu, rule_logger

log = rule_logger("phenoica.component_sweep", snakemake.log[0])  # first: the log holds everything the job prints

import json
from pathlib import Path

import pandas as pd

from phenoica.classify.splits import read_folds
from phenoica.sweep.component_sweep import MainPoint, chosen_count, sweep_model
from phenoica.utils.io import write_parquet

options = snakemake.params.options
profiles = pd.read_parquet(snakemake.input.profiles)
folds = read_folds(snakemake.input.folds, profiles)
chosen = chosen_count(json.loads(Path(snakemake.input.fit_report).read_text()))
# The chosen count is the main run's: its variant tables, classify shards and mAP tables are read.
inputs = snakemake.input
rows = pd.concat([pd.read_parquet(f) for f in inputs.shards], ignore_index=True)
maps = {v: pd.read_parquet(f) for v, f in zip(options.variants, inputs.maps)} if inputs.maps else {}
main = {
    v: MainPoint(pd.read_parquet(f), rows[rows["variant"] == v].reset_index(drop=True), maps.get(v))
    for v, f in zip(options.variants, inputs.variants)
}
log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
table, _ = sweep_model(profiles, folds, snakemake.wildcards.model, chosen, options, log=log, main=main)
write_parquet(table, snakemake.output[0])
log.info("sweep of %s: %d points, %.0f s", snakemake.wildcards.model, len(table), table["seconds"].sum())
