"""Rule report: the report's sections (phenoica.report.SECTIONS) over the rule's inputs."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.report", snakemake.log[0])  # first: the log holds everything the job prints

from pathlib import Path

from phenoica.report import read_inputs, write_report
from phenoica.utils import record_written
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    # the folders a rerun replaces whole list the files written there (the door tells them from a user's)
    folders = [snakemake.output[k] for k in ("figures", "tables", "plates", "gallery", "interactive_assets")]
    record_written(*folders, complete=False)

    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    paths = write_report(
        Path(snakemake.output.markdown).parent,
        read_inputs(snakemake.input, snakemake.params),
        snakemake.params.options,
    )
    record_written(*folders)
    log.info("report written: %s", sorted(paths))


run_job(main, log, snakemake)
