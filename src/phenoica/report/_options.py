"""What the report reads of the config: :class:`ReportOptions`, the ``report`` rule's params, and
the gallery's part of it (:class:`GalleryOptions`).

Light on purpose (no pandas, no plotting, LightGBM only when the options are built): the rule
file imports it when the DAG is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, NamedTuple, Sequence

from phenoica.contract import Setting, stage_options


def lightgbm_table_params(given: dict[str, Any]) -> dict[str, Any]:
    """The LightGBM parameters of ``classify.lightgbm`` every classifier used, as the report's
    table shows them (:func:`phenoica.classify.lightgbm_report_params`: canonical
    names, without the seed and the keys that change only speed or logs)."""
    from phenoica.classify import lightgbm_report_params  # imports lightgbm: only here

    return lightgbm_report_params(given)


@dataclass(frozen=True)
class GalleryOptions:
    """What the hit gallery shows (:mod:`phenoica.report._gallery`): images per guide
    (``sites_per_guide``) and control images per gene (``control_sites``), the per-channel display
    range (``percentiles``), the side of a tile (``tile_px``), the genes shown beside the hits
    (``genes``), the channels of the composite (``composite``; None: every channel but
    brightfield) and the ``seed`` of the tie-break. Built by :attr:`ReportOptions.gallery`."""

    sites_per_guide: int
    control_sites: int
    percentiles: tuple[float, float]
    tile_px: int
    genes: tuple[str, ...]
    composite: tuple[str, ...] | None
    seed: int


@stage_options("report")
class ReportOptions(NamedTuple):
    """The settings of the report job, built once from the validated config.

    ``q_threshold``: the hit calls' q threshold; ``seed``: the seed of the bootstrap intervals and
    of the gallery's tie-break; ``lightgbm``: the LightGBM parameters table
    (:func:`lightgbm_table_params`); ``source``: where the screen came from (no pixels for
    ``embeddings``); ``channels``: the channels' display names and colours; the ``gallery_*``
    fields and those of :class:`GalleryOptions`: the hit gallery (config ``gallery``); the
    annotation sources of the interactive page (config ``biomap``: :attr:`annotation_sources`).
    """

    q_threshold: Annotated[float, Setting("hits.q_threshold")]
    seed: Annotated[int, Setting("seed")]
    lightgbm: Annotated[dict[str, Any], Setting("classify.lightgbm", read=lightgbm_table_params)]
    source: Annotated[str, Setting("screen.source")]
    channels: Annotated[dict[str, Any], Setting("channels")]
    gallery_enabled: Annotated[bool, Setting("gallery.enabled")]
    gallery_model: Annotated[str | None, Setting("gallery.model")]
    gallery_genes: Annotated[list[str], Setting("gallery.genes")]
    sites_per_guide: Annotated[int, Setting("gallery.sites_per_guide")]
    control_sites: Annotated[int, Setting("gallery.control_sites")]
    percentiles: Annotated[list[float], Setting("gallery.percentiles")]
    tile_px: Annotated[int, Setting("gallery.tile_px")]
    composite: Annotated[list[str] | None, Setting("gallery.composite")]
    builtin_corum: Annotated[bool, Setting("biomap.builtin_corum")]
    efaar_sources: Annotated[list[str], Setting("biomap.efaar_sources")]
    efaar_wheel: Annotated[str | None, Setting("biomap.efaar_wheel")]
    annotations: Annotated[dict[str, str], Setting("biomap.annotations")]

    @property
    def gallery(self) -> GalleryOptions:
        """What the hit gallery shows."""
        lo, hi = self.percentiles
        return GalleryOptions(
            sites_per_guide=int(self.sites_per_guide),
            control_sites=int(self.control_sites),
            percentiles=(float(lo), float(hi)),
            tile_px=int(self.tile_px),
            genes=tuple(str(g) for g in self.gallery_genes),
            composite=None if self.composite is None else tuple(str(c) for c in self.composite),
            seed=int(self.seed),
        )

    @property
    def gallery_reads_pixels(self) -> bool:
        """Whether the gallery reads images: it is on and the source has pixels (not embeddings)."""
        return bool(self.gallery_enabled) and self.source != "embeddings"

    def gallery_model_of(self, models: Sequence[str]) -> str:
        """The model whose image embeddings choose the gallery's images: ``gallery.model``, else
        the first of ``models`` by name; a model the run lacks is an error naming the run's models."""
        model = self.gallery_model or sorted(models)[0]
        if model not in models:
            raise ValueError(f"config gallery.model: {model!r} is not a model of this run; models are {sorted(models)}")
        return str(model)

    @property
    def annotation_sources(self) -> dict[str, Any]:
        """The ``biomap`` keys naming the annotation sources, as
        :func:`phenoica.screen.load_sources` reads them."""
        return {
            "annotations": self.annotations,
            "builtin_corum": self.builtin_corum,
            "efaar_sources": self.efaar_sources,
            "efaar_wheel": self.efaar_wheel,
        }
