# The face of phenoica.studies for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._plan import AE_DERIVED as AE_DERIVED
from ._plan import alpha_label as alpha_label
from ._plan import dataset_groups as dataset_groups

__all__ = [
    "AE_DERIVED",
    "alpha_label",
    "dataset_groups",
]
