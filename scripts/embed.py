"""Rule embed: stream one plate's tiles through the model's encoder into its embeddings parquet."""

from phenoica.io import rule_logger

log = rule_logger("phenoica.embed", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.embed import embed_model_plate
from phenoica.workflow import with_speed_settings

embed_model_plate(
    snakemake.input.store,
    snakemake.input.metadata,
    snakemake.output[0],
    model_name=snakemake.wildcards.model,
    spec=snakemake.params.spec,
    checkpoint=snakemake.input.checkpoint,
    embed=with_speed_settings(snakemake.params.embed, snakemake.config, "embed"),
    threads=snakemake.threads,
    log=log,
)
