"""Rule splits: the batch-effect folds (leave one batch out, or in-distribution) of a model's profiles."""

from phenoica.utils.io import rule_logger

log = rule_logger("phenoica.classify.splits", snakemake.log[0])  # first: the log holds everything the job prints

import pandas as pd

from phenoica.classify.splits import folds_table, make_folds
from phenoica.utils.io import write_parquet

profiles = pd.read_parquet(snakemake.input[0])
folds = make_folds(profiles, snakemake.params.splits, snakemake.params.splits.get("seed", 0))
write_parquet(folds_table(profiles, folds), snakemake.output[0])
for fold in folds:
    log.info("fold %s: %d train rows, %d test rows", fold.name, len(fold.train), len(fold.test))
