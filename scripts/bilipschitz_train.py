"""Rule bilipschitz_train: train every seed of one (dataset, group, alpha) and measure B(z), latents, reconstruction."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.bilipschitz_train", snakemake.log[0])  # first: the log holds everything the job prints

import torch

from phenoica.studies.bilipschitz import run_alpha
from phenoica.utils import write_parquet
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    torch.set_num_threads(snakemake.threads)
    w = snakemake.wildcards
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    table = run_alpha(w.dataset, w.group, float(w.alpha), snakemake.params.options, log=log)
    write_parquet(table, snakemake.output[0])


run_job(main, log, snakemake)
