"""Rule classify: LightGBM per guide vs controls for one gene shard of one (model, variant)."""
import pandas as pd

from phenoica.classify import classify_shard
from phenoica.io import get_logger, write_parquet
from phenoica.splits import read_folds

log = get_logger("phenoica.classify", snakemake.log[0])
w = snakemake.wildcards
table = pd.read_parquet(snakemake.input.variant)
folds = read_folds(snakemake.input.folds, table)
rows = classify_shard(
    table, int(w.shard), snakemake.params.n_shards, folds, snakemake.params.classify,
    snakemake.params.seed, variant=w.variant, model=w.model, log=log,
)
write_parquet(rows, snakemake.output[0])
