"""Embedding post-processing: variants of the same embeddings, fitted once, re-applied.

The variants (``phenoica.transforms.variant_names.VARIANTS``; Nelson et al., ICLR 2026, Tables 3, 4 and 6):

- ``base``: the embeddings as they are (identity; feature names kept, ``emb_*``).
- ``pca``: per-batch center-scale on controls (if ``center_scale``), then PCA whitening.
- ``pca_ica``: ``pca``, then an orthogonal ICA rotation (Picard-O by default, or FastICA).
- ``pca_rand``: ``pca``, then a seeded Haar-random orthogonal rotation (the "any rotation" control).
- ``tvn``: ``pca``, then per-batch CORAL alignment on the controls (typical variation normalization).

The whitened variants share one center-scale and one whitening, so they differ only by the final
step. Whitened features are named ``comp_0000 ...``. The estimators follow the scikit-learn idiom
(hyper-parameters in ``__init__``, learned attributes end in ``_``, ``transform`` never refits).

Modules, one job each:

- :mod:`~phenoica.transforms.accumulators`: streaming statistics (moments, per-batch control
  moments, seeded row samples);
- :mod:`~phenoica.transforms.components`: the rules that choose how many whitened components
  to keep (``transforms.n_components``; default ``deflated``);
- :mod:`~phenoica.transforms.scaling`: the per-batch estimators fitted on controls,
  ``CenterScale`` (public ``partial_fit`` / ``finalize`` for streaming) and ``CoralAlignment``;
- :mod:`~phenoica.transforms.whitening`: ``PCAWhitener`` (streaming) and parallel analysis;
- :mod:`~phenoica.transforms.rotations`: ``ICARotation``, ``RandomRotation``;
- :mod:`~phenoica.transforms.solvers`: the solvers the rotations' fits call (picard, scikit-learn,
  ``scipy.stats``), imported by the fits alone;
- :mod:`~phenoica.transforms.estimator`: the estimator idiom the steps share, without scikit-learn,
  so that loading and applying a fitted transform imports none of the fitting libraries;
- :mod:`~phenoica.transforms.variant`: ``VariantTransform``, the chain of fitted steps;
- :mod:`~phenoica.transforms.serialize`: the ``.npz`` + JSON format of a fitted transform;
- :mod:`~phenoica.transforms.rows`: row blocks of a profile table;
- :mod:`~phenoica.transforms.fit`: the streaming fit of every variant, from blocks, arrays or tables;
- :mod:`~phenoica.transforms.apply`: a profile table through a fitted variant, row batch by row batch;
- :mod:`~phenoica.transforms.variant_names`: the variants' and components' names (no fitting library);
- :mod:`~phenoica.transforms.options`: ``TransformOptions`` (what a fit reads: the ``fit_transforms``
  job, and each point of the component sweep) and ``ApplyTransformOptions``.
"""

#: The modules the scripts, the other stages and the docs use (the accumulators and the file
#: format are the package's own).
__all__ = [
    "apply",
    "components",
    "fit",
    "options",
    "rotations",
    "rows",
    "scaling",
    "variant",
    "variant_names",
    "whitening",
]
