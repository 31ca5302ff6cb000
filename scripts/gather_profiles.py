"""Rule gather_profiles: per-plate embeddings -> one profile table (image or well level), streamed."""
from phenoica.io import get_logger
from phenoica.profiles import DEFAULT_BATCH_ROWS, write_profiles

log = get_logger("phenoica.gather_profiles", snakemake.log[0])
batch_rows = snakemake.config.get("profiles", {}).get("batch_rows", DEFAULT_BATCH_ROWS)
rows = write_profiles(list(snakemake.input), snakemake.output[0], snakemake.params.level,
                      snakemake.params.embedding_column, batch_rows)
log.info("%d profiles (%s level) from %d files", rows, snakemake.params.level, len(snakemake.input))
