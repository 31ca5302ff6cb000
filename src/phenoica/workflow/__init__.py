"""Above every stage: the door (:mod:`.validate`, the whole screen checked before any job), what the
Snakemake DAG needs before any job (:mod:`.dag`) and the table of output paths (:mod:`.paths`)."""
