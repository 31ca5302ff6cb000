"""Rule map_readout: copairs phenotypic activity (mAP of a guide's wells vs same-plate control
wells) with p- and q-values, and replicate retrieval across batches, for each variant of a model (every variant in one job, or one with
frozen transforms)."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.map_readout", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.classify import guide_map_files
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    variants = snakemake.params.variants
    profiles = dict(zip(variants, snakemake.input, strict=True))
    outputs = dict(zip(variants, snakemake.output.maps, strict=True))
    retrievals = dict(zip(variants, snakemake.output.retrieval, strict=True))
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    options = snakemake.params.options
    guide_map_files(profiles, outputs, options, model=snakemake.wildcards.model, log=log, retrievals=retrievals)


run_job(main, log, snakemake)
