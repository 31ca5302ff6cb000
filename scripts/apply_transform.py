"""Rule apply_transform: a model's profiles through one fitted variant transform, row batch by row batch."""

from phenoica.utils.io import log_job_cpu, rule_logger

log = rule_logger("phenoica.apply_transform", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.transforms.apply import apply_transform_file

batch_rows = snakemake.params.options.batch_rows
log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
rows = apply_transform_file(snakemake.input.profiles, snakemake.input.transform, snakemake.output[0], batch_rows)
log.info("variant %s: %d rows", snakemake.wildcards.variant, rows)
