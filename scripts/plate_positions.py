"""Rule plate_positions: every well's place and role, the position effect on the control wells per
model, and the null's layout per model."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.plate_positions", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.hits import plate_position_files
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    plate_position_files(
        dict(zip(snakemake.params.model_names, snakemake.input.profiles)),
        {name: snakemake.output[name] for name in ("wells", "positions", "null_layout")},
        snakemake.params.options,
        log=log,
    )


run_job(main, log, snakemake)
