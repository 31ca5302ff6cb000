"""Rule ingest_images: per-channel image files of one plate -> plate store + metadata."""

from phenoica.io import rule_logger

log = rule_logger("phenoica.ingest_images", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.ingest import ingest_image_plate, read_plate_map
from phenoica.workflow import speed_settings

ingest_image_plate(
    snakemake.params.images_dir,
    snakemake.params.pattern,
    read_plate_map(snakemake.input.plate_map),
    snakemake.wildcards.plate,
    store=snakemake.output.store,
    metadata_out=snakemake.output.metadata,
    channels=snakemake.params.channels,
    chunk_images=speed_settings(snakemake.config, "screen")["chunk_images"],
    log=log,
)
