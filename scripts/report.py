"""Rule report: the report's sections (phenoica.report.write.SECTIONS) over the rule's inputs."""

from phenoica.utils.io import rule_logger

log = rule_logger("phenoica.report", snakemake.log[0])  # first: the log holds everything the job prints

from pathlib import Path

from phenoica.report.inputs import ReportOptions, read_inputs
from phenoica.report.write import write_report

par = snakemake.params
paths = write_report(
    Path(snakemake.output.markdown).parent,
    read_inputs(snakemake.input, par),
    ReportOptions(q_threshold=par.q_threshold, seed=par.seed),
)
log.info("report written: %s", sorted(paths))
