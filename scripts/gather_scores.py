"""Rule gather_scores: all shards -> guide-fold, guide-level and gene-level score tables."""
import pandas as pd

from phenoica.classify import summarize_scores
from phenoica.io import get_logger, write_parquet

log = get_logger("phenoica.gather_scores", snakemake.log[0])
rows = pd.concat([pd.read_parquet(p) for p in snakemake.input.shards], ignore_index=True)
guides, genes = summarize_scores(rows)
maps = pd.concat([pd.read_parquet(p) for p in snakemake.input.maps], ignore_index=True) if snakemake.input.maps else pd.DataFrame()
write_parquet(rows, snakemake.output.guide_folds)
write_parquet(guides, snakemake.output.guides)
write_parquet(genes, snakemake.output.genes)
write_parquet(maps, snakemake.output.maps)
log.info("%d guide-fold rows, %d skipped", len(rows), int((rows["status"] != "ok").sum()))
