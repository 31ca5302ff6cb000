"""Rule plate_metadata: one plate's rows of the user's metadata table, checked against its store."""
from phenoica.io import get_logger, write_parquet
from phenoica.screen import PLATE, check_plate_against_metadata, open_plate, read_metadata

log = get_logger("phenoica.plate_metadata", snakemake.log[0])
plate = snakemake.wildcards.plate
table = read_metadata(snakemake.input.table)
rows = table[table[PLATE] == plate].sort_values("Metadata_ImageIndex")
check_plate_against_metadata(open_plate(snakemake.input.store), rows, snakemake.input.store)
write_parquet(rows, snakemake.output[0])
log.info("plate %s: %d images", plate, len(rows))
