"""Rule ingest_loaddata: one plate of CellProfiler LoadData CSV(s) -> plate store + metadata."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.ingest_loaddata", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.screen import ingest_loaddata_plate, read_loaddata, read_plate_map
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    options = snakemake.params.options
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    ingest_loaddata_plate(
        read_loaddata(options.loaddata),
        read_plate_map(snakemake.input.plate_map),
        snakemake.wildcards.plate,
        store=snakemake.output.store,
        metadata_out=snakemake.output.metadata,
        options=options,
    )


run_job(main, log, snakemake)
