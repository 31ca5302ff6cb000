"""Rule gather_profiles: per-plate embeddings -> one profile table (image or well level), streamed."""

from phenoica.utils.io import rule_logger

log = rule_logger("phenoica.gather_profiles", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.profiles.columns import FeatureSelection
from phenoica.profiles.gather import write_profiles
from phenoica.workflow.params import speed_settings

batch_rows = speed_settings(snakemake.config, "profiles")["batch_rows"]
features = FeatureSelection.from_config(snakemake.params.features)
rows = write_profiles(
    list(snakemake.input),
    snakemake.output[0],
    snakemake.params.level,
    snakemake.params.embedding_column,
    batch_rows,
    features,
)
log.info("%d profiles (%s level) from %d files", rows, snakemake.params.level, len(snakemake.input))
