"""Rule embed: stream one plate's tiles through the model's encoder into its embeddings parquet."""
from phenoica.embed import embed_model_plate
from phenoica.io import get_logger

log = get_logger("phenoica.embed", snakemake.log[0])
embed_model_plate(
    snakemake.input.store,
    snakemake.input.metadata,
    snakemake.output[0],
    model_name=snakemake.wildcards.model,
    spec=snakemake.params.spec,
    checkpoint=snakemake.input.checkpoint,
    embed=snakemake.params.embed,
    threads=snakemake.threads,
    log=log,
)
