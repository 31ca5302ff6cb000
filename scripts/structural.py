"""Rule structural: how well each variant of a model (one variant with frozen transforms) recovers
the demo's ground-truth factors."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.structural", snakemake.log[0])  # first: the log holds everything the job prints

import pandas as pd

from phenoica.identifiability import structural_files
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    variants = snakemake.params.variants
    tables = dict(zip(variants, snakemake.input.variants, strict=True))
    outputs = dict(zip(variants, snakemake.output, strict=True))
    factors = pd.concat([pd.read_parquet(p) for p in snakemake.input.factors], ignore_index=True)
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    structural_files(tables, factors, outputs, snakemake.params.options, model=snakemake.wildcards.model, log=log)


run_job(main, log, snakemake)
