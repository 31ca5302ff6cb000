"""Rule train_mae: masked-autoencoder pretraining on the screen's own tiles."""

from phenoica.utils.io import rule_logger

log = rule_logger("phenoica.train_mae", snakemake.log[0])  # first: the log holds everything the job prints

import torch

from phenoica.models.mae import TrainOptions, record_training, train_mae
from phenoica.workflow.params import with_speed_settings

torch.set_num_threads(snakemake.threads)
summary = train_mae(
    list(snakemake.input.stores),
    snakemake.params.spec,
    TrainOptions.from_config(
        with_speed_settings(snakemake.params.train, snakemake.config, "train"), device=snakemake.params.device
    ),
    snakemake.params.seed,
    snakemake.output.checkpoint,
    log=log,
)
log.info("training summary: %s", summary)
record_training(snakemake.output.record, list(snakemake.input.stores), summary)
