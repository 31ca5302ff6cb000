"""Embedding post-processing: variants of the same embeddings, fitted once, re-applied.

The variants (``phenoica.transforms.VARIANTS``; Nelson et al., ICLR 2026, Tables 3, 4 and 6):

- ``base``: the embeddings as they are (identity; feature names kept, ``emb_*``).
- ``pca``: per-batch center-scale on controls (if ``center_scale``), then PCA whitening.
- ``pca_ica``: ``pca``, then an orthogonal ICA rotation (Picard-O by default, or FastICA).
- ``pca_rand``: ``pca``, then a seeded Haar-random orthogonal rotation (the "any rotation" control).
- ``tvn``: ``pca``, then per-batch CORAL alignment on the controls (typical variation normalization).

The whitened variants share one center-scale and one whitening, so they differ only by the final
step. Whitened features are named ``comp_0000 ...``. The estimators follow the scikit-learn idiom
(hyper-parameters in ``__init__``, learned attributes end in ``_``, ``transform`` never refits).

Modules, one job each:

- :mod:`~phenoica.transforms._accumulators`: streaming statistics (moments, per-batch control
  moments, seeded row samples);
- :mod:`~phenoica.transforms._components`: the rules that choose how many whitened components
  to keep (``transforms.n_components``; default ``deflated``);
- :mod:`~phenoica.transforms._scaling`: the per-batch estimators fitted on controls,
  ``CenterScale`` (public ``partial_fit`` / ``finalize`` for streaming) and ``CoralAlignment``;
- :mod:`~phenoica.transforms._whitening`: ``PCAWhitener`` (streaming) and parallel analysis;
- :mod:`~phenoica.transforms._rotations`: ``ICARotation``, ``RandomRotation``;
- :mod:`~phenoica.transforms._solvers`: the solvers the rotations' fits call (picard, scikit-learn,
  ``scipy.stats``), imported by the fits alone;
- :mod:`~phenoica.transforms._estimator`: the estimator idiom the steps share, without scikit-learn,
  so that loading and applying a fitted transform imports none of the fitting libraries;
- :mod:`~phenoica.transforms._variant`: ``VariantTransform``, the chain of fitted steps;
- :mod:`~phenoica.transforms._serialize`: the ``.npz`` + JSON format of a fitted transform;
- :mod:`~phenoica.transforms._rows`: row blocks of a profile table;
- :mod:`~phenoica.transforms._fit`: the streaming fit of every variant, from blocks, arrays or tables;
- :mod:`~phenoica.transforms._apply`: a profile table through a fitted variant, row batch by row batch;
- :mod:`~phenoica.transforms._variant_names`: the variants' and components' names (no fitting library);
- :mod:`~phenoica.transforms._options`: ``TransformOptions`` (what a fit reads: the ``fit_transforms``
  job, and each point of the component sweep) and ``ApplyTransformOptions``.
"""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_apply": ["apply_transform", "apply_transform_file", "apply_transform_files"],
        "_fit": ["fit_transforms", "fit_variants"],
        "_options": ["ApplyTransformOptions", "TransformOptions"],
        "_rotations": ["ICARotation", "RandomRotation"],
        "_rows": ["column_values"],
        "_scaling": ["CenterScale"],
        "_variant": ["load_transform"],
        "_variant_names": ["VARIANTS", "WHITENED_VARIANTS", "component_name", "swept_variants"],
        "_whitening": ["PCAWhitener", "parallel_analysis"],
    },
)
