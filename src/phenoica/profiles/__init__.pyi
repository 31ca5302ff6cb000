# The face of phenoica.profiles for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._columns import IDENTIFIER_PATTERNS as IDENTIFIER_PATTERNS
from ._columns import FeatureSelection as FeatureSelection
from ._columns import is_identifier as is_identifier
from ._constant_rows import ConstantRows as ConstantRows
from ._constant_rows import constant_row_notes as constant_row_notes
from ._embeddings import expand_glob as expand_glob
from ._embeddings import plan_files as plan_files
from ._gather import gather_profiles as gather_profiles
from ._gather import write_profiles as write_profiles
from ._hygiene import Hygiene as Hygiene
from ._hygiene import clean_profiles as clean_profiles
from ._hygiene import normalize_problems as normalize_problems
from ._hygiene import planned_hygiene as planned_hygiene
from ._hygiene import write_plan as write_plan
from ._options import GatherOptions as GatherOptions
from ._tables import DEFAULT_BATCH_ROWS as DEFAULT_BATCH_ROWS
from ._tables import ProfileSource as ProfileSource
from ._tables import batch_features as batch_features
from ._tables import check_numeric_features as check_numeric_features
from ._tables import split_columns as split_columns
from ._tables import write_batches as write_batches
from ._wells import WellMeans as WellMeans
from ._wells import aggregate_wells as aggregate_wells

__all__ = [
    "aggregate_wells",
    "batch_features",
    "check_numeric_features",
    "clean_profiles",
    "constant_row_notes",
    "ConstantRows",
    "DEFAULT_BATCH_ROWS",
    "expand_glob",
    "FeatureSelection",
    "gather_profiles",
    "GatherOptions",
    "Hygiene",
    "IDENTIFIER_PATTERNS",
    "is_identifier",
    "normalize_problems",
    "plan_files",
    "planned_hygiene",
    "ProfileSource",
    "split_columns",
    "WellMeans",
    "write_batches",
    "write_plan",
    "write_profiles",
]
