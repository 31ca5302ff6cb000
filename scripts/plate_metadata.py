"""Rule plate_metadata: one plate's rows of the user's metadata table, checked against its store."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.plate_metadata", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.contract import check_plate_against_metadata, open_plate, read_plate_metadata
from phenoica.utils import write_parquet
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    plate = snakemake.wildcards.plate
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    rows = read_plate_metadata(snakemake.input.table, plate)
    check_plate_against_metadata(open_plate(snakemake.input.store), rows, snakemake.input.store)
    write_parquet(rows, snakemake.output[0])
    log.info("plate %s: %d images", plate, len(rows))


run_job(main, log, snakemake)
