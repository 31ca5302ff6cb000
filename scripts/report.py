"""Rule report: the report's sections (phenoica.report.write.SECTIONS) over the rule's inputs."""

from phenoica.utils.io import log_job_cpu, rule_logger

log = rule_logger("phenoica.report", snakemake.log[0])  # first: the log holds everything the job prints

from pathlib import Path

from phenoica.report.inputs import read_inputs
from phenoica.report.write import write_report
from phenoica.utils.written import record_written
from phenoica.workflow.receipts import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.receipts.run_job` ends the process after it."""
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
