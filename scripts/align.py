"""Rule align: Table 1 (model-to-model alignment errors) for every pair of models, each variant
(one variant with frozen transforms)."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.identifiability", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.identifiability import alignment_files
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    models, variants = snakemake.params.model_names, snakemake.params.variants
    paths = iter(snakemake.input)  # variant by variant, the models in order (RuleInputs.align_tables)
    tables = {v: {m: next(paths) for m in models} for v in variants}
    outputs = dict(zip(variants, snakemake.output, strict=True))
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    alignment_files(tables, outputs, snakemake.params.options, log=log)


run_job(main, log, snakemake)
