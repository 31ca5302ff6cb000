"""Rule bilipschitz_train: train every seed of one (dataset, group, alpha) and measure B(z), latents, reconstruction."""
import torch

from phenoica.io import get_logger, write_parquet
from phenoica.studies.bilipschitz import run_alpha

log = get_logger("phenoica.bilipschitz_train", snakemake.log[0])
torch.set_num_threads(snakemake.threads)
w = snakemake.wildcards
table = run_alpha(w.dataset, w.group, float(w.alpha), snakemake.params.settings,
                  data_seed=snakemake.params.data_seed, log=log)
write_parquet(table, snakemake.output[0])
