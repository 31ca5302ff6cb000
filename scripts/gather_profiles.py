"""Rule gather_profiles: per-plate embeddings -> one profile table (image or well level)."""
from phenoica.io import get_logger, write_parquet
from phenoica.profiles import gather_profiles

log = get_logger("phenoica.gather_profiles", snakemake.log[0])
profiles = gather_profiles(list(snakemake.input), snakemake.params.level, snakemake.params.embedding_column)
write_parquet(profiles, snakemake.output[0])
log.info("%d profiles (%s level) from %d files", len(profiles), snakemake.params.level, len(snakemake.input))
