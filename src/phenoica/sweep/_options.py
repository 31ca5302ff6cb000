"""What the component sweep reads: :class:`SweepOptions`, the ``sweep_point`` and
``component_sweep`` rules' params."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, NamedTuple

from phenoica.classify import ClassifyOptions, MapReadoutOptions, null_guide_count
from phenoica.contract import Setting, composed, stage_options
from phenoica.hits import HitOptions
from phenoica.transforms import TransformOptions, swept_variants

if TYPE_CHECKING:
    import pandas as pd

#: The q-value below which a point's guides, genes and mAPs are counted: the sweep's own (no config key).
SWEEP_Q_THRESHOLD = 0.1


@stage_options("sweep_point", "component_sweep")
class SweepOptions(NamedTuple):
    """The settings of one model's component sweep, built once from the validated config.

    Each point is scored and fitted as the main run scores and fits: the sweep holds the main
    run's options, each built from the config by its own class, and fixes what it sets itself:

    - ``classify``: the classification (:class:`~phenoica.classify.ClassifyOptions`)
      without the concentration models (they change no AUROC), as one shard (a point scores
      every guide and pseudo-guide at once; the main run's shards are the rule's inputs);
      :meth:`scoring` gives it the sweep's null, :meth:`point_null_guides`;
    - ``transforms``: the fit (:class:`~phenoica.transforms.TransformOptions`), whose
      variant and component count each point sets (:meth:`transforms_at`; None here);
    - ``map``: the mAP readout (:class:`~phenoica.classify.MapReadoutOptions`) and
      ``hits``: the hit calls (:class:`~phenoica.hits.HitOptions`), both at the sweep's own
      threshold :data:`SWEEP_Q_THRESHOLD`, not ``hits.q_threshold``.

    The sweep's own settings: ``variants``, the swept ones of ``transforms.variants``
    (:func:`~phenoica.transforms.swept_variants`); ``points``, the grid's counts
    (``sweep.points``; 0 = no sweep); ``max_components``, its top (``sweep.max_components``; None
    = the width); ``null_guides``, the pseudo-guides of each point's null (``sweep.null_guides``;
    :meth:`point_null_guides`); ``max_genes``, the most perturbed genes whose guides a point
    scores (``sweep.max_genes``; None = every gene; :func:`phenoica.sweep.sweep_genes`);
    ``ica_max_samples``, the most rows a point's ICA is fitted on (``sweep.ica_max_samples``;
    None = the main fit's ``transforms.ica_max_samples``); ``ica_max_iter``, the most Picard
    iterations of a point's ICA (``sweep.ica_max_iter``; None = ``transforms.ica_max_iter``);
    ``map_max_null_size``, the most null draws a point's mAP readout refines a guide to
    (``sweep.map_max_null_size``; None = ``classify.map_max_null_size``; :meth:`point_map`);
    ``protocol``, the classification protocol of a point (``sweep.protocol``; None = the main run's
    ``classify.protocol``; :meth:`scoring`); ``fast_leaf``, ``classify.fast_leaf`` read a second
    time for the params alone (:meth:`depends_on`): the composed ``classify`` names it only under
    the main run's protocol, and a sweep may train under another.
    ``classify.map_readout`` is not read: the chosen point's mAP tables are the rule's inputs
    when it is on (the main run's draws), and computed here, as a point's, when it is off.
    """

    classify: Annotated[ClassifyOptions, composed(concentration=False, n_shards=1)]
    transforms: Annotated[TransformOptions, composed(variants=None, n_components=None)]
    # each point's mAP readout draws the random-rank null (phenoica.classify.guide_map)
    map: Annotated[MapReadoutOptions, composed(q_threshold=SWEEP_Q_THRESHOLD, map_null="random_rank")]
    hits: Annotated[HitOptions, composed(q_threshold=SWEEP_Q_THRESHOLD)]
    variants: Annotated[list[str], Setting("transforms.variants", read=swept_variants)]
    points: Annotated[int, Setting("sweep.points")]
    max_components: Annotated[int | None, Setting("sweep.max_components")]
    null_guides: Annotated[int | None, Setting("sweep.null_guides")]
    max_genes: Annotated[int | None, Setting("sweep.max_genes")]
    ica_max_samples: Annotated[int | None, Setting("sweep.ica_max_samples")]
    ica_max_iter: Annotated[int | None, Setting("sweep.ica_max_iter")]
    map_max_null_size: Annotated[int | None, Setting("sweep.map_max_null_size")]
    protocol: Annotated[str | None, Setting("sweep.protocol")]
    # the leaf the fast protocol trains with: in the params only where the sweep's protocol makes
    # it count and the main run's classification does not already name it (depends_on)
    fast_leaf: Annotated[str, Setting("classify.fast_leaf")]

    @property
    def seed(self) -> int:
        """The workflow's seed (``seed``), which every options object the sweep holds reads."""
        return self.classify.seed

    @property
    def q_threshold(self) -> float:
        """The q-value below which a point's guides, genes and mAPs are counted: :data:`SWEEP_Q_THRESHOLD`."""
        return self.hits.q_threshold

    def point_null_guides(self, table: pd.DataFrame) -> int:
        """Pseudo-guides of each point's null on the variant's ``table``: ``sweep.null_guides``, at
        most the main run's ``classify.n_null_guides`` as it resolves on the table (all of them
        when unset; :func:`phenoica.classify.null_guide_count`)."""
        full = null_guide_count(self.classify.n_null_guides, table)
        return full if self.null_guides is None else min(full, int(self.null_guides))

    @property
    def point_protocol(self) -> str:
        """The classification protocol of every grid point: ``protocol``, the main run's
        ``classify.protocol`` when None."""
        return self.classify.protocol if self.protocol is None else self.protocol

    def depends_on(self) -> tuple[str, ...]:
        """The fields the sweep's tables depend on: ``protocol`` only when set (None is the main
        run's, as before the key existed, so that a run made then does not rerun); ``fast_leaf``
        only where the points' protocol reads it and the main run's classification, held in
        ``classify``, does not already name it
        (:meth:`phenoica.classify.ClassifyOptions.depends_on`). No change of a point's scores
        leaves the params as they were; some changes that leave the scores alone still rerun the
        points, because ``classify`` is named as the main run reads it: its protocol, and its fast
        settings under ``fast``, even where the points train under ``exact``; and ``protocol`` set
        to the main run's own."""
        points = self.classify._replace(protocol=self.point_protocol)
        leaf = "fast_leaf" in points.depends_on() and "fast_leaf" not in self.classify.depends_on()
        left_out = {"protocol"} if self.protocol is None else set()
        if not leaf:
            left_out.add("fast_leaf")
        return tuple(f for f in self._fields if f not in left_out)

    def scoring(self, table: pd.DataFrame) -> ClassifyOptions:
        """The classification of every grid point on the variant's ``table``: the main run's,
        without the concentration models, as one shard, with the sweep's null
        (:meth:`point_null_guides`) and protocol (:attr:`point_protocol`)."""
        return self.classify._replace(n_null_guides=self.point_null_guides(table), protocol=self.point_protocol)

    def point_map(self) -> MapReadoutOptions:
        """The mAP readout of every grid point: the main run's, its sequential refinement of a guide
        near the cut stopped at ``map_max_null_size`` draws (the fewer of the sweep's and
        ``classify.map_max_null_size``; never below ``classify.map_null_size``, the first round)."""
        if self.map_max_null_size is None:
            return self.map
        cap = max(int(self.map.map_null_size), min(int(self.map.map_max_null_size), int(self.map_max_null_size)))
        return self.map._replace(map_max_null_size=cap)

    def transforms_at(self, n_components: int, variant: str) -> TransformOptions:
        """The fit of one grid point: the main run's fit of ``variant`` at ``n_components``, its
        ICA on at most ``ica_max_samples`` rows and ``ica_max_iter`` iterations (the fewer of the
        sweep's and the main fit's)."""
        rows = [n for n in (self.transforms.ica_max_samples, self.ica_max_samples) if n is not None]
        iters = int(self.transforms.ica_max_iter)
        if self.ica_max_iter is not None:
            iters = min(iters, int(self.ica_max_iter))
        return self.transforms._replace(
            variants=[variant],
            n_components=int(n_components),
            ica_max_samples=min(rows) if rows else None,
            ica_max_iter=iters,
        )
