"""Rule batch_metrics: batch-mixing scores of one (model, variant) on well profiles."""

from phenoica.utils.io import log_job_cpu, rule_logger

log = rule_logger("phenoica.biomap.batch_metrics", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.biomap.batch_metrics import batch_metrics, well_profile_table
from phenoica.utils.io import write_parquet
from phenoica.workflow.params import rule_settings

settings = rule_settings(snakemake.config, "batch_metrics")

wells = well_profile_table(snakemake.input[0])
log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
table = batch_metrics(
    wells,
    model=snakemake.wildcards.model,
    variant=snakemake.wildcards.variant,
    seed=settings["seed"],
    n_neighbors=settings["biomap"]["batch_neighbors"],
    max_samples=settings["biomap"]["batch_max_samples"],
    log=log,
)
write_parquet(table, snakemake.output[0])
