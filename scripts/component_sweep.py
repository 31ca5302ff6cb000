"""Rule component_sweep: one model's sweep table, from its grid points' rows and the chosen count's
point, which is the main run's own."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.component_sweep", snakemake.log[0])  # first: the log holds everything the job prints

import json
from pathlib import Path

import pandas as pd

from phenoica.sweep import MainPoint, chosen_count, chosen_point, gather_sweep
from phenoica.utils import write_parquet
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    options = snakemake.params.options
    inputs = snakemake.input
    model = snakemake.wildcards.model
    chosen = chosen_count(json.loads(Path(inputs.fit_report).read_text()))
    points = [pd.read_parquet(f) for f in inputs.points]
    # The chosen count is the main run's: its variant tables, classify shards, mAP and retrieval tables are read.
    rows = pd.concat([pd.read_parquet(f) for f in inputs.shards], ignore_index=True)
    maps = {v: pd.read_parquet(f) for v, f in zip(options.variants, inputs.maps)} if inputs.maps else {}
    retrievals = {v: pd.read_parquet(f) for v, f in zip(options.variants, inputs.retrievals)}
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    chosen_rows = []
    for variant, path in zip(options.variants, inputs.variants):
        main_point = MainPoint(
            pd.read_parquet(path),
            rows[rows["variant"] == variant].reset_index(drop=True),
            maps.get(variant),
            retrievals.get(variant),
        )
        chosen_rows.append(chosen_point(main_point, model, variant, chosen, options, log=log)[0])
    table = gather_sweep(points + chosen_rows, options.variants)
    write_parquet(table, snakemake.output[0])
    log.info("sweep of %s: %d points, %.0f s", model, len(table), table["seconds"].sum())


run_job(main, log, snakemake)
