"""Rule gather_biomap: every (model, variant)'s biomap tables, one table per kind."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.gather_biomap", snakemake.log[0])  # first: the log holds everything the job prints

from pathlib import Path

import pandas as pd

from phenoica.utils import write_parquet
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    for kind, out in snakemake.output.items():
        parts = [pd.read_parquet(p) for p in getattr(snakemake.input, kind)]
        write_parquet(pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(), out)
        log.info("%s: %d rows from %d files -> %s", kind, sum(len(p) for p in parts), len(parts), Path(out).name)


run_job(main, log, snakemake)
