# The face of phenoica.embed for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._chunks import TIMING_KEY as TIMING_KEY
from ._chunks import EmbedTiming as EmbedTiming
from ._groups import PlateJob as PlateJob
from ._groups import check_group_channels as check_group_channels
from ._groups import embed_groups as embed_groups
from ._jobs import EmbedJob as EmbedJob
from ._jobs import embed_model_plates as embed_model_plates
from ._options import EmbedOptions as EmbedOptions
from ._parts import embedding_metadata as embedding_metadata
from ._plate import PlateModel as PlateModel
from ._plate import embed_plate as embed_plate

__all__ = [
    "check_group_channels",
    "embed_groups",
    "embed_model_plates",
    "embed_plate",
    "embedding_metadata",
    "EmbedJob",
    "EmbedOptions",
    "EmbedTiming",
    "PlateJob",
    "PlateModel",
    "TIMING_KEY",
]
