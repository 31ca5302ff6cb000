"""Rule splits: the batch-effect folds (leave one batch out, or in-distribution) of a model's profiles."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.classify._splits", snakemake.log[0])  # first: the log holds everything the job prints

import pandas as pd

from phenoica.classify import folds_table, make_folds
from phenoica.utils import write_parquet
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    profiles = pd.read_parquet(snakemake.input[0])
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    folds = make_folds(profiles, snakemake.params.options)  # leave-one-batch-out draws nothing
    write_parquet(folds_table(profiles, folds), snakemake.output[0])
    for fold in folds:
        log.info("fold %s: %d train rows, %d test rows", fold.name, len(fold.train), len(fold.test))


run_job(main, log, snakemake)
