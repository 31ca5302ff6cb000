"""Rule disentangle_report: gather every (dataset, model, seed) score, write Table 2, NMI figures, report.md, index.html."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.disentangle_report", snakemake.log[0])  # first: the log holds everything the job prints

from pathlib import Path

import pandas as pd

from phenoica.studies.disentangle import write_report
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    scores = pd.concat([pd.read_parquet(p) for p in snakemake.input], ignore_index=True)
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    written = write_report(scores, Path(snakemake.output.md).parent, snakemake.params.options)
    log.info("wrote %s", ", ".join(str(p) for p in written.values()))


run_job(main, log, snakemake)
