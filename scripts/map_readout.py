"""Rule map_readout: copairs phenotypic activity (mAP of a guide's wells vs same-plate control
wells) with p- and q-values, per (model, variant)."""

from phenoica.utils.io import log_job_cpu, rule_logger

log = rule_logger("phenoica.map_readout", snakemake.log[0])  # first: the log holds everything the job prints

import pandas as pd

from phenoica.classify.map_readout import guide_map
from phenoica.utils.io import write_parquet

w, options = snakemake.wildcards, snakemake.params.options
log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
out = guide_map(
    pd.read_parquet(snakemake.input[0]),
    variant=w.variant,
    model=w.model,
    seed=options.seed,
    null_size=options.map_null_size,
    log=log,
)
write_parquet(out, snakemake.output[0])
log.info("mAP for %d guides; %d with q < 0.05", len(out), int((out["map_q_value"] < 0.05).sum()))
