"""What the biomap jobs read: :class:`ProfileOptions` (rule ``biomap_profiles``),
:class:`GeneMapOptions` (rule ``biomap``) and :class:`BatchMetricsOptions` (rule
``batch_metrics``), each the rule's params."""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

from phenoica.contract import Setting, stage_options


@stage_options("biomap_profiles")
class ProfileOptions(NamedTuple):
    """The settings of one (model, variant)'s guide and gene profiles: ``center_on_controls``
    subtracts each batch's control mean before averaging."""

    center_on_controls: Annotated[bool, Setting("biomap.center_on_controls")]


@stage_options("biomap")
class GeneMapOptions(NamedTuple):
    """The settings of one (model, variant)'s gene map, built once from the validated config.

    ``genes`` (``active`` or ``all``) chooses the map's genes; ``n_neighbors`` neighbours are
    listed per gene and per guide; a source knowing fewer than ``min_entities`` of the map's
    genes is skipped, the others recalled at each (lower, upper) quantile pair of
    ``recall_thresholds``; the annotation sources are ``builtin_corum``, ``efaar_sources`` (read
    from ``efaar_wheel`` or the installed package) and ``annotations`` (name -> file:
    :meth:`annotation_sources`); guide consistency's null holds ``consistency_null_size`` guide
    sets; the heatmap shows at most ``heatmap_max_genes`` genes. ``block_rows`` (run time: memory
    only) is the genes per block of the similarity computations.
    """

    seed: Annotated[int, Setting("seed")]
    genes: Annotated[str, Setting("biomap.genes")]
    n_neighbors: Annotated[int, Setting("biomap.n_neighbors")]
    recall_thresholds: Annotated[list[list[float]], Setting("biomap.recall_thresholds")]
    min_entities: Annotated[int, Setting("biomap.min_entities")]
    builtin_corum: Annotated[bool, Setting("biomap.builtin_corum")]
    efaar_sources: Annotated[list[str], Setting("biomap.efaar_sources")]
    efaar_wheel: Annotated[str | None, Setting("biomap.efaar_wheel")]
    annotations: Annotated[dict[str, str], Setting("biomap.annotations")]
    consistency_null_size: Annotated[int, Setting("biomap.consistency_null_size")]
    heatmap_max_genes: Annotated[int, Setting("biomap.heatmap_max_genes")]
    block_rows: Annotated[int, Setting("biomap.block_rows", run_time=True)]

    def annotation_sources(self) -> dict[str, Any]:
        """The annotation settings, keyed as :func:`phenoica.screen.load_sources` reads them."""
        return {
            "builtin_corum": self.builtin_corum,
            "efaar_sources": self.efaar_sources,
            "efaar_wheel": self.efaar_wheel,
            "annotations": self.annotations,
        }


@stage_options("batch_metrics")
class BatchMetricsOptions(NamedTuple):
    """The settings of one (model, variant)'s batch-mixing scores: ``batch_neighbors`` is the k of
    iLISI, at most ``batch_max_samples`` well profiles (seeded subsample) enter."""

    seed: Annotated[int, Setting("seed")]
    batch_neighbors: Annotated[int, Setting("biomap.batch_neighbors")]
    batch_max_samples: Annotated[int, Setting("biomap.batch_max_samples")]
