"""Rule simulate_truth: the demo screen's per-guide ground truth."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.simulate_truth", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.screen.demo import gene_truth
from phenoica.utils import write_parquet
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    truth = gene_truth(snakemake.params.options)
    write_parquet(truth, snakemake.output[0])
    log.info("wrote %d guides (%d with an effect)", len(truth), int(truth["has_effect"].sum()))


run_job(main, log, snakemake)
