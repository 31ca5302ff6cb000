"""Where a screen comes from: the simulated demo screen (:mod:`.demo`), the user's image files,
OME-Zarr HCS plates and LoadData CSVs (:mod:`._images`, :mod:`._ome_zarr`, :mod:`._loaddata`, with
the plate map of :mod:`._plate_map`), embeddings and profile exports as Parquet, CSV / TSV or ``.h5ad`` in their own column
names (:mod:`._exports`, :mod:`._h5ad`), the
scenario inputs and the known-truth embedding screens (:mod:`.scenarios`, :mod:`.known_truth`),
and the image preprocessing every encoder's input goes through (:mod:`._preprocess`). What each
of the screen's jobs reads of the config: :mod:`._options`.

Its face (``__all__``) holds the options classes and the functions the jobs call
(``from phenoica.screen import ingest_image_plate``), each loaded from its module on first use,
so reading the options loads no torch. :mod:`.scenarios`, :mod:`.arrayed` and
:mod:`.known_truth` are command lines too (``python -m phenoica.screen.scenarios``)."""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_annotations": ["canonical_pairs", "complex_pairs", "load_sources", "read_annotation"],
        "_exports": [
            "NO_CONTROLS",
            "ROLES",
            "ExportSpec",
            "export_notes",
            "read_export",
            "file_rows",
            "parquet_source",
            "row_number",
        ],
        "_h5ad": ["h5ad_to_parquet", "read_h5ad_profiles"],
        "_images": ["discover_images", "image_plate_geometry", "ingest_image_plate"],
        "_loaddata": [
            "cached_table",
            "csv_paths",
            "ingest_loaddata_plate",
            "plate_geometry",
            "plate_inputs",
            "read_loaddata",
            "screen_wells",
        ],
        "_ome_zarr": ["hcs_plate_geometry", "ingest_ome_zarr_plate"],
        "_options": ["DemoOptions", "ImageIngestOptions", "LoadDataIngestOptions", "OmeZarrIngestOptions"],
        "_plate_map": ["read_plate_map", "validate_plate_map"],
        "_preprocess": ["EPS", "NORMALIZATIONS", "NORMALIZE_IMAGE", "dtype_max", "prepare", "scale_intensity"],
        "arrayed": [
            "ArrayedDesign",
            "PLATE_COLUMNS",
            "PLATE_ROWS",
            "POSITION_DESIGN",
            "screen_profiles",
            "well_position",
            "write_arrayed_screen",
        ],
        "known_truth": ["SCREENS", "VECTOR", "write_known_truth_screen"],
        "scenarios": ["SCENARIOS"],
    },
)
