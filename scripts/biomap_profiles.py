"""Rule biomap_profiles: guide and gene profiles of one (model, variant)."""

from phenoica.utils.io import log_job_cpu, rule_logger

log = rule_logger("phenoica.biomap_profiles", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.biomap.aggregate import aggregate_profiles
from phenoica.utils.io import write_parquet

options = snakemake.params.options
log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
guides, genes = aggregate_profiles(snakemake.input[0], center_on_controls=options.center_on_controls, log=log)
write_parquet(guides, snakemake.output.guides)
write_parquet(genes, snakemake.output.genes)
log.info("%d guide and %d gene profiles", len(guides), len(genes))
