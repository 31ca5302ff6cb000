"""Rule apply_transform: a model's profiles through one fitted variant transform, row batch by row batch."""
from phenoica.io import get_logger
from phenoica.variants import apply_transform_file
from phenoica.workflow import speed_settings

log = get_logger("phenoica.apply_transform", snakemake.log[0])
batch_rows = speed_settings(snakemake.config, "transforms")["batch_rows"]
rows = apply_transform_file(snakemake.input.profiles, snakemake.input.transform, snakemake.output[0], batch_rows)
log.info("variant %s: %d rows", snakemake.wildcards.variant, rows)
