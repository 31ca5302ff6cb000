"""Rule embed: stream one plate's (or a group of plates') tiles through the model's encoder into
each plate's embeddings parquet, the model built once per job."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.embed", snakemake.log[0])  # first: the log holds everything the job prints

from pathlib import Path

from phenoica.embed import EmbedJob, PlateJob, embed_model_plates
from phenoica.models import keep_freed_memory
from phenoica.workflow import run_job


def files(named) -> list[Path]:
    """A named input of one file (a str) or several, as a list of paths."""
    return [Path(named)] if isinstance(named, str) else [Path(f) for f in named]


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    if keep_freed_memory():  # the forward's activations reuse freed memory instead of page-faulting afresh
        log.info("malloc: freed memory kept for reuse (glibc mallopt)")
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    embed_model_plates(
        [
            PlateJob(store, metadata, out)
            for store, metadata, out in zip(
                files(snakemake.input.stores), files(snakemake.input.metadata), files(snakemake.output), strict=True
            )
        ],
        EmbedJob(
            model_name=snakemake.wildcards.model,
            checkpoint=snakemake.input.checkpoint,
            options=snakemake.params.options,
            threads=snakemake.threads,
        ),
        log=log,
    )


run_job(main, log, snakemake)
