"""Rule validate_screen: the whole screen against the data contract and the models, before any plate job."""
from phenoica.io import get_logger
from phenoica.validate import validate_screen

log = get_logger("phenoica.validate_screen", snakemake.log[0])
p = snakemake.params
validate_screen(p.screen, p.plates, p.models, crop_size=p.crop_size, demo=p.demo, out=snakemake.output[0], log=log)
