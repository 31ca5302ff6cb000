# The face of phenoica.screen for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._annotations import canonical_pairs as canonical_pairs
from ._annotations import complex_pairs as complex_pairs
from ._annotations import load_sources as load_sources
from ._annotations import read_annotation as read_annotation
from ._exports import NO_CONTROLS as NO_CONTROLS
from ._exports import ROLES as ROLES
from ._exports import ExportSpec as ExportSpec
from ._exports import export_notes as export_notes
from ._exports import file_rows as file_rows
from ._exports import parquet_source as parquet_source
from ._exports import read_export as read_export
from ._exports import row_number as row_number
from ._h5ad import h5ad_to_parquet as h5ad_to_parquet
from ._h5ad import read_h5ad_profiles as read_h5ad_profiles
from ._images import discover_images as discover_images
from ._images import image_plate_geometry as image_plate_geometry
from ._images import ingest_image_plate as ingest_image_plate
from ._loaddata import cached_table as cached_table
from ._loaddata import csv_paths as csv_paths
from ._loaddata import ingest_loaddata_plate as ingest_loaddata_plate
from ._loaddata import plate_geometry as plate_geometry
from ._loaddata import plate_inputs as plate_inputs
from ._loaddata import read_loaddata as read_loaddata
from ._loaddata import screen_wells as screen_wells
from ._ome_zarr import hcs_plate_geometry as hcs_plate_geometry
from ._ome_zarr import ingest_ome_zarr_plate as ingest_ome_zarr_plate
from ._options import DemoOptions as DemoOptions
from ._options import ImageIngestOptions as ImageIngestOptions
from ._options import LoadDataIngestOptions as LoadDataIngestOptions
from ._options import OmeZarrIngestOptions as OmeZarrIngestOptions
from ._plate_map import read_plate_map as read_plate_map
from ._plate_map import validate_plate_map as validate_plate_map
from ._preprocess import EPS as EPS
from ._preprocess import NORMALIZATIONS as NORMALIZATIONS
from ._preprocess import NORMALIZE_IMAGE as NORMALIZE_IMAGE
from ._preprocess import dtype_max as dtype_max
from ._preprocess import prepare as prepare
from ._preprocess import scale_intensity as scale_intensity
from .arrayed import PLATE_COLUMNS as PLATE_COLUMNS
from .arrayed import PLATE_ROWS as PLATE_ROWS
from .arrayed import POSITION_DESIGN as POSITION_DESIGN
from .arrayed import ArrayedDesign as ArrayedDesign
from .arrayed import screen_profiles as screen_profiles
from .arrayed import well_position as well_position
from .arrayed import write_arrayed_screen as write_arrayed_screen
from .known_truth import SCREENS as SCREENS
from .known_truth import VECTOR as VECTOR
from .known_truth import write_known_truth_screen as write_known_truth_screen
from .scenarios import SCENARIOS as SCENARIOS

__all__ = [
    "ArrayedDesign",
    "cached_table",
    "canonical_pairs",
    "complex_pairs",
    "csv_paths",
    "DemoOptions",
    "discover_images",
    "dtype_max",
    "EPS",
    "export_notes",
    "ExportSpec",
    "file_rows",
    "h5ad_to_parquet",
    "hcs_plate_geometry",
    "image_plate_geometry",
    "ImageIngestOptions",
    "ingest_image_plate",
    "ingest_loaddata_plate",
    "ingest_ome_zarr_plate",
    "load_sources",
    "LoadDataIngestOptions",
    "NO_CONTROLS",
    "NORMALIZATIONS",
    "NORMALIZE_IMAGE",
    "OmeZarrIngestOptions",
    "parquet_source",
    "PLATE_COLUMNS",
    "plate_geometry",
    "plate_inputs",
    "PLATE_ROWS",
    "POSITION_DESIGN",
    "prepare",
    "read_annotation",
    "read_export",
    "read_h5ad_profiles",
    "read_loaddata",
    "read_plate_map",
    "ROLES",
    "row_number",
    "scale_intensity",
    "SCENARIOS",
    "screen_profiles",
    "screen_wells",
    "SCREENS",
    "validate_plate_map",
    "VECTOR",
    "well_position",
    "write_arrayed_screen",
    "write_known_truth_screen",
]
