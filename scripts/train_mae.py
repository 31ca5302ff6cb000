"""Rule train_mae: masked-autoencoder pretraining on the screen's own tiles."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.train_mae", snakemake.log[0])  # first: the log holds everything the job prints

import torch

from phenoica.models import record_training, train_mae
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    torch.set_num_threads(snakemake.threads)
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    summary = train_mae(list(snakemake.input.stores), snakemake.params.options, snakemake.output.checkpoint, log=log)
    log.info("training summary: %s", summary)
    record_training(snakemake.output.record, list(snakemake.input.stores), summary)


run_job(main, log, snakemake)
