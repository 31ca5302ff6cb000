"""Identifiability: model-to-model alignment (statistical identifiability between two embeddings) (Nelson et al. 2026 Table 1).

Two models embed the same N images: ``A`` (N x Da) and ``B`` (N x Db); the dimensions may
differ. A map A -> B is estimated on a seeded training split of the images and scored on the
held-out images as

    error = mean over held-out rows i of ||f(a_i) - b_i||_2  /  diameter(B)

Every map is affine, ``f(a) = a @ coef_ + intercept_``, fitted on the training rows, with the
intercept chosen so that the map sends A's training mean to B's training mean:

- ``permutation`` (:class:`PermutationMap`): a signed matching of dimensions. The matching is
  the Hungarian assignment (scipy ``linear_sum_assignment``) on the absolute correlation of
  A's and B's training dimensions (``match="correlation"``, the default) or on the
  least-squares cost (``match="least_squares"``, the least-squares optimum of the class). No
  per-dimension scaling. When Da != Db, min(Da, Db) dimensions are matched; a B dimension left
  unmatched (Da < Db) is predicted by its training mean, an unmatched A dimension is unused.
- ``rigid`` (:class:`RigidMap`): orthogonal Procrustes after centering, ``R = U V^T`` from the
  thin SVD ``A_c^T B_c = U S V^T`` (as scipy ``orthogonal_procrustes`` does in the square
  case). For Da != Db, ``R`` is semi-orthogonal (Da x Db, rank min(Da, Db)): for Da <= Db it
  embeds A isometrically into B's space and the SVD solution is the least-squares optimum; for
  Da > Db (orthonormal columns: a projection then a rotation) the SVD solution is not the
  least-squares optimum, so it is refined by majorization (Kiers 1990), started from the better
  of the SVD solution and the least-squares signed permutation, which never increases the
  training error. ``scale=True`` adds one isotropic scale factor (least squares).
- ``linear`` (:class:`LinearMap`): least squares with intercept; ``ridge > 0`` adds
  ``ridge * ||W||_F^2`` (scikit-learn's ``Ridge(alpha=ridge)`` convention). Solved from the
  training cross-products in float64 (one pass over the data).
- ``ica`` (:class:`ICAMap`): ICA is fitted on A and on B separately, without the pairing
  (:class:`phenoica.transforms.PCAWhitener` + :class:`phenoica.transforms.ICARotation`);
  then only a signed permutation, matched on the training split by the absolute correlation
  of the two source sets, maps A's sources to B's sources, and the error is measured back in
  B's space through the inverse of B's ICA rotation and whitening. If B's whitening keeps
  k_B < Db components, the prediction lies in B's top-k_B principal subspace: the best that
  B's kept components can reconstruct, so the discarded variance counts as error. (Fewer
  components also drop A's noise directions, so on noisy data ICA can then beat the rigid
  map and its efficiency exceed 1.) Unmatched B sources (k_A < k_B) are predicted by their
  training mean, 0.

``ICA efficiency = (perm - ica) / (perm - rigid)``: the share of the permutation-to-rigid gap
that unsupervised ICA closes (NaN when perm == rigid).

Choices this module makes (the paper does not state them):

- The diameter is that of ALL of B's rows, not only the held-out ones: a property of model B,
  the same for every map and every training split. Exact (max pairwise distance) up to
  :data:`EXACT_DIAMETER_MAX_ROWS` rows, otherwise :func:`diameter_estimate`, a lower bound
  (a realized pairwise distance) within a few percent in our tests. A lower-bound diameter
  scales every error of a pair by the same factor, so ICA efficiency is unaffected.
- The training-split RMS errors ``rms_train_*`` are sqrt(mean over training rows of the
  squared l2 error) / diameter for the least-squares optimum of each nested class: the
  least-squares signed permutation (whatever ``permutation_match`` is), the fitted rigid map
  (exact optimum for Da <= Db; for Da > Db a majorized refinement that starts no worse than
  the permutation), and least squares with ridge 0. So ``linear <= rigid <= permutation``
  holds exactly (up to float rounding) on every input; on held-out data with the mean l2
  score that ordering is expected but not guaranteed.
- CKA and mutual kNN are symmetric similarities, not fitted maps: both use all rows; mutual
  kNN on a seeded subsample of at most ``knn_max_samples`` rows (neighbours found within the
  subsample) because it costs O(N^2).
- The same ``seed`` gives the same image split for every pair of models with the same N.

Modules: :mod:`._alignment` (the four alignment maps), :mod:`._diameter`,
:mod:`._representation_similarity` (CKA, mutual kNN), :mod:`._table1` (``align_errors``,
``alignment_table``, ``AlignOptions``), :mod:`._metrics` (MCC, R^2, InfoMEC),
:mod:`._branch` (the workflow's ``align`` and ``structural`` jobs on profile tables) and
:mod:`._options` (``Table1Options`` and ``StructuralOptions``: what those jobs read).
"""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_branch": ["alignment_files", "structural_files"],
        "_metrics": [
            "dci",
            "infomec",
            "linear_r2",
            "mcc",
            "probe_r2",
        ],
        "_options": ["StructuralOptions", "Table1Options"],
        "_table1": ["AlignOptions", "TABLE_COLUMNS", "align_errors", "split_rows"],
    },
)
