"""Rule fit_transforms: fit every variant's transform once on a model's profiles and save it
(the profile parquet is read in row batches of transforms.batch_rows, two passes)."""

from phenoica.utils.io import rule_logger

log = rule_logger("phenoica.fit_transforms", snakemake.log[0])  # first: the log holds everything the job prints

from pathlib import Path

from phenoica.variants.fit import fit_transforms
from phenoica.workflow.params import with_speed_settings

cfg = with_speed_settings(snakemake.params.transforms, snakemake.config, "transforms")
fit_transforms(snakemake.input[0], cfg, snakemake.params.seed, Path(snakemake.output.fit_report).parent, log=log)
