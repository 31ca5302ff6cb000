"""Rule embed: stream one plate's tiles through the encoder into its embeddings parquet."""
from phenoica.embed import embed_plate, model_identity
from phenoica.io import get_logger
from phenoica.mae import build_feature_extractor
from phenoica.screen import open_plate

log = get_logger("phenoica.embed", snakemake.log[0])
spec, cfg = snakemake.params.spec, snakemake.params.embed
in_chans = open_plate(snakemake.input.store).shape[1]
model = build_feature_extractor(spec, in_chans, snakemake.input.checkpoint)
embed_plate(
    snakemake.input.store,
    snakemake.input.metadata,
    model,
    snakemake.output[0],
    crop_size=cfg["crop_size"] or spec["img_size"],
    intensity_max=cfg["intensity_max"],
    batch_size=cfg["batch_size"],
    chunk_images=cfg["chunk_images"],
    device=cfg["device"],
    threads=cfg["threads"] or snakemake.threads,
    log=log,
    identity=model_identity(snakemake.input.checkpoint, spec),
)
