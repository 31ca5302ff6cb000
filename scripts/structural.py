"""Rule structural: how well one (model, variant) recovers the demo's ground-truth factors."""

from phenoica.utils.io import log_job_cpu, rule_logger

log = rule_logger("phenoica.structural", snakemake.log[0])  # first: the log holds everything the job prints

import pandas as pd

from phenoica.identifiability.branch import structural_scores
from phenoica.utils.io import write_parquet

w = snakemake.wildcards
factors = pd.concat([pd.read_parquet(p) for p in snakemake.input.factors], ignore_index=True)
log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
scores = structural_scores(pd.read_parquet(snakemake.input.variant), factors, snakemake.params.options)
write_parquet(pd.DataFrame([{"model": w.model, "variant": w.variant, **scores}]), snakemake.output[0])
log.info("%s/%s: %s", w.model, w.variant, {k: scores[k] for k in ("mcc", "r2_mean", "infom", "infoe", "infoc")})
