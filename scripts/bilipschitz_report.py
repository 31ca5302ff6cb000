"""Rule bilipschitz_report: figures, Spearman table (bootstrap intervals), verdict, Markdown and HTML page."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.bilipschitz_report", snakemake.log[0])  # first: the log holds everything the job prints

from pathlib import Path

import pandas as pd

from phenoica.studies.bilipschitz import write_report
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    inp, options = snakemake.input, snakemake.params.options
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    files = write_report(
        Path(snakemake.output.markdown).parent,
        pd.concat([pd.read_parquet(p) for p in inp.models], ignore_index=True),
        pd.concat([pd.read_parquet(p) for p in inp.pairs], ignore_index=True),
        pd.concat([pd.read_parquet(p) for p in inp.samples], ignore_index=True),
        n_boot=options.n_bootstrap,
        seed=options.seed,
    )
    log.info("wrote %s", ", ".join(str(p) for p in files.values()))


run_job(main, log, snakemake)
