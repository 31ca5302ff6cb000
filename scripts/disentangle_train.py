"""Rule disentangle_train: train one (dataset, model, seed), write eval-set latents + weights."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.disentangle_train", snakemake.log[0])  # first: the log holds everything the job prints

import torch

from phenoica.studies.disentangle import load_dataset, train_and_encode
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    torch.set_num_threads(snakemake.threads)
    w, options = snakemake.wildcards, snakemake.params.options
    data = load_dataset(w.dis_dataset, options)
    log.info(
        "%s: %d images %dx%d, factors %s",
        data.name,
        len(data),
        data.image_size,
        data.image_size,
        dict(zip(data.factor_names, data.sizes)),
    )
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    summary = train_and_encode(
        data, w.dis_model, options, int(w.dis_seed), snakemake.output.latents, snakemake.output.checkpoint, log=log
    )
    log.info(
        "%s seed %s: %.0f images/s on %s, %.1f s, loss %.2f -> %.2f",
        w.dis_model,
        w.dis_seed,
        summary["images_per_s"],
        summary["device"],
        summary["seconds"],
        summary["loss"][0],
        summary["loss"][-1],
    )


run_job(main, log, snakemake)
