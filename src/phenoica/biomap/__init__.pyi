# The face of phenoica.biomap for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._aggregate import aggregate_profiles as aggregate_profiles
from ._aggregate import profile_files as profile_files
from ._batch_metrics import batch_classifier as batch_classifier
from ._batch_metrics import batch_metrics as batch_metrics
from ._batch_metrics import batch_metrics_files as batch_metrics_files
from ._batch_metrics import well_profile_table as well_profile_table
from ._gene_map import MAP_TABLES as MAP_TABLES
from ._gene_map import TRUTH_SOURCE as TRUTH_SOURCE
from ._gene_map import MapFiles as MapFiles
from ._gene_map import MapInputs as MapInputs
from ._gene_map import gene_map as gene_map
from ._gene_map import gene_map_files as gene_map_files
from ._gene_similarity import nearest_neighbors as nearest_neighbors
from ._gene_similarity import similarity_matrix as similarity_matrix
from ._gene_similarity import unit_rows as unit_rows
from ._options import BatchMetricsOptions as BatchMetricsOptions
from ._options import GeneMapOptions as GeneMapOptions
from ._options import ProfileOptions as ProfileOptions
from ._recall import relationship_recall as relationship_recall

__all__ = [
    "aggregate_profiles",
    "batch_classifier",
    "batch_metrics",
    "batch_metrics_files",
    "BatchMetricsOptions",
    "gene_map",
    "gene_map_files",
    "GeneMapOptions",
    "MAP_TABLES",
    "MapFiles",
    "MapInputs",
    "nearest_neighbors",
    "profile_files",
    "ProfileOptions",
    "relationship_recall",
    "similarity_matrix",
    "TRUTH_SOURCE",
    "unit_rows",
    "well_profile_table",
]
