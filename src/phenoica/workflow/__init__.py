"""Workflow glue: the config and its schema, what the Snakemake DAG needs before any job, and the table of output paths."""
