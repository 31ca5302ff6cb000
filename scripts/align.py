"""Rule align: Table 1 (model-to-model alignment errors) for every pair of models, one variant."""

from phenoica.utils.io import log_job_cpu, rule_logger

log = rule_logger("phenoica.identifiability", snakemake.log[0])  # first: the log holds everything the job prints

import pandas as pd

from phenoica.identifiability.branch import alignment_for_variant
from phenoica.utils.io import write_parquet

tables = {m: pd.read_parquet(p) for m, p in zip(snakemake.params.model_names, snakemake.input)}
log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
out = alignment_for_variant(tables, snakemake.wildcards.variant, snakemake.params.options, log=log)
write_parquet(out, snakemake.output[0])
