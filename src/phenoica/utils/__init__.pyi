# The face of phenoica.utils for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._classifier_scores import auroc as auroc
from ._classifier_scores import concentration as concentration
from ._classifier_scores import sparsity as sparsity
from ._classifier_scores import split_fractions as split_fractions
from ._classifier_scores import top_features as top_features
from ._csv import FORMULA_STARTS as FORMULA_STARTS
from ._csv import TEXT_MARK as TEXT_MARK
from ._csv import is_formula_like as is_formula_like
from ._csv import write_csv as write_csv
from ._faces import lazy_face as lazy_face
from ._io import INVISIBLE_CATEGORIES as INVISIBLE_CATEGORIES
from ._io import JOB_CPU as JOB_CPU
from ._io import TEXT_SUFFIXES as TEXT_SUFFIXES
from ._io import atomic_path as atomic_path
from ._io import check_same_variants as check_same_variants
from ._io import end_job as end_job
from ._io import get_logger as get_logger
from ._io import log_job_cpu as log_job_cpu
from ._io import path_part_problem as path_part_problem
from ._io import read_parquets as read_parquets
from ._io import read_table as read_table
from ._io import rule_logger as rule_logger
from ._io import table_suffix as table_suffix
from ._io import write_json as write_json
from ._io import write_parquet as write_parquet
from ._numeric import CHUNK_ROWS as CHUNK_ROWS
from ._numeric import centered_chunks as centered_chunks
from ._numeric import finite_values as finite_values
from ._numeric import out_dtype as out_dtype
from ._numeric import row_chunks as row_chunks
from ._seeding import derive_seed as derive_seed
from ._seeding import keyed_uniforms as keyed_uniforms
from ._seeding import name_hashes as name_hashes
from ._seeding import rng_for as rng_for
from ._seeding import rng_from_sequence as rng_from_sequence
from ._seeding import seed_sequence as seed_sequence
from ._stats import acat as acat
from ._stats import bh_qvalues as bh_qvalues
from ._stats import bootstrap_mean as bootstrap_mean
from ._text_tables import duplicate_header_problem as duplicate_header_problem
from ._written import MANIFEST as MANIFEST
from ._written import SNAKEMAKE_FILES as SNAKEMAKE_FILES
from ._written import record_written as record_written
from ._written import unlisted_files as unlisted_files
from ._written import walk_files as walk_files

__all__ = [
    "acat",
    "atomic_path",
    "auroc",
    "bh_qvalues",
    "bootstrap_mean",
    "centered_chunks",
    "check_same_variants",
    "CHUNK_ROWS",
    "concentration",
    "derive_seed",
    "duplicate_header_problem",
    "end_job",
    "finite_values",
    "FORMULA_STARTS",
    "get_logger",
    "INVISIBLE_CATEGORIES",
    "is_formula_like",
    "JOB_CPU",
    "keyed_uniforms",
    "lazy_face",
    "log_job_cpu",
    "MANIFEST",
    "name_hashes",
    "out_dtype",
    "path_part_problem",
    "read_parquets",
    "read_table",
    "record_written",
    "rng_for",
    "rng_from_sequence",
    "row_chunks",
    "rule_logger",
    "seed_sequence",
    "SNAKEMAKE_FILES",
    "sparsity",
    "split_fractions",
    "table_suffix",
    "TEXT_MARK",
    "TEXT_SUFFIXES",
    "top_features",
    "unlisted_files",
    "walk_files",
    "write_csv",
    "write_json",
    "write_parquet",
]
