"""Rule batch_metrics: batch-mixing scores of one (model, variant) on well profiles."""

from phenoica.utils.io import log_job_cpu, rule_logger

log = rule_logger("phenoica.biomap.batch_metrics", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.biomap.batch_metrics import batch_metrics, well_profile_table
from phenoica.utils.io import write_parquet

w = snakemake.wildcards
wells = well_profile_table(snakemake.input[0])
log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
table = batch_metrics(wells, snakemake.params.options, model=w.model, variant=w.variant, log=log)
write_parquet(table, snakemake.output[0])
