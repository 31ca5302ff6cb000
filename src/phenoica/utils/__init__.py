"""Small helpers every stage shares: atomic writes and logs, seeds, array checks, statistics, and
the scores of a classifier (AUROC, split fractions, sparsity, concentration)."""

from phenoica.utils._faces import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_classifier_scores": ["auroc", "concentration", "sparsity", "split_fractions", "top_features"],
        "_csv": ["FORMULA_STARTS", "TEXT_MARK", "is_formula_like", "write_csv"],
        "_faces": ["lazy_face"],
        "_io": [
            "INVISIBLE_CATEGORIES",
            "JOB_CPU",
            "TEXT_SUFFIXES",
            "atomic_path",
            "check_same_variants",
            "end_job",
            "get_logger",
            "log_job_cpu",
            "path_part_problem",
            "read_parquets",
            "read_table",
            "rule_logger",
            "table_suffix",
            "write_json",
            "write_parquet",
        ],
        "_numeric": ["CHUNK_ROWS", "centered_chunks", "finite_values", "out_dtype", "row_chunks"],
        "_seeding": ["derive_seed", "keyed_uniforms", "name_hashes", "rng_for", "rng_from_sequence", "seed_sequence"],
        "_stats": ["acat", "bh_qvalues", "bootstrap_mean"],
        "_text_tables": ["duplicate_header_problem"],
        "_written": ["MANIFEST", "SNAKEMAKE_FILES", "record_written", "unlisted_files", "walk_files"],
    },
)
