# The face of phenoica.hits for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._call_counts import hit_counts as hit_counts
from ._calls import NullFit as NullFit
from ._calls import call_guides as call_guides
from ._controls import control_calls as control_calls
from ._controls import separating_by_model as separating_by_model
from ._effects import DISTANCE_COLUMNS as DISTANCE_COLUMNS
from ._effects import SATURATION_SHARE as SATURATION_SHARE
from ._effects import fold_interval as fold_interval
from ._effects import measure_phrase as measure_phrase
from ._effects import saturation as saturation
from ._effects import wells_and_folds_interval as wells_and_folds_interval
from ._options import HitOptions as HitOptions
from ._options import PositionOptions as PositionOptions
from ._options import ReferenceOptions as ReferenceOptions
from ._positions import plate_grid as plate_grid
from ._positions import plate_position_files as plate_position_files
from ._readouts import agreement_classes as agreement_classes
from ._readouts import hit_table as hit_table
from ._readouts import readout_agreement as readout_agreement
from ._reference import Contrast as Contrast
from ._reference import contrast_auroc as contrast_auroc
from ._reference import null_contrasts as null_contrasts
from ._reference import null_size as null_size
from ._reference import pair_contrasts as pair_contrasts
from ._reference import reference_files as reference_files
from ._reference import reference_pairs as reference_pairs
from ._screen_calls import GENE_SUMMARY_COLUMNS as GENE_SUMMARY_COLUMNS
from ._screen_calls import GUIDE_SUMMARY_COLUMNS as GUIDE_SUMMARY_COLUMNS
from ._screen_calls import screen_calls as screen_calls
from ._screen_calls import summarize_scores as summarize_scores
from ._tail import fit_tail as fit_tail
from ._tail import leave_one_out_pareto as leave_one_out_pareto
from ._truth import pooled_recall_fdr as pooled_recall_fdr
from ._truth import recall_fdr as recall_fdr

__all__ = [
    "agreement_classes",
    "call_guides",
    "Contrast",
    "contrast_auroc",
    "control_calls",
    "DISTANCE_COLUMNS",
    "fit_tail",
    "fold_interval",
    "GENE_SUMMARY_COLUMNS",
    "GUIDE_SUMMARY_COLUMNS",
    "hit_counts",
    "hit_table",
    "HitOptions",
    "leave_one_out_pareto",
    "measure_phrase",
    "null_contrasts",
    "null_size",
    "NullFit",
    "pair_contrasts",
    "plate_grid",
    "plate_position_files",
    "pooled_recall_fdr",
    "PositionOptions",
    "readout_agreement",
    "recall_fdr",
    "reference_files",
    "reference_pairs",
    "ReferenceOptions",
    "saturation",
    "SATURATION_SHARE",
    "screen_calls",
    "separating_by_model",
    "summarize_scores",
    "wells_and_folds_interval",
]
