"""Rule bilipschitz_report: figures, Spearman table (bootstrap intervals), verdict, Markdown and HTML page."""
from pathlib import Path

import pandas as pd

from phenoica.io import get_logger
from phenoica.studies.bilipschitz import write_report

log = get_logger("phenoica.bilipschitz_report", snakemake.log[0])
inp = snakemake.input
files = write_report(
    Path(snakemake.output.markdown).parent,
    pd.concat([pd.read_parquet(p) for p in inp.models], ignore_index=True),
    pd.concat([pd.read_parquet(p) for p in inp.pairs], ignore_index=True),
    pd.concat([pd.read_parquet(p) for p in inp.samples], ignore_index=True),
    n_boot=snakemake.params.n_bootstrap,
    seed=snakemake.params.seed,
)
log.info("wrote %s", ", ".join(str(p) for p in files.values()))
