"""Embedding post-processing: the four variants of the same embeddings, fitted once, re-applied.

Variants (Nelson et al., ICLR 2026, Tables 3, 4 and 6):

- ``base``: the embeddings as they are (identity; feature names kept, ``emb_*``).
- ``pca``: per-batch center-scale on controls (if ``center_scale``), then PCA whitening.
- ``pca_ica``: ``pca``, then an orthogonal ICA rotation (Picard-O by default, or FastICA).
- ``pca_rand``: ``pca``, then a seeded Haar-random orthogonal rotation (the "any rotation" control).

The three whitened variants share one center-scale and one whitening, so they differ only by
the final rotation. Whitened features are named ``comp_0000 ...``.

Modules, one job each:

- :mod:`~phenoica.variants.accumulators`: streaming statistics (moments, per-batch control
  moments, seeded row samples);
- :mod:`~phenoica.variants.components`: the rules that choose how many whitened components
  to keep (``transforms.n_components``; default ``deflated``);
- :mod:`~phenoica.variants.estimators`: ``CenterScale``, ``PCAWhitener`` (both with public
  ``partial_fit`` / ``finalize`` for streaming), ``ICARotation``, ``RandomRotation``;
- :mod:`~phenoica.variants.variant`: ``VariantTransform``, the chain of fitted steps;
- :mod:`~phenoica.variants.serialize`: the ``.npz`` + JSON format of a fitted transform;
- :mod:`~phenoica.variants.rows`: row blocks of a profile table;
- :mod:`~phenoica.variants.fit`: the streaming fit of every variant, from blocks, arrays or tables;
- :mod:`~phenoica.variants.apply`: a profile table through a fitted variant, row batch by row batch.
"""

from phenoica.variants.accumulators import BatchMoments, Moments, RowSample
from phenoica.variants.apply import apply_transform, apply_transform_file
from phenoica.variants.components import DEFAULT_RULE, NAMED_RULES, deflated_count, noise_edge
from phenoica.variants.estimators import (
    ICA_METHODS,
    CenterScale,
    ICARotation,
    PCAWhitener,
    RandomRotation,
    nearest_orthogonal,
    parallel_analysis,
)
from phenoica.variants.fit import (
    fit_transforms,
    fit_variants,
    fit_variants_streaming,
    transform_config,
    transform_defaults,
    variant_seeds,
)
from phenoica.variants.rows import Profiles, RowBlock
from phenoica.variants.serialize import FORMAT, FORMAT_VERSION
from phenoica.variants.variant import (
    COMPONENT_PREFIX,
    VARIANTS,
    WHITENED_VARIANTS,
    VariantTransform,
    component_name,
    load_transform,
)

__all__ = [
    "BatchMoments",
    "Moments",
    "RowSample",
    "apply_transform",
    "apply_transform_file",
    "ICA_METHODS",
    "CenterScale",
    "ICARotation",
    "PCAWhitener",
    "RandomRotation",
    "nearest_orthogonal",
    "parallel_analysis",
    "DEFAULT_RULE",
    "NAMED_RULES",
    "deflated_count",
    "noise_edge",
    "fit_transforms",
    "fit_variants",
    "fit_variants_streaming",
    "transform_config",
    "transform_defaults",
    "variant_seeds",
    "Profiles",
    "RowBlock",
    "FORMAT",
    "FORMAT_VERSION",
    "COMPONENT_PREFIX",
    "VARIANTS",
    "WHITENED_VARIANTS",
    "VariantTransform",
    "component_name",
    "load_transform",
]
