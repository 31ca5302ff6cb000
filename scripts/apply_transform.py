"""Rule apply_transform: a model's profiles through one fitted variant transform, row batch by row batch."""
from phenoica.io import get_logger
from phenoica.transforms import TRANSFORM_DEFAULTS, apply_transform_file

log = get_logger("phenoica.apply_transform", snakemake.log[0])
batch_rows = snakemake.config.get("transforms", {}).get("batch_rows", TRANSFORM_DEFAULTS["batch_rows"])
rows = apply_transform_file(snakemake.input.profiles, snakemake.input.transform, snakemake.output[0], batch_rows)
log.info("variant %s: %d rows", snakemake.wildcards.variant, rows)
