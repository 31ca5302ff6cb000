"""Where a screen comes from: the simulated demo screen (:mod:`.demo`), the user's image files,
OME-Zarr HCS plates and LoadData CSVs (:mod:`.images`, :mod:`.ome_zarr`, :mod:`.loaddata`, with
the plate map of :mod:`.plate_map`), embeddings and profile exports as Parquet, CSV / TSV or ``.h5ad`` in their own column
names (:mod:`.exports`, :mod:`.h5ad`), the
scenario inputs and the known-truth embedding screens (:mod:`.scenarios`, :mod:`.known_truth`),
and the image preprocessing every encoder's input goes through (:mod:`.preprocess`). What each
of the screen's jobs reads of the config: :mod:`.options`.

The public API: the options classes (imported here: light, no torch) and the modules below,
each imported by name (``from phenoica.screen.images import ingest_image_plate``)."""

__all__ = [
    "annotations",
    "arrayed",
    "demo",
    "exports",
    "h5ad",
    "images",
    "known_truth",
    "loaddata",
    "ome_zarr",
    "options",
    "plate_map",
    "preprocess",
    "scenarios",
]
