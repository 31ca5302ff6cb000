# The face of phenoica.contract for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._arrays import check_finite as check_finite
from ._arrays import check_matrix as check_matrix
from ._arrays import check_rows as check_rows
from ._arrays import column_labels as column_labels
from ._config import MIN_COMPONENTS as MIN_COMPONENTS
from ._config import check_model_geometry as check_model_geometry
from ._config import component_problems as component_problems
from ._config import component_rule as component_rule
from ._config import deep_merge as deep_merge
from ._config import demo_plates as demo_plates
from ._config import embedding_globs as embedding_globs
from ._config import load_config as load_config
from ._config import planned_demo_note as planned_demo_note
from ._config import run_models as run_models
from ._config import validate_config as validate_config
from ._errors import ConfigError as ConfigError
from ._names import MAX_NAME_LENGTH as MAX_NAME_LENGTH
from ._names import formula_name_notes as formula_name_notes
from ._names import listed_name_problems as listed_name_problems
from ._names import name_problems as name_problems
from ._paths import OUTPUTS as OUTPUTS
from ._paths import benchmark_path as benchmark_path
from ._paths import log_path as log_path
from ._paths import output_paths as output_paths
from ._schema import check_yaml_files as check_yaml_files
from ._schema import load_schema as load_schema
from ._schema import package_schema as package_schema
from ._schema import read_yaml as read_yaml
from ._schema import schema_enum as schema_enum
from ._score_table import OK as OK
from ._score_table import SCORE_COLUMNS as SCORE_COLUMNS
from ._score_table import SCORE_FLOAT_COLUMNS as SCORE_FLOAT_COLUMNS
from ._score_table import SCORE_INT_COLUMNS as SCORE_INT_COLUMNS
from ._score_table import SKIPPED as SKIPPED
from ._screen_data import BATCH as BATCH
from ._screen_data import CONTROL as CONTROL
from ._screen_data import FACTOR_PREFIX as FACTOR_PREFIX
from ._screen_data import FEATURE_PREFIX as FEATURE_PREFIX
from ._screen_data import GENE as GENE
from ._screen_data import GUIDE as GUIDE
from ._screen_data import IMAGE_INDEX as IMAGE_INDEX
from ._screen_data import KEY_COLUMNS as KEY_COLUMNS
from ._screen_data import PERT_TYPE as PERT_TYPE
from ._screen_data import PERT_TYPES as PERT_TYPES
from ._screen_data import PERTURBATION as PERTURBATION
from ._screen_data import PLATE as PLATE
from ._screen_data import PROFILE_COLUMNS as PROFILE_COLUMNS
from ._screen_data import REQUIRED_COLUMNS as REQUIRED_COLUMNS
from ._screen_data import SITE as SITE
from ._screen_data import SUPPORTED_DTYPES as SUPPORTED_DTYPES
from ._screen_data import TILES as TILES
from ._screen_data import WELL as WELL
from ._screen_data import ScreenError as ScreenError
from ._screen_data import channel_indices as channel_indices
from ._screen_data import check_columns as check_columns
from ._screen_data import check_plate_against_metadata as check_plate_against_metadata
from ._screen_data import check_plate_names as check_plate_names
from ._screen_data import control_problems as control_problems
from ._screen_data import duplicate_problems as duplicate_problems
from ._screen_data import feature_columns as feature_columns
from ._screen_data import feature_name as feature_name
from ._screen_data import metadata_columns as metadata_columns
from ._screen_data import near_miss as near_miss
from ._screen_data import normalize_names as normalize_names
from ._screen_data import open_plate as open_plate
from ._screen_data import pert_type_problems as pert_type_problems
from ._screen_data import plate_channels as plate_channels
from ._screen_data import raise_problems as raise_problems
from ._screen_data import read_metadata as read_metadata
from ._screen_data import read_plate_metadata as read_plate_metadata
from ._screen_data import relation_problems as relation_problems
from ._screen_data import row_name as row_name
from ._screen_data import validate_metadata as validate_metadata
from ._screen_data import validate_profile_metadata as validate_profile_metadata
from ._screen_data import validate_screen_metadata as validate_screen_metadata
from ._screen_data import write_plate as write_plate
from ._stage_options import RULE_OPTIONS as RULE_OPTIONS
from ._stage_options import Composed as Composed
from ._stage_options import Setting as Setting
from ._stage_options import canonical as canonical
from ._stage_options import composed as composed
from ._stage_options import settings_of as settings_of
from ._stage_options import stage_options as stage_options
from ._store_check import missing_chunk_problems as missing_chunk_problems
from ._store_check import read_images as read_images

__all__ = [
    "BATCH",
    "benchmark_path",
    "canonical",
    "channel_indices",
    "check_columns",
    "check_finite",
    "check_matrix",
    "check_model_geometry",
    "check_plate_against_metadata",
    "check_plate_names",
    "check_rows",
    "check_yaml_files",
    "column_labels",
    "component_problems",
    "component_rule",
    "Composed",
    "composed",
    "ConfigError",
    "CONTROL",
    "control_problems",
    "deep_merge",
    "demo_plates",
    "duplicate_problems",
    "embedding_globs",
    "FACTOR_PREFIX",
    "feature_columns",
    "feature_name",
    "FEATURE_PREFIX",
    "formula_name_notes",
    "GENE",
    "GUIDE",
    "IMAGE_INDEX",
    "KEY_COLUMNS",
    "listed_name_problems",
    "load_config",
    "load_schema",
    "log_path",
    "MAX_NAME_LENGTH",
    "metadata_columns",
    "MIN_COMPONENTS",
    "missing_chunk_problems",
    "name_problems",
    "near_miss",
    "normalize_names",
    "OK",
    "open_plate",
    "output_paths",
    "OUTPUTS",
    "package_schema",
    "PERT_TYPE",
    "pert_type_problems",
    "PERT_TYPES",
    "PERTURBATION",
    "planned_demo_note",
    "PLATE",
    "plate_channels",
    "PROFILE_COLUMNS",
    "raise_problems",
    "read_images",
    "read_metadata",
    "read_plate_metadata",
    "read_yaml",
    "relation_problems",
    "REQUIRED_COLUMNS",
    "row_name",
    "RULE_OPTIONS",
    "run_models",
    "schema_enum",
    "SCORE_COLUMNS",
    "SCORE_FLOAT_COLUMNS",
    "SCORE_INT_COLUMNS",
    "ScreenError",
    "Setting",
    "settings_of",
    "SITE",
    "SKIPPED",
    "stage_options",
    "SUPPORTED_DTYPES",
    "TILES",
    "validate_config",
    "validate_metadata",
    "validate_profile_metadata",
    "validate_screen_metadata",
    "WELL",
    "write_plate",
]
