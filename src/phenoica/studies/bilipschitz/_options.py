"""What the bilipschitz study's jobs read of the config: one options class per rule (training,
gather, report), each a rule's params. Light on purpose (no torch): the rule file imports it when
the DAG is built. Which jobs exist (``bilipschitz.datasets``, ``alphas``, ``per_digit``) is read
from the config when the DAG is built, not here."""

from __future__ import annotations

from typing import Annotated, NamedTuple

from phenoica.contract import Setting, stage_options


@stage_options("bilipschitz_train")
class BilipschitzTrainOptions(NamedTuple):
    """The settings of one training job (every seed of one (dataset, group, alpha)):
    :func:`phenoica.studies.bilipschitz.run_alpha`.

    ``seed``: the workflow seed, which seeds the samples' subsample and the isometric process;
    ``seeds``: the training seeds; the autoencoders' shape (``latent_dim``, ``hidden``,
    ``parametrization``; the isometric dataset's latent size is ``isometric_latent_dim``), the
    optimizer's run and early stopping, the torch ``device``, the samples per model, the
    Jacobian subsample, the MNIST file and the isometric process (``isometric_*``).
    ``n_bootstrap`` is the report's (:class:`BilipschitzReportOptions`); a change of it reruns
    training too.
    """

    seed: Annotated[int, Setting("seed")]
    seeds: Annotated[list[int], Setting("bilipschitz.seeds")]
    parametrization: Annotated[str, Setting("bilipschitz.parametrization")]
    n_samples: Annotated[int, Setting("bilipschitz.n_samples")]
    latent_dim: Annotated[int, Setting("bilipschitz.latent_dim")]
    hidden: Annotated[list[int], Setting("bilipschitz.hidden")]
    epochs: Annotated[int, Setting("bilipschitz.epochs")]
    converge_tol: Annotated[float, Setting("bilipschitz.converge_tol")]
    converge_window: Annotated[int, Setting("bilipschitz.converge_window")]
    batch_size: Annotated[int, Setting("bilipschitz.batch_size")]
    lr: Annotated[float, Setting("bilipschitz.lr")]
    max_jacobian_samples: Annotated[int, Setting("bilipschitz.max_jacobian_samples")]
    n_bootstrap: Annotated[int, Setting("bilipschitz.n_bootstrap")]
    device: Annotated[str, Setting("bilipschitz.device")]
    mnist_path: Annotated[str | None, Setting("bilipschitz.mnist_path")]
    isometric_latent_dim: Annotated[int, Setting("bilipschitz.isometric.latent_dim")]
    isometric_ambient_dim: Annotated[int, Setting("bilipschitz.isometric.ambient_dim")]
    isometric_curvature: Annotated[float, Setting("bilipschitz.isometric.curvature")]


@stage_options("bilipschitz_gather")
class BilipschitzGatherOptions(NamedTuple):
    """The settings of one dataset's gather (:func:`phenoica.studies.bilipschitz.gather_dataset`):
    the share of samples the maps between seeds are fitted on, and the seed of that split."""

    seed: Annotated[int, Setting("seed")]
    train_fraction: Annotated[float, Setting("bilipschitz.train_fraction")]


@stage_options("bilipschitz_report")
class BilipschitzReportOptions(NamedTuple):
    """The settings of the study's page (:func:`phenoica.studies.bilipschitz.write_report`):
    the bootstrap replicates of each Spearman interval and their seed."""

    seed: Annotated[int, Setting("seed")]
    n_bootstrap: Annotated[int, Setting("bilipschitz.n_bootstrap")]
