"""Rule apply_transform: a model's profiles through each fitted variant transform (every variant
of the model in one job, or one with frozen transforms), row batch by row batch."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.apply_transform", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.transforms import apply_transform_files
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    variants = snakemake.params.variants
    transforms = dict(zip(variants, snakemake.input.transforms, strict=True))
    outputs = dict(zip(variants, snakemake.output, strict=True))
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    apply_transform_files(snakemake.input.profiles, transforms, outputs, snakemake.params.options.batch_rows, log=log)


run_job(main, log, snakemake)
