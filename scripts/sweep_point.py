"""Rule sweep_point: one variant of one model refitted at one count of the component sweep's grid and scored."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.sweep_point", snakemake.log[0])  # first: the log holds everything the job prints

import pandas as pd

from phenoica.classify import read_folds
from phenoica.sweep import sweep_point
from phenoica.utils import write_parquet
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    w = snakemake.wildcards
    profiles = pd.read_parquet(snakemake.input.profiles)
    folds = read_folds(snakemake.input.folds, profiles)
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    table, _ = sweep_point(profiles, folds, w.model, w.variant, int(w.point), snakemake.params.options, log=log)
    write_parquet(table, snakemake.output[0])


run_job(main, log, snakemake)
