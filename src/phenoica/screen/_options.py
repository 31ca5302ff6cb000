"""What the screen's jobs read: the demo screen's settings (:class:`DemoOptions`, rules
``simulate_truth`` and ``simulate_plate``) and how the user's images become plate stores
(:class:`ImageIngestOptions`, :class:`OmeZarrIngestOptions`, :class:`LoadDataIngestOptions`).
Each is a rule's params and what its script hands to the library; built once from the
validated config (``DemoOptions.from_config(validate_config({...}))``)."""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

from phenoica.contract import Setting, demo_plates, stage_options


@stage_options("simulate_truth", "simulate_plate")
class DemoOptions(NamedTuple):
    """The demo screen (:mod:`phenoica.screen.demo`): its size, design, rendering and nuisance.

    A plate depends on the seed and the ``demo`` keys, but not on how many batches and plates
    the screen has (``n_batches``, ``plates_per_batch``: which jobs exist) nor on the Zarr chunk
    length (``chunk_images``), so adding plates leaves the existing ones alone.
    """

    seed: Annotated[int, Setting("seed")]
    n_batches: Annotated[int, Setting("demo.n_batches", run_time=True)]
    plates_per_batch: Annotated[int, Setting("demo.plates_per_batch", run_time=True)]
    n_genes: Annotated[int, Setting("demo.n_genes")]
    n_null_genes: Annotated[int, Setting("demo.n_null_genes")]
    guides_per_gene: Annotated[int, Setting("demo.guides_per_gene")]
    control_wells_per_plate: Annotated[int, Setting("demo.control_wells_per_plate")]
    wells_per_guide_per_plate: Annotated[int, Setting("demo.wells_per_guide_per_plate")]
    sites_per_well: Annotated[int, Setting("demo.sites_per_well")]
    image_size: Annotated[int, Setting("demo.image_size")]
    channels: Annotated[list[str], Setting("demo.channels")]
    cells_per_image: Annotated[float, Setting("demo.cells_per_image")]
    n_factors: Annotated[int, Setting("demo.n_factors")]
    factors_per_gene: Annotated[int, Setting("demo.factors_per_gene")]
    n_complexes: Annotated[int, Setting("demo.n_complexes")]
    genes_per_complex: Annotated[int, Setting("demo.genes_per_complex")]
    effect_size: Annotated[float, Setting("demo.effect_size")]
    guide_efficacy: Annotated[list[float], Setting("demo.guide_efficacy")]
    batch_strength: Annotated[float, Setting("demo.batch_strength")]
    noise: Annotated[float, Setting("demo.noise")]
    dtype: Annotated[str, Setting("demo.dtype")]
    chunk_images: Annotated[int, Setting("demo.chunk_images", run_time=True)]

    def plates(self) -> list[tuple[str, str]]:
        """(batch, plate) names of the screen, in order (:func:`phenoica.contract.demo_plates`)."""
        return demo_plates({"n_batches": self.n_batches, "plates_per_batch": self.plates_per_batch})


@stage_options("ingest_images")
class ImageIngestOptions(NamedTuple):
    """How a plate's image files are found and stored (:func:`phenoica.screen.ingest_image_plate`):
    the folder ``images_dir``, the file-name ``pattern`` below it (fields {plate}, {well}, {site},
    {channel}), the ``channels`` in the order the store keeps them (None = every channel value
    found, natural order; files of channels not listed are ignored) and the Zarr chunk length
    ``chunk_images`` of the written store."""

    images_dir: Annotated[str | None, Setting("screen.images_dir")]
    pattern: Annotated[str, Setting("screen.image_pattern")]
    channels: Annotated[list[str] | None, Setting("screen.channels")]
    chunk_images: Annotated[int, Setting("screen.chunk_images", run_time=True)]


@stage_options("ingest_ome_zarr")
class OmeZarrIngestOptions(NamedTuple):
    """How an OME-Zarr HCS plate is stored (:func:`phenoica.screen.ingest_ome_zarr_plate`):
    the Zarr chunk length ``chunk_images`` of the written store."""

    chunk_images: Annotated[int, Setting("screen.chunk_images", run_time=True)]


@stage_options("ingest_loaddata")
class LoadDataIngestOptions(NamedTuple):
    """How a plate of CellProfiler LoadData CSVs is read and stored
    (:func:`phenoica.screen.ingest_loaddata_plate`): the CSV(s) ``loaddata`` (a path,
    a glob or a list), the ``channels`` to take (None = every ``FileName_*`` column; a list, or a
    mapping LoadData name -> screen name), whether to divide by the ``illum`` functions, and the
    Zarr chunk length ``chunk_images`` of the written store."""

    loaddata: Annotated[Any, Setting("screen.loaddata")]
    channels: Annotated[Any, Setting("screen.loaddata_channels")]
    illum: Annotated[bool, Setting("screen.loaddata_illum")]
    chunk_images: Annotated[int, Setting("screen.chunk_images", run_time=True)]
