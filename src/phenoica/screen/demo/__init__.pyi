# The face of phenoica.screen.demo for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._design import gene_truth as gene_truth
from ._plates import simulate_screen as simulate_screen
from ._plates import write_demo_plate as write_demo_plate

__all__ = [
    "gene_truth",
    "simulate_screen",
    "write_demo_plate",
]
