"""What a classification job reads: :class:`ClassifyOptions`, the ``classify`` rule's params and
the settings :func:`phenoica.classify.classify_shard` takes, and the options of the
``map_readout`` and ``splits`` jobs.

Light on purpose (LightGBM only when the LightGBM parameters are read or built): a job unpickles
its options from this module, and the rule files import it when the DAG is built.
"""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

from phenoica.contract import Setting, stage_options


def model_parameters(given: dict[str, Any]) -> dict[str, Any]:
    """The LightGBM parameters of ``classify.lightgbm`` a model depends on (:func:`lightgbm_params`
    under LightGBM's canonical names), without the seed and the run-time keys."""
    from phenoica.classify._lightgbm_params import RUN_TIME_KEYS, lightgbm_params  # imports lightgbm: only here

    return {k: v for k, v in lightgbm_params(given, 0).items() if k not in RUN_TIME_KEYS and k != "seed"}


def run_time_parameters(given: dict[str, Any]) -> dict[str, Any]:
    """The LightGBM parameters of ``classify.lightgbm`` that change only speed or logs (threads, verbosity)."""
    from phenoica.classify._lightgbm_params import RUN_TIME_KEYS, lightgbm_params  # imports lightgbm: only here

    return {k: v for k, v in lightgbm_params(given, 0).items() if k in RUN_TIME_KEYS}


@stage_options("classify")
class ClassifyOptions(NamedTuple):
    """The settings of one classification job, built once from the validated config.

    ``lightgbm`` holds the LightGBM parameters the models depend on (Table 6 and
    ``classify.lightgbm`` under LightGBM's canonical names), ``lightgbm_run_time`` the threads
    and log level; :meth:`booster_params` joins them with the seed, which each (guide, fold)
    model replaces with its own. ``protocol`` is ``exact`` or ``fast``
    (:mod:`phenoica.classify._protocol`); the fast protocol's fold groups and training-control
    cap are read through :attr:`max_fold_groups` and :attr:`max_train_controls` (None under ``exact``),
    the leaf of its sampled training sets through :attr:`scale_leaf`. ``control_scope`` says which
    controls a guide is classified against: ``fold`` (every control of the fold) or ``plates``
    (those on its own plates: :func:`phenoica.classify._protocol.plate_trainings`).
    ``null_layout`` is the null's layout (:func:`phenoica.classify.null_layout_choice`), ``n_null_guides``
    its size, a count or ``auto`` (:func:`phenoica.classify.null_guide_count` resolves it on a table).
    """

    seed: Annotated[int, Setting("seed")]
    lightgbm: Annotated[dict[str, Any], Setting("classify.lightgbm", read=model_parameters)]
    lightgbm_run_time: Annotated[dict[str, Any], Setting("classify.lightgbm", run_time=True, read=run_time_parameters)]
    num_boost_round: Annotated[int, Setting("classify.num_boost_round")]
    concentration: Annotated[bool, Setting("classify.concentration")]
    concentration_k: Annotated[float, Setting("classify.concentration_k")]
    min_train_samples: Annotated[int, Setting("classify.min_train_samples")]
    min_test_samples: Annotated[int, Setting("classify.min_test_samples")]
    n_null_guides: Annotated[int | str, Setting("classify.n_null_guides")]
    n_shards: Annotated[int, Setting("classify.n_shards")]
    protocol: Annotated[str, Setting("classify.protocol")]
    fast_train_controls: Annotated[int, Setting("classify.fast_train_controls")]
    fast_fold_groups: Annotated[int, Setting("classify.fast_fold_groups")]
    fast_leaf: Annotated[str, Setting("classify.fast_leaf")]
    control_scope: Annotated[str, Setting("classify.control_scope")]
    null_layout: Annotated[str, Setting("classify.null_layout")]

    @property
    def max_train_controls(self) -> int | None:
        """Training controls per training set: ``fast_train_controls`` under ``fast``, None (all) under ``exact``."""
        return self.fast_train_controls if self.protocol == "fast" else None

    @property
    def max_fold_groups(self) -> int | None:
        """Training sets per guide: ``fast_fold_groups`` under ``fast``, None (one per fold) under ``exact``."""
        return self.fast_fold_groups if self.protocol == "fast" else None

    def depends_on(self) -> tuple[str, ...]:
        """The fields the scores depend on: all but ``fast_leaf`` where it changes nothing (under
        ``exact``) or is ``scaled``, the fast protocol as it was before the key existed, and but
        ``control_scope`` while it is ``fold``, the classification as it was before that key
        existed, so that none of them reruns a run made then; ``configured`` and ``plates`` are
        named, and rerun."""
        unnamed = {"fast_leaf"} if self.protocol == "exact" or self.scale_leaf else set()
        if self.control_scope == "fold":
            unnamed.add("control_scope")
        return tuple(f for f in self._fields if f not in unnamed)

    @property
    def scale_leaf(self) -> bool:
        """Whether a sampled training set's ``min_data_in_leaf`` is scaled by its share of the
        controls (``fast_leaf: scaled``) or kept as configured (``configured``)."""
        return self.fast_leaf == "scaled"

    def booster_params(self) -> dict[str, Any]:
        """LightGBM's parameters for :func:`lightgbm.train`: the model and run-time keys, and the seed."""
        from phenoica.classify._lightgbm_params import lightgbm_params  # imports lightgbm: only here

        return lightgbm_params({**self.lightgbm, **self.lightgbm_run_time}, self.seed)


@stage_options("map_readout")
class MapReadoutOptions(NamedTuple):
    """The settings of one mAP readout job (:func:`phenoica.classify.guide_map`):
    the seed, copairs' first-pass draws and the most draws a guide near the cut gets, and the
    q-value threshold of the calls, near which the draws are spent
    (:func:`phenoica.classify.settled_null_counts`), and which null (``random_rank`` or
    ``within_plate``: :func:`phenoica.classify.permuted_null_counts`); and the most constructs and
    wells its replicate retrieval ranks (:func:`phenoica.classify.guide_retrieval`)."""

    seed: Annotated[int, Setting("seed")]
    map_null_size: Annotated[int, Setting("classify.map_null_size")]
    map_max_null_size: Annotated[int, Setting("classify.map_max_null_size")]
    q_threshold: Annotated[float, Setting("hits.q_threshold")]
    retrieval_max_guides: Annotated[int, Setting("classify.retrieval_max_guides")]
    retrieval_max_wells: Annotated[int, Setting("classify.retrieval_max_wells")]
    map_null: Annotated[str, Setting("classify.map_null")]


@stage_options("splits")
class SplitOptions(NamedTuple):
    """The settings of one model's folds (:func:`phenoica.classify.make_folds`).

    ``scheme`` is ``leave_one_batch_out`` (one fold per batch: it draws nothing, so it reads
    nothing else, :meth:`depends_on`) or ``in_distribution`` (``n_folds`` seeded holdouts of
    ``holdout_fraction`` of each batch's wells).
    """

    scheme: Annotated[str, Setting("splits.scheme")]
    holdout_fraction: Annotated[float, Setting("splits.holdout_fraction")]
    n_folds: Annotated[int, Setting("splits.n_folds")]
    seed: Annotated[int, Setting("seed")]

    def depends_on(self) -> tuple[str, ...]:
        """The fields the folds depend on: the scheme alone under leave-one-batch-out, every field otherwise."""
        return ("scheme",) if self.scheme == "leave_one_batch_out" else self._fields
