"""Where a screen comes from: the simulated demo screen (:mod:`.demo`), the user's image files,
OME-Zarr HCS plates and LoadData CSVs (:mod:`.images`, :mod:`.ome_zarr`, :mod:`.loaddata`, with
the plate map of :mod:`.plate_map`), embeddings as parquet or ``.h5ad`` (:mod:`.h5ad`), the
scenario inputs and the positive control (:mod:`.scenarios`, :mod:`.positive_control`), and the
image preprocessing every encoder's input goes through (:mod:`.preprocess`)."""
