"""Rule gather_profiles: per-plate embeddings -> one profile table (image or well level), streamed."""

from phenoica.utils.io import log_job_cpu, rule_logger

log = rule_logger("phenoica.gather_profiles", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.profiles.columns import FeatureSelection
from phenoica.profiles.gather import write_profiles
from phenoica.workflow.params import rule_settings

settings = rule_settings(snakemake.config, "gather_profiles")
level = settings["profiles"]["level"]
log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
rows = write_profiles(
    list(snakemake.input),
    snakemake.output[0],
    level,
    settings["screen"]["embedding_column"],
    settings["profiles"]["batch_rows"],
    FeatureSelection.from_config(settings["screen"]),
)
log.info("%d profiles (%s level) from %d files", rows, level, len(snakemake.input))
