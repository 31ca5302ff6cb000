"""Rule gather_identifiability: Table 1 rows of every variant, factor recovery of every model."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.gather_identifiability", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.utils import read_parquets, write_parquet
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    for name in ("align", "structural"):
        paths = list(getattr(snakemake.input, name))
        table = read_parquets(paths)
        write_parquet(table, getattr(snakemake.output, name))
        log.info("%s: %d rows from %d files", name, len(table), len(paths))


run_job(main, log, snakemake)
