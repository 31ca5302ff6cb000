"""Rule ingest_images: per-channel image files of one plate -> plate store + metadata."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.ingest_images", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.screen import ingest_image_plate, read_plate_map
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    ingest_image_plate(
        read_plate_map(snakemake.input.plate_map),
        snakemake.wildcards.plate,
        store=snakemake.output.store,
        metadata_out=snakemake.output.metadata,
        options=snakemake.params.options,
        log=log,
    )


run_job(main, log, snakemake)
