"""Rule bilipschitz_gather: per-model B summaries and cross-seed alignment errors of one dataset."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.bilipschitz_gather", snakemake.log[0])  # first: the log holds everything the job prints

import pandas as pd

from phenoica.studies.bilipschitz import gather_dataset
from phenoica.utils import write_parquet
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    options = snakemake.params.options
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    models, pairs, samples = gather_dataset(
        [pd.read_parquet(p) for p in snakemake.input], options.train_fraction, options.seed
    )
    log.info("%d models, %d seed pairs", len(models), len(pairs))
    write_parquet(models, snakemake.output.models)
    write_parquet(pairs, snakemake.output.pairs)
    write_parquet(samples, snakemake.output.samples)


run_job(main, log, snakemake)
