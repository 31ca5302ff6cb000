"""Rule fit_transforms: fit every variant's transform once on a model's profiles and save it
(the profile parquet is read in row batches of transforms.batch_rows, two passes)."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.fit_transforms", snakemake.log[0])  # first: the log holds everything the job prints

from pathlib import Path

from phenoica.transforms import fit_transforms
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    fit_transforms(snakemake.input[0], snakemake.params.options, Path(snakemake.output.fit_report).parent, log=log)


run_job(main, log, snakemake)
