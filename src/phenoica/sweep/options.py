"""What the component sweep reads: :class:`SweepOptions`, the ``component_sweep`` rule's params."""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

from phenoica.classify.options import ClassifyOptions, model_parameters, run_time_parameters
from phenoica.contract.stage_options import Setting, stage_options
from phenoica.transforms.options import TransformOptions
from phenoica.transforms.variant_names import swept_variants


@stage_options("sweep_point", "component_sweep")
class SweepOptions(NamedTuple):
    """The settings of one model's component sweep, built once from the validated config.

    Each point is scored as the main run scores (:meth:`scoring`: the ``classify`` keys of
    :class:`~phenoica.classify.options.ClassifyOptions`, the mAP readout's ``map_null_size`` and ``map_max_null_size``, the
    hit calls' ``null_model``) and fitted as the main run fits (:meth:`transforms_at`: the
    ``transforms`` keys of :class:`~phenoica.transforms.options.TransformOptions`, at the point's
    component count); the fields share those classes' names and keys. ``variants`` are the swept
    ones of ``transforms.variants`` (:func:`~phenoica.transforms.variant_names.swept_variants`),
    ``points`` the grid's counts (``sweep.points``; 0 = no sweep), ``max_components`` its top
    (``sweep.max_components``; None = the width) and ``null_guides`` the
    pseudo-guides of each point's null (``sweep.null_guides``; :attr:`point_null_guides`). The hit
    counts use the sweep's own threshold :attr:`q_threshold` (no config key).

    Not read: ``transforms.n_components`` (each point sets its count; the chosen count comes from
    the fit report), ``classify.concentration`` (no point trains the concentration models),
    ``classify.n_shards`` (a point is scored as one shard; the main run's shards are the rule's
    inputs), ``classify.map_readout`` (the chosen point's mAP tables are inputs when it is on,
    computed here when off) and ``hits.q_threshold``.
    """

    seed: Annotated[int, Setting("seed")]
    # the classifiers and the readouts of every point: the main run's
    lightgbm: Annotated[dict[str, Any], Setting("classify.lightgbm", read=model_parameters)]
    lightgbm_run_time: Annotated[dict[str, Any], Setting("classify.lightgbm", run_time=True, read=run_time_parameters)]
    num_boost_round: Annotated[int, Setting("classify.num_boost_round")]
    concentration_k: Annotated[float, Setting("classify.concentration_k")]
    min_train_samples: Annotated[int, Setting("classify.min_train_samples")]
    min_test_samples: Annotated[int, Setting("classify.min_test_samples")]
    n_null_guides: Annotated[int, Setting("classify.n_null_guides")]
    protocol: Annotated[str, Setting("classify.protocol")]
    fast_train_controls: Annotated[int, Setting("classify.fast_train_controls")]
    fast_fold_groups: Annotated[int, Setting("classify.fast_fold_groups")]
    map_null_size: Annotated[int, Setting("classify.map_null_size")]
    map_max_null_size: Annotated[int, Setting("classify.map_max_null_size")]
    null_model: Annotated[str, Setting("hits.null_model")]
    null_layout: Annotated[str, Setting("classify.null_layout")]
    # the fit of every point but its component count: the main run's
    variants: Annotated[list[str], Setting("transforms.variants", read=swept_variants)]
    fit_on: Annotated[str, Setting("transforms.fit_on")]
    center_scale: Annotated[bool, Setting("transforms.center_scale")]
    whiten_eps: Annotated[float, Setting("transforms.whiten_eps")]
    ica: Annotated[str, Setting("transforms.ica")]
    ica_max_iter: Annotated[int, Setting("transforms.ica_max_iter")]
    ica_tol: Annotated[float, Setting("transforms.ica_tol")]
    ica_max_samples: Annotated[int | None, Setting("transforms.ica_max_samples")]
    parallel_max_samples: Annotated[int | None, Setting("transforms.parallel_max_samples")]
    tvn_coral_eps: Annotated[float, Setting("transforms.tvn_coral_eps")]
    batch_rows: Annotated[int, Setting("transforms.batch_rows", run_time=True)]
    # the grid and its null
    points: Annotated[int, Setting("sweep.points")]
    max_components: Annotated[int | None, Setting("sweep.max_components")]
    null_guides: Annotated[int | None, Setting("sweep.null_guides")]

    #: The q-value below which a point's guides, genes and mAPs are counted (the sweep's own).
    q_threshold = 0.1

    @property
    def point_null_guides(self) -> int:
        """Pseudo-guides of each point's null: ``sweep.null_guides``, at most the main run's
        ``classify.n_null_guides`` (all of them when unset)."""
        full = int(self.n_null_guides)
        return full if self.null_guides is None else min(full, int(self.null_guides))

    def scoring(self) -> ClassifyOptions:
        """The classification of every grid point: the main run's, without the concentration
        models (they change no AUROC), with the sweep's null (:attr:`point_null_guides`), every
        guide and pseudo-guide as one shard."""
        return ClassifyOptions(
            seed=self.seed,
            lightgbm=self.lightgbm,
            lightgbm_run_time=self.lightgbm_run_time,
            num_boost_round=self.num_boost_round,
            concentration=False,
            concentration_k=self.concentration_k,
            min_train_samples=self.min_train_samples,
            min_test_samples=self.min_test_samples,
            n_null_guides=self.point_null_guides,
            n_shards=1,
            protocol=self.protocol,
            fast_train_controls=self.fast_train_controls,
            fast_fold_groups=self.fast_fold_groups,
            null_layout=self.null_layout,
        )

    def transforms_at(self, n_components: int) -> TransformOptions:
        """The fit of the swept variants at one grid point's component count."""
        return TransformOptions(
            seed=self.seed,
            variants=list(self.variants),
            fit_on=self.fit_on,
            center_scale=self.center_scale,
            n_components=int(n_components),
            whiten_eps=self.whiten_eps,
            ica=self.ica,
            ica_max_iter=self.ica_max_iter,
            ica_tol=self.ica_tol,
            ica_max_samples=self.ica_max_samples,
            parallel_max_samples=self.parallel_max_samples,
            tvn_coral_eps=self.tvn_coral_eps,
            batch_rows=self.batch_rows,
        )
