"""Rule gather_scores: all shards -> guide-fold rows, guide and gene scores with hit calls, the
hit table beside the mAP readout, and the null's calibration summary."""

from phenoica.utils.io import rule_logger

log = rule_logger("phenoica.gather_scores", snakemake.log[0])  # first: the log holds everything the job prints

import pandas as pd

from phenoica.hits.calls import screen_calls
from phenoica.utils.io import write_parquet
from phenoica.workflow.params import rule_settings

hits = rule_settings(snakemake.config, "gather_scores")["classify"]
rows = pd.concat([pd.read_parquet(f) for f in snakemake.input.shards], ignore_index=True)
maps = (
    pd.concat([pd.read_parquet(f) for f in snakemake.input.maps], ignore_index=True) if snakemake.input.maps else None
)
if hits["n_null_guides"] == 0:
    log.warning("classify.n_null_guides is 0: no null, so no p-values, q-values or hit calls")
out = screen_calls(rows, maps, hits["null_model"], hits["q_threshold"], with_null=hits["n_null_guides"] > 0)
write_parquet(rows, snakemake.output.guide_folds)
for name in ("guides", "genes", "hits", "null"):
    write_parquet(out[name], snakemake.output[name])
write_parquet(maps if maps is not None else pd.DataFrame(), snakemake.output.maps)
real = out["guides"][~out["guides"]["is_null_guide"]]
log.info(
    "%d guide-fold rows, %d skipped; %d guide hit(s) at q < %g over %d (model, variant) pairs",
    len(rows),
    int((rows["status"] != "ok").sum()),
    int(real["hit"].sum()),
    hits["q_threshold"],
    len(real.groupby(["model", "variant"])),
)
