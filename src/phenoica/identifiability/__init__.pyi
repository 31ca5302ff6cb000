# The face of phenoica.identifiability for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._branch import alignment_files as alignment_files
from ._branch import structural_files as structural_files
from ._metrics import dci as dci
from ._metrics import infomec as infomec
from ._metrics import linear_r2 as linear_r2
from ._metrics import mcc as mcc
from ._metrics import probe_r2 as probe_r2
from ._options import StructuralOptions as StructuralOptions
from ._options import Table1Options as Table1Options
from ._table1 import TABLE_COLUMNS as TABLE_COLUMNS
from ._table1 import AlignOptions as AlignOptions
from ._table1 import align_errors as align_errors
from ._table1 import split_rows as split_rows

__all__ = [
    "align_errors",
    "alignment_files",
    "AlignOptions",
    "dci",
    "infomec",
    "linear_r2",
    "mcc",
    "probe_r2",
    "split_rows",
    "structural_files",
    "StructuralOptions",
    "Table1Options",
    "TABLE_COLUMNS",
]
