"""Rule disentangle_evaluate: InfoMEC, MCC, R^2, DCI of one (dataset, model, seed); ae_ica from the AE's latents."""

from phenoica.utils import log_job_cpu, rule_logger

log = rule_logger("phenoica.disentangle_evaluate", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.studies.disentangle import DISENTANGLE_SCORES, evaluate
from phenoica.workflow import run_job


def main() -> None:
    """The job's work; :func:`phenoica.workflow.run_job` ends the process after it."""
    w = snakemake.wildcards
    log_job_cpu(log, "work")  # the CPU seconds before this line: start-up, imports, reading inputs
    row = evaluate(
        snakemake.input[0],
        w.dis_model,
        snakemake.params.options,
        int(w.dis_seed),
        w.dis_dataset,
        snakemake.output[0],
    )
    log.info(
        "%s/%s/seed%s: %s",
        w.dis_dataset,
        w.dis_model,
        w.dis_seed,
        row[list(DISENTANGLE_SCORES)].round(3).to_dict("records")[0],
    )


run_job(main, log, snakemake)
