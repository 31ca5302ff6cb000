"""Rule map_readout: copairs mean average precision of each guide vs controls.

The same pseudo-guides as the classifier are drawn first, so mAP uses the same control set and
scores the empirical null beside the real guides.
"""
import pandas as pd

from phenoica.classify import guide_map, null_guides
from phenoica.io import get_logger, write_parquet

log = get_logger("phenoica.map_readout", snakemake.log[0])
w = snakemake.wildcards
table = null_guides(pd.read_parquet(snakemake.input[0]), snakemake.params.n_null_guides, snakemake.params.seed)
out = guide_map(table, variant=w.variant, model=w.model, seed=snakemake.params.seed, log=log)
write_parquet(out, snakemake.output[0])
log.info("mAP for %d guides", len(out))
