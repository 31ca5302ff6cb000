"""Rule gather_profiles: per-plate embeddings -> one profile table (image or well level), streamed, with
the profile hygiene applied and its plan written beside it."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.gather_profiles", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.profiles import clean_profiles, write_plan, write_profiles
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    options = snakemake.params.options
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    rows = write_profiles(
        list(snakemake.input),
        snakemake.output.table,
        options.level,
        options.embedding_column,
        options.batch_rows,
        options.selection,
        options.spec,
    )
    write_plan(clean_profiles(snakemake.output.table, options.hygiene, options.batch_rows), snakemake.output.hygiene)
    log.info("%d profiles (%s level) from %d files", rows, options.level, len(snakemake.input))


run_job(main, log, snakemake)
