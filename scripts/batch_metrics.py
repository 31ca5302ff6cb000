"""Rule batch_metrics: batch-mixing scores of one (model, variant) on well profiles."""

from phenoica.utils.io import rule_logger

log = rule_logger("phenoica.biomap.batch_metrics", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.biomap.batch_metrics import batch_metrics, well_profile_table
from phenoica.utils.io import write_parquet

wells = well_profile_table(snakemake.input[0])
table = batch_metrics(
    wells,
    model=snakemake.wildcards.model,
    variant=snakemake.wildcards.variant,
    seed=snakemake.params.seed,
    n_neighbors=snakemake.params.n_neighbors,
    max_samples=snakemake.params.max_samples,
    log=log,
)
write_parquet(table, snakemake.output[0])
