"""Rule train_mae: masked-autoencoder pretraining on the screen's own tiles."""
import torch

from phenoica.io import get_logger
from phenoica.workflow import record_training
from phenoica.mae import train_mae

log = get_logger("phenoica.train_mae", snakemake.log[0])
torch.set_num_threads(snakemake.threads)
summary = train_mae(
    list(snakemake.input.stores),
    snakemake.params.spec,
    snakemake.params.train,
    snakemake.params.seed,
    snakemake.output.checkpoint,
    log=log,
    device=snakemake.params.device,
)
log.info("training summary: %s", summary)
record_training(snakemake.output.record, list(snakemake.input.stores), summary)
