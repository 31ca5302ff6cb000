"""Rule fit_transforms: fit every variant's transform once on a model's profiles and save it."""
from pathlib import Path

import pandas as pd

from phenoica.io import get_logger
from phenoica.transforms import fit_transforms

log = get_logger("phenoica.fit_transforms", snakemake.log[0])
profiles = pd.read_parquet(snakemake.input[0])
fit_transforms(profiles, snakemake.params.transforms, snakemake.params.seed, Path(snakemake.output.fit_report).parent, log=log)
