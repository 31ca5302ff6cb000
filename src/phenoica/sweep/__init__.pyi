# The face of phenoica.sweep for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._component_sweep import MainPoint as MainPoint
from ._component_sweep import chosen_count as chosen_count
from ._component_sweep import chosen_point as chosen_point
from ._component_sweep import first_null_guides as first_null_guides
from ._component_sweep import gather_sweep as gather_sweep
from ._component_sweep import spaced_counts as spaced_counts
from ._component_sweep import sweep_genes as sweep_genes
from ._component_sweep import sweep_grid as sweep_grid
from ._component_sweep import sweep_model as sweep_model
from ._component_sweep import sweep_point as sweep_point
from ._options import SweepOptions as SweepOptions

__all__ = [
    "chosen_count",
    "chosen_point",
    "first_null_guides",
    "gather_sweep",
    "MainPoint",
    "spaced_counts",
    "sweep_genes",
    "sweep_grid",
    "sweep_model",
    "sweep_point",
    "SweepOptions",
]
