"""Rule reference: each construct against its declared reference construct, by both readouts."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.reference", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.hits import reference_files
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    options = snakemake.params.options
    pairs = [(m, v) for m in snakemake.params.model_names for v in snakemake.params.variants]
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    reference_files(
        dict(zip(pairs, snakemake.input.variants)),
        dict(zip(snakemake.params.model_names, snakemake.input.folds)),
        snakemake.output[0],
        options,
        log=log,
    )


run_job(main, log, snakemake)
