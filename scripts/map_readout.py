"""Rule map_readout: copairs mean average precision of each guide vs controls."""
import pandas as pd

from phenoica.classify import guide_map
from phenoica.io import get_logger, write_parquet

log = get_logger("phenoica.map_readout", snakemake.log[0])
w = snakemake.wildcards
out = guide_map(pd.read_parquet(snakemake.input[0]), variant=w.variant, model=w.model, seed=snakemake.params.seed)
write_parquet(out, snakemake.output[0])
log.info("mAP for %d guides", len(out))
