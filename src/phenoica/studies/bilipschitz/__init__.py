"""Bi-Lipschitz control and identifiability (Nelson et al. 2026 Figure 2, A.3-A.6).

Claim reproduced: the closer an encoder is to an isometry (bi-Lipschitz constant L -> 1),
the more identifiable its representation across training runs (seeds).

Choices this module makes (the paper does not state them):

- **Activation parametrization.** Every hidden layer of the MLP autoencoder uses a leaky
  ReLU whose negative-side slope is ``1 - alpha`` (:func:`negative_slope`). ``alpha = 0``
  gives slope 1, the identity: the whole network is exactly linear (one constant Jacobian,
  so B(z) is the same for every sample). ``alpha = 1`` gives slope 0, a plain ReLU: the
  strongly nonlinear end. Figures are drawn against the measured constant, not only alpha.
- **Per-sample bi-Lipschitz estimate.** ``B(z) = s_max / s_min`` of the singular values of
  the encoder's Jacobian at a sample (``torch.func.vmap`` over ``torch.func.jacrev``; exact,
  not finite differences). The encoder maps R^D -> R^d with d < D, so the d singular values
  are those of the Jacobian restricted to its row space. For the isometric data-generating
  process the Jacobian is that of ``z -> encoder(g(z))`` (d x d), i.e. the encoder restricted
  to the data manifold's tangent space, since ``g`` is an isometry onto the manifold and the
  encoder's behaviour off the manifold is irrelevant. A singular Jacobian gives B = inf.
- **Identifiability error.** For every pair of seeds of one (dataset, alpha, group) the
  latents of the same samples are aligned with :func:`phenoica.identifiability.align_errors` (rigid and
  linear maps, fitted on a seeded training split, held-out mean l2 error / diameter, as in
  Table 1). Each pair is summarised with the mean of its two models' mean B and the larger
  of their max B.
- **Isometric data-generating process** (:func:`isometric_embed`): independent uniform
  latents z in [-1, 1]^d; each coordinate is bent onto a circular arc of radius
  ``1 / curvature`` parametrized by arc length, ``z_k -> (r sin(z_k / r), r (1 - cos(z_k / r)))``;
  the d arcs span orthogonal planes of R^{2d}, and a seeded matrix with orthonormal columns
  embeds R^{2d} in R^D. Its Jacobian has orthonormal columns at every z (a local isometry),
  chordal distances are ``sqrt(sum_k (2 r sin(|dz_k| / 2r))^2)`` and the geodesic distance
  on the manifold (a product of arcs) equals ``||z - z'||`` as long as every arc spans less
  than a full turn (``2 * curvature < 2 pi``).
- **Digit-specific models**: one model per digit class (group ``digit{k}``), trained and
  aligned on that class's images only; group ``all`` uses every class.

Modules: :mod:`._options` (what each rule reads of the config: ``BilipschitzTrainOptions``,
``BilipschitzGatherOptions``, ``BilipschitzReportOptions``), :mod:`._data` (datasets),
:mod:`._model` (autoencoders, training), :mod:`._measure` (bi-Lipschitz estimates, one job per
alpha, ``run_alpha``; the whole study in one process, ``run_sweep``), :mod:`._cross_seed` (cross-seed
errors, rank correlations), :mod:`._report` (figures, verdict, page). The face
(``__all__``) loads each name from its module on first use, so the rules read the options
without loading torch when the DAG is built.
"""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_cross_seed": ["gather_dataset"],
        "_measure": ["run_alpha", "run_sweep"],
        "_options": ["BilipschitzGatherOptions", "BilipschitzReportOptions", "BilipschitzTrainOptions"],
        "_report": ["write_report"],
    },
)
