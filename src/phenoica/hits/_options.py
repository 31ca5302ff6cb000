"""What the hit calls read: :class:`HitOptions`, the ``call_hits`` rule's params; the plate's
positions (:class:`PositionOptions`, rule ``plate_positions``) and the reference readout
(:class:`ReferenceOptions`, rule ``reference``)."""

from __future__ import annotations

from typing import Annotated, NamedTuple

from phenoica.classify import ClassifyOptions
from phenoica.contract import Setting, composed, stage_options


@stage_options("call_hits")
class HitOptions(NamedTuple):
    """The settings of the hit calls, built once from the validated config.

    ``null_model`` (``pareto``, ``parametric`` or ``empirical``) gives each guide's p-value against
    the pseudo-guides (``seed``: the draws of its Pareto tail's goodness-of-fit test), ``q_threshold`` the Benjamini-Hochberg q below which a guide, gene or control
    construct is called; ``n_null_guides`` 0 means no null, so no p-values and no calls
    (:attr:`with_null`).
    """

    null_model: Annotated[str, Setting("hits.null_model")]
    seed: Annotated[int, Setting("seed")]
    q_threshold: Annotated[float, Setting("hits.q_threshold")]
    n_null_guides: Annotated[int | str, Setting("classify.n_null_guides")]

    @property
    def with_null(self) -> bool:
        """Whether the screen has pseudo-guides, so p-values, q-values and calls (``auto`` always has)."""
        return self.n_null_guides != 0


@stage_options("plate_positions")
class PositionOptions(NamedTuple):
    """The settings of the plate's positions (:func:`phenoica.hits.plate_position_files`):
    the seed of the position summary's permutations, and the classifier null's layout setting and
    size (:func:`phenoica.classify.null_layout_choice` says which layout the null takes)."""

    seed: Annotated[int, Setting("seed")]
    null_layout: Annotated[str, Setting("classify.null_layout")]
    n_null_guides: Annotated[int | str, Setting("classify.n_null_guides")]


@stage_options("reference")
class ReferenceOptions(NamedTuple):
    """The settings of the reference readout (:func:`phenoica.hits.reference_files`): the
    declared reference (``screen.reference``), the classifiers' settings as the classify jobs read
    them (``classify``: their LightGBM parameters, rounds, the training and held-out rows a fold
    needs, the seed and the null's size, ``classify.n_null_guides`` null contrasts at most) and the
    q-value of the calls. The reference trains on every row of a contrast with one model per fold
    and no concentration models, so those settings of the classify jobs are fixed here and never
    rerun it."""

    reference: Annotated[dict[str, str] | None, Setting("screen.reference")]
    classify: Annotated[
        ClassifyOptions,
        # what the reference does not read is fixed (the values stand in for unread keys)
        composed(
            concentration=False,
            concentration_k=0.25,
            n_shards=1,
            protocol="exact",
            fast_train_controls=1,
            fast_fold_groups=1,
            fast_leaf="scaled",
            control_scope="fold",
            null_layout="plain",
        ),
    ]
    q_threshold: Annotated[float, Setting("hits.q_threshold")]
