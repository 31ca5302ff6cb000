"""Rule classify: LightGBM per guide vs controls for one gene shard of one (model, variant)."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.classify", snakemake.log[0])  # first: the log holds everything the job prints

import pandas as pd

from phenoica.classify import classify_shard, read_folds
from phenoica.utils import write_parquet
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    w = snakemake.wildcards
    table = pd.read_parquet(snakemake.input.variant)
    folds = read_folds(snakemake.input.folds, table)
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    rows = classify_shard(
        table, int(w.shard), folds, snakemake.params.options, variant=w.variant, model=w.model, log=log
    )
    write_parquet(rows, snakemake.output[0])


run_job(main, log, snakemake)
