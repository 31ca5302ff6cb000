"""What the disentangle study's jobs read of the config: one options class per rule (training,
evaluation, report), each a rule's params. Light on purpose (no torch): the rule file imports it
when the DAG is built. Which jobs exist (``disentangle.datasets``, ``models``, ``seeds``) is read
from the config when the DAG is built, not here."""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

from phenoica.contract import Setting, stage_options


@stage_options("disentangle_train")
class DisentangleTrainOptions(NamedTuple):
    """The settings of one training job (one (dataset, model, seed)):
    :func:`phenoica.studies.disentangle.load_dataset` and
    :func:`phenoica.studies.disentangle.train_and_encode`.

    The training run (``steps``, ``batch_size``, ``lr``, the network's ``latent_dim`` and
    ``width``, the torch ``device``), the losses' weights (``beta_vae_beta``, ``beta_tcvae_beta``,
    ``bioae_*``), the evaluation subset (``n_eval``, ``eval_seed``), the subset of a real dataset
    (``max_images``, ``data_seed``) and each dataset's own settings (:meth:`dataset_settings`).
    """

    latent_dim: Annotated[int, Setting("disentangle.latent_dim")]
    width: Annotated[float, Setting("disentangle.width")]
    steps: Annotated[int, Setting("disentangle.steps")]
    batch_size: Annotated[int, Setting("disentangle.batch_size")]
    lr: Annotated[float, Setting("disentangle.lr")]
    device: Annotated[str, Setting("disentangle.device")]
    beta_vae_beta: Annotated[float, Setting("disentangle.beta_vae_beta")]
    beta_tcvae_beta: Annotated[float, Setting("disentangle.beta_tcvae_beta")]
    bioae_nonneg: Annotated[float, Setting("disentangle.bioae_nonneg")]
    bioae_activity: Annotated[float, Setting("disentangle.bioae_activity")]
    bioae_weight: Annotated[float, Setting("disentangle.bioae_weight")]
    n_eval: Annotated[int, Setting("disentangle.n_eval")]
    eval_seed: Annotated[int, Setting("disentangle.eval_seed")]
    data_seed: Annotated[int, Setting("disentangle.data_seed")]
    max_images: Annotated[int | None, Setting("disentangle.max_images")]
    procedural: Annotated[dict[str, Any], Setting("disentangle.procedural")]
    scenes: Annotated[dict[str, Any], Setting("disentangle.scenes")]
    shapes3d: Annotated[dict[str, Any], Setting("disentangle.shapes3d")]
    mpi3d: Annotated[dict[str, Any], Setting("disentangle.mpi3d")]
    falcor3d: Annotated[dict[str, Any], Setting("disentangle.falcor3d")]
    isaac3d: Annotated[dict[str, Any], Setting("disentangle.isaac3d")]

    def dataset_settings(self, name: str) -> dict[str, Any]:
        """The settings of dataset ``name`` (config ``disentangle.<name>``)."""
        datasets = ("procedural", "scenes", "shapes3d", "mpi3d", "falcor3d", "isaac3d")
        if name not in datasets:
            raise ValueError(f"unknown dataset {name!r}; expected {', '.join(datasets)}")
        return getattr(self, name)


@stage_options("disentangle_evaluate")
class DisentangleEvaluateOptions(NamedTuple):
    """The settings of one evaluation job (:func:`phenoica.studies.disentangle.evaluate`):
    the AE + ICA transform (``ica_method``, ``ica_n_components``; None = the latent size) and the
    scores (``n_neighbors`` of the NMI estimator, ``infoe_max_iter`` of InfoE's regressions)."""

    ica_method: Annotated[str, Setting("disentangle.ica.method")]
    ica_n_components: Annotated[int | None, Setting("disentangle.ica.n_components")]
    n_neighbors: Annotated[int, Setting("disentangle.metrics.n_neighbors")]
    infoe_max_iter: Annotated[int, Setting("disentangle.metrics.infoe_max_iter")]


@stage_options("disentangle_report")
class DisentangleReportOptions(NamedTuple):
    """The training setup the study's page states (:func:`phenoica.studies.disentangle.write_report`)."""

    latent_dim: Annotated[int, Setting("disentangle.latent_dim")]
    steps: Annotated[int, Setting("disentangle.steps")]
    batch_size: Annotated[int, Setting("disentangle.batch_size")]
    lr: Annotated[float, Setting("disentangle.lr")]
    n_eval: Annotated[int, Setting("disentangle.n_eval")]
