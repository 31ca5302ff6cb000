# The face of phenoica.transforms for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._apply import apply_transform as apply_transform
from ._apply import apply_transform_file as apply_transform_file
from ._apply import apply_transform_files as apply_transform_files
from ._fit import fit_transforms as fit_transforms
from ._fit import fit_variants as fit_variants
from ._options import ApplyTransformOptions as ApplyTransformOptions
from ._options import TransformOptions as TransformOptions
from ._rotations import ICARotation as ICARotation
from ._rotations import RandomRotation as RandomRotation
from ._rows import column_values as column_values
from ._scaling import CenterScale as CenterScale
from ._variant import load_transform as load_transform
from ._variant_names import VARIANTS as VARIANTS
from ._variant_names import WHITENED_VARIANTS as WHITENED_VARIANTS
from ._variant_names import component_name as component_name
from ._variant_names import swept_variants as swept_variants
from ._whitening import PCAWhitener as PCAWhitener
from ._whitening import parallel_analysis as parallel_analysis

__all__ = [
    "apply_transform",
    "apply_transform_file",
    "apply_transform_files",
    "ApplyTransformOptions",
    "CenterScale",
    "column_values",
    "component_name",
    "fit_transforms",
    "fit_variants",
    "ICARotation",
    "load_transform",
    "parallel_analysis",
    "PCAWhitener",
    "RandomRotation",
    "swept_variants",
    "TransformOptions",
    "VARIANTS",
    "WHITENED_VARIANTS",
]
