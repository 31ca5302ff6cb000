# The face of phenoica.classify for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._bins import FoldBins as FoldBins
from ._distance import DISTANCE_COLUMNS as DISTANCE_COLUMNS
from ._distance import ControlMoments as ControlMoments
from ._distance import heldout_distance_se as heldout_distance_se
from ._engine import classify_guides as classify_guides
from ._engine import classify_shard as classify_shard
from ._engine import fold_masks as fold_masks
from ._features import feature_matrix as feature_matrix
from ._guide_model import columns_dataset as columns_dataset
from ._guide_model import guide_seed as guide_seed
from ._guide_model import score_guide as score_guide
from ._guide_model import score_guide_on as score_guide_on
from ._lightgbm_params import LIGHTGBM_MIN_DATA_IN_LEAF as LIGHTGBM_MIN_DATA_IN_LEAF
from ._lightgbm_params import lightgbm_names_record as lightgbm_names_record
from ._lightgbm_params import lightgbm_params as lightgbm_params
from ._lightgbm_params import lightgbm_report_params as lightgbm_report_params
from ._lightgbm_params import use_lightgbm_names as use_lightgbm_names
from ._map_depth import grouping_share as grouping_share
from ._map_depth import map_null_choice as map_null_choice
from ._map_job import guide_map_files as guide_map_files
from ._map_null import coupled_null_counts as coupled_null_counts
from ._map_null import gap_drawn as gap_drawn
from ._map_null import permuted_null_counts as permuted_null_counts
from ._map_null import settled_null_counts as settled_null_counts
from ._map_permutation import WellPool as WellPool
from ._map_permutation import pool_map as pool_map
from ._map_permutation import well_pool as well_pool
from ._map_readout import centered_on_plate_controls as centered_on_plate_controls
from ._map_readout import guide_map as guide_map
from ._map_readout import guide_map_within_plate as guide_map_within_plate
from ._map_readout import reference_map as reference_map
from ._map_readout import well_profiles as well_profiles
from ._null import AUTO_NULL_MAX as AUTO_NULL_MAX
from ._null import AUTO_NULL_MIN as AUTO_NULL_MIN
from ._null import NULL_GENE as NULL_GENE
from ._null import GuideSamples as GuideSamples
from ._null import control_constructs as control_constructs
from ._null import control_mask as control_mask
from ._null import control_positions as control_positions
from ._null import guide_samples as guide_samples
from ._null import guides_of as guides_of
from ._null import null_count as null_count
from ._null import null_guide_count as null_guide_count
from ._null import null_guide_design as null_guide_design
from ._null import null_guide_name as null_guide_name
from ._null import null_layout_choice as null_layout_choice
from ._null import position_null_design as position_null_design
from ._null import split_control_rows as split_control_rows
from ._options import ClassifyOptions as ClassifyOptions
from ._options import MapReadoutOptions as MapReadoutOptions
from ._options import SplitOptions as SplitOptions
from ._protocol import PROTOCOLS as PROTOCOLS
from ._protocol import control_strata as control_strata
from ._protocol import training_controls as training_controls
from ._protocol import trainings as trainings
from ._readout_registry import GUIDE_KEYS as GUIDE_KEYS
from ._readout_registry import Readout as Readout
from ._readout_registry import ReadoutInputs as ReadoutInputs
from ._readout_registry import readout_capacity as readout_capacity
from ._readout_registry import register_readout as register_readout
from ._readout_registry import registered_readouts as registered_readouts
from ._readout_registry import unregister_readout as unregister_readout
from ._retrieval import guide_retrieval as guide_retrieval
from ._retrieval import mean_retrieval as mean_retrieval
from ._retrieval import retrieval_difference as retrieval_difference
from ._splits import Fold as Fold
from ._splits import folds_table as folds_table
from ._splits import leave_one_batch_out as leave_one_batch_out
from ._splits import make_folds as make_folds
from ._splits import read_folds as read_folds

__all__ = [
    "AUTO_NULL_MAX",
    "AUTO_NULL_MIN",
    "centered_on_plate_controls",
    "classify_guides",
    "classify_shard",
    "ClassifyOptions",
    "columns_dataset",
    "control_constructs",
    "control_mask",
    "control_positions",
    "control_strata",
    "ControlMoments",
    "coupled_null_counts",
    "DISTANCE_COLUMNS",
    "feature_matrix",
    "Fold",
    "fold_masks",
    "FoldBins",
    "folds_table",
    "gap_drawn",
    "grouping_share",
    "GUIDE_KEYS",
    "guide_map",
    "guide_map_files",
    "guide_map_within_plate",
    "guide_retrieval",
    "guide_samples",
    "guide_seed",
    "guides_of",
    "GuideSamples",
    "heldout_distance_se",
    "leave_one_batch_out",
    "LIGHTGBM_MIN_DATA_IN_LEAF",
    "lightgbm_names_record",
    "lightgbm_params",
    "lightgbm_report_params",
    "make_folds",
    "map_null_choice",
    "MapReadoutOptions",
    "mean_retrieval",
    "null_count",
    "NULL_GENE",
    "null_guide_count",
    "null_guide_design",
    "null_guide_name",
    "null_layout_choice",
    "permuted_null_counts",
    "pool_map",
    "position_null_design",
    "PROTOCOLS",
    "read_folds",
    "Readout",
    "readout_capacity",
    "ReadoutInputs",
    "reference_map",
    "register_readout",
    "registered_readouts",
    "retrieval_difference",
    "score_guide",
    "score_guide_on",
    "settled_null_counts",
    "split_control_rows",
    "SplitOptions",
    "training_controls",
    "trainings",
    "unregister_readout",
    "use_lightgbm_names",
    "well_pool",
    "well_profiles",
    "WellPool",
]
