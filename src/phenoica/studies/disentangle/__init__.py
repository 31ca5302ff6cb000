"""AE + ICA disentanglement benchmark (Nelson et al. 2026 Table 2), with the baselines trained in the same harness.

Models (:data:`MODELS`) share one convolutional encoder/decoder (the usual one of this
literature: 4x4 stride-2 convolutions halving the image down to 4x4, a 256-unit dense layer,
the latent; the decoder mirrors it and outputs Bernoulli logits) and one training loop (same
data, seeds, steps, batch size, Adam learning rate):

- ``ae``: reconstruction loss only (Bernoulli log-likelihood, summed over pixels).
- ``beta_vae``: reconstruction + ``beta`` x KL(q(z|x) || N(0, I)); latents = posterior means.
- ``beta_tcvae``: reconstruction + mutual information + ``beta`` x total correlation +
  dimension-wise KL (Chen et al. 2018), q(z) and prod_j q(z_j) estimated by minibatch-weighted
  sampling over the training set size; latents = posterior means.
- ``bioae``: the biologically-inspired AE of Whittington et al. (ICLR 2023). Our reading: a
  deterministic AE whose loss adds (i) a nonnegativity penalty ``sum_j relu(-z_j)^2``, (ii) an
  activity-energy penalty ``sum_j z_j^2`` (both averaged over the batch) and (iii) a
  weight-energy penalty, the summed squares of the decoder's weight matrices (biases excluded),
  each with its own coefficient; nonnegativity is the soft penalty (not a ReLU), so a latent
  can still be read as a signed value and no unit dies at initialization.

``ae_ica`` is not trained: the AE's latents are whitened with :class:`phenoica.transforms.PCAWhitener`
(``n_components`` = latent size unless configured) and rotated with
:class:`phenoica.transforms.ICARotation`, the same code as the screen's pca_ica variant. The
transform is unsupervised and is fitted on the evaluation latents themselves (no factor is used).

Scores per (dataset, model, seed) on a fixed seeded evaluation subset: InfoM, InfoE, InfoC
(:func:`phenoica.identifiability.infomec`, followed as defined even where it behaves oddly: InfoM/InfoC
are ratios of NMIs and stay high for noise latents; read them beside InfoE), MCC, mean linear
R^2 (in-sample) and DCI (:func:`phenoica.identifiability.dci`).

Modules: :mod:`._options` (what each rule reads of the config: ``DisentangleTrainOptions``,
``DisentangleEvaluateOptions``, ``DisentangleReportOptions``), :mod:`._data` (the factor
datasets), :mod:`._model` (networks, losses, training), :mod:`._evaluate` (scores of latents),
:mod:`._report` (tables, verdict, figures, page). The face (``__all__``) loads
each name from its module on first use, so the rules read the options without loading torch
when the DAG is built.
"""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_data": ["eval_index", "load_dataset", "procedural_dataset", "scenes_dataset"],
        "_evaluate": ["DISENTANGLE_SCORES", "derived_latents", "evaluate", "score_latents"],
        "_model": ["FactorAE", "build_model", "encode", "train_and_encode", "train_model"],
        "_options": ["DisentangleEvaluateOptions", "DisentangleReportOptions", "DisentangleTrainOptions"],
        "_report": ["verdict", "write_report"],
    },
)
