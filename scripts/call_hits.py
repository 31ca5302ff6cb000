"""Rule call_hits: the gathered guide-fold rows (and mAP readout) -> guide and gene scores with
hit calls, the hit table beside the mAP readout, and the null's calibration summary."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.call_hits", snakemake.log[0])  # first: the log holds everything the job prints

import pandas as pd

from phenoica.hits import control_calls, screen_calls, separating_by_model
from phenoica.utils import write_parquet
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    options = snakemake.params.options
    rows = pd.read_parquet(snakemake.input.guide_folds)
    maps = pd.read_parquet(snakemake.input.maps)
    if not options.with_null:
        log.warning("classify.n_null_guides is 0: no null, so no p-values, q-values or hit calls")
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    maps = maps if len(maps.columns) else None
    out = screen_calls(rows, maps, options.null_model, options.q_threshold, options.with_null, options.seed)
    controls = pd.read_parquet(snakemake.input.controls)
    separating = separating_by_model(controls, dict(zip(snakemake.params.model_names, snakemake.input.profiles)))
    out["controls"] = control_calls(
        controls, out["guides"], options.null_model, options.q_threshold, separating, options.seed
    )
    for name in ("guides", "genes", "hits", "null", "controls"):
        write_parquet(out[name], snakemake.output[name])
    real = out["guides"][~out["guides"]["is_null_guide"]]
    log.info(
        "%d guide hit(s) at q < %g over %d (model, variant) pairs",
        int(real["hit"].sum()),
        options.q_threshold,
        len(real.groupby(["model", "variant"])),
    )


run_job(main, log, snakemake)
