# The face of phenoica.studies.bilipschitz for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._cross_seed import gather_dataset as gather_dataset
from ._measure import run_alpha as run_alpha
from ._measure import run_sweep as run_sweep
from ._options import BilipschitzGatherOptions as BilipschitzGatherOptions
from ._options import BilipschitzReportOptions as BilipschitzReportOptions
from ._options import BilipschitzTrainOptions as BilipschitzTrainOptions
from ._report import write_report as write_report

__all__ = [
    "BilipschitzGatherOptions",
    "BilipschitzReportOptions",
    "BilipschitzTrainOptions",
    "gather_dataset",
    "run_alpha",
    "run_sweep",
    "write_report",
]
