"""Rule gather_scores: every shard's guide-fold rows in one table, the control constructs' rows in
another, every (model, variant)'s mAP readout in a third and its replicate retrieval in a fourth (empty
tables when the readout is off)."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.gather_scores", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.classify import split_control_rows
from phenoica.utils import read_parquets, write_parquet
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    rows, controls = split_control_rows(read_parquets(snakemake.input.shards))
    maps = read_parquets(snakemake.input.maps)
    write_parquet(read_parquets(snakemake.input.retrieval), snakemake.output.retrieval)
    write_parquet(rows, snakemake.output.guide_folds)
    write_parquet(controls, snakemake.output.controls)
    write_parquet(maps, snakemake.output.maps)
    log.info(
        "%d guide-fold rows from %d shard(s), %d skipped",
        len(rows),
        len(snakemake.input.shards),
        int((rows["status"] != "ok").sum()),
    )


run_job(main, log, snakemake)
