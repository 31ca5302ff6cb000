"""Rule apply_transform: a model's profiles through one fitted variant transform."""
import pandas as pd

from phenoica.io import get_logger, write_parquet
from phenoica.transforms import apply_transform

log = get_logger("phenoica.apply_transform", snakemake.log[0])
out = apply_transform(pd.read_parquet(snakemake.input.profiles), snakemake.input.transform)
write_parquet(out, snakemake.output[0])
log.info("variant %s: %d rows x %d features", snakemake.wildcards.variant, len(out), out.shape[1])
