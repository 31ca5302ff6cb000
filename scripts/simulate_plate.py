"""Rule simulate_plate: one demo plate (tiles, metadata, ground-truth factors)."""

from phenoica.utils.io import rule_logger

log = rule_logger("phenoica.simulate_plate", snakemake.log[0])  # first: the log holds everything the job prints

from phenoica.sources.demo.plates import write_demo_plate
from phenoica.workflow.params import with_speed_settings

plate = snakemake.wildcards.plate
write_demo_plate(
    with_speed_settings(snakemake.params.demo, snakemake.config, "demo"),
    snakemake.params.seed,
    plate,
    store=snakemake.output.store,
    metadata_path=snakemake.output.metadata,
    factors_path=snakemake.output.factors,
)
log.info("simulated plate %s", plate)
