"""Rule simulate_plate: one demo plate (tiles, metadata, ground-truth factors)."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.simulate_plate", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.screen.demo import write_demo_plate
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    plate = snakemake.wildcards.plate
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    write_demo_plate(
        snakemake.params.options,
        plate,
        store=snakemake.output.store,
        metadata_path=snakemake.output.metadata,
        factors_path=snakemake.output.factors,
    )
    log.info("simulated plate %s", plate)


run_job(main, log, snakemake)
