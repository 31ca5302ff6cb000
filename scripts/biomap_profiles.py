"""Rule biomap_profiles: guide and gene profiles of each variant of a model (every variant in one
job, or one with frozen transforms)."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.biomap_profiles", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.biomap import profile_files
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    variants, out = snakemake.params.variants, snakemake.output
    profiles = dict(zip(variants, snakemake.input, strict=True))
    outputs = dict(zip(variants, zip(out.guides, out.genes, strict=True), strict=True))
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    profile_files(profiles, outputs, snakemake.params.options.center_on_controls, log=log)


run_job(main, log, snakemake)
