"""What the transform jobs read: :class:`TransformOptions` (the ``fit_transforms`` rule's params,
and what :mod:`phenoica.transforms._fit` fits with) and :class:`ApplyTransformOptions` (the
``apply_transform`` rule's)."""

from __future__ import annotations

from typing import Annotated, NamedTuple

from phenoica.contract import Setting, stage_options


@stage_options("fit_transforms")
class TransformOptions(NamedTuple):
    """The settings of one model's fit of its variants, built once from the validated config.

    ``variants`` are the variants :func:`phenoica.transforms.fit_transforms` fits and saves;
    the center-scale (``center_scale``), the whitening (``fit_on``, ``n_components``: the component
    rule, :mod:`phenoica.transforms._components`; ``whiten_eps``, ``whiten_ridge``, ``parallel_max_samples``), the ICA
    rotation (``ica``, ``ica_max_iter``, ``ica_tol``, ``ica_max_samples``) and tvn's CORAL
    (``tvn_coral_eps``) are shared by every whitened variant; ``seed`` seeds every random choice
    (:func:`phenoica.transforms._fit.variant_seeds`). ``batch_rows`` bounds memory: run time only.
    """

    seed: Annotated[int, Setting("seed")]
    variants: Annotated[list[str], Setting("transforms.variants")]
    fit_on: Annotated[str, Setting("transforms.fit_on")]
    center_scale: Annotated[bool, Setting("transforms.center_scale")]
    n_components: Annotated[int | float | str, Setting("transforms.n_components")]
    whiten_eps: Annotated[float, Setting("transforms.whiten_eps")]
    whiten_ridge: Annotated[float, Setting("transforms.whiten_ridge")]
    ica: Annotated[str, Setting("transforms.ica")]
    ica_max_iter: Annotated[int, Setting("transforms.ica_max_iter")]
    ica_tol: Annotated[float, Setting("transforms.ica_tol")]
    ica_max_samples: Annotated[int | None, Setting("transforms.ica_max_samples")]
    parallel_max_samples: Annotated[int | None, Setting("transforms.parallel_max_samples")]
    tvn_coral_eps: Annotated[float, Setting("transforms.tvn_coral_eps")]
    batch_rows: Annotated[int, Setting("transforms.batch_rows", run_time=True)]


@stage_options("apply_transform")
class ApplyTransformOptions(NamedTuple):
    """The settings of one (model, variant) apply job: the rows per streamed batch (run time
    only; the fitted transform file holds everything its output depends on)."""

    batch_rows: Annotated[int, Setting("transforms.batch_rows", run_time=True)]
