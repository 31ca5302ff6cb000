"""Rule bilipschitz_train: train one leaky-ReLU autoencoder and measure B(z), latents, reconstruction."""
import torch

from phenoica.io import get_logger, write_parquet
from phenoica.studies.bilipschitz import run_model

log = get_logger("phenoica.bilipschitz_train", snakemake.log[0])
torch.set_num_threads(snakemake.threads)
w = snakemake.wildcards
table = run_model(w.dataset, w.group, float(w.alpha), int(w.seed), snakemake.params.settings,
                  data_seed=snakemake.params.data_seed, log=log)
write_parquet(table, snakemake.output[0])
