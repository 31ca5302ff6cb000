"""Rule batch_metrics: batch-mixing scores of each variant of a model on well profiles (every
variant in one job, or one with frozen transforms)."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.biomap._batch_metrics", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.biomap import batch_metrics_files
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    variants = snakemake.params.variants
    profiles = dict(zip(variants, snakemake.input, strict=True))
    outputs = dict(zip(variants, snakemake.output, strict=True))
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    batch_metrics_files(profiles, outputs, snakemake.params.options, model=snakemake.wildcards.model, log=log)


run_job(main, log, snakemake)
