"""What an MAE pretraining job reads: :class:`TrainOptions`, the ``train_mae`` rule's params and
the settings :func:`phenoica.models.train_mae` takes. Free of torch: the workflow imports it
when it builds the DAG."""

from __future__ import annotations

from typing import Annotated, Any, Mapping, NamedTuple

from phenoica.contract import Setting, stage_options
from phenoica.models._spec import training_spec


def entry_seed(entry: Mapping[str, Any]) -> int:
    """The seed of a ``models`` entry (added to the workflow's ``seed``)."""
    return int(entry["seed"])


@stage_options("train_mae")
class TrainOptions(NamedTuple):
    """How one model's MAE is trained: the config's ``train`` section, the device
    (``embed.device``), the part of the model's entry training depends on (``spec``:
    :func:`phenoica.models.training_spec`, so that changing how a model embeds never
    retrains it) and the seeds (:attr:`training_seed`).

    Build it with ``TrainOptions.from_config(validate_config({...}), model=NAME)``.
    """

    seed: Annotated[int, Setting("seed")]
    spec: Annotated[dict[str, Any], Setting("models.{model}", read=training_spec)]
    model_seed: Annotated[int, Setting("models.{model}", read=entry_seed)]
    steps: Annotated[int, Setting("train.steps")]
    batch_size: Annotated[int, Setting("train.batch_size")]
    lr: Annotated[float, Setting("train.lr")]
    weight_decay: Annotated[float, Setting("train.weight_decay")]
    warmup_steps: Annotated[int, Setting("train.warmup_steps")]
    mask_ratio: Annotated[float, Setting("train.mask_ratio")]
    norm_pix_loss: Annotated[bool, Setting("train.norm_pix_loss")]
    max_images: Annotated[int, Setting("train.max_images")]
    log_every: Annotated[int, Setting("train.log_every", run_time=True)]
    device: Annotated[str, Setting("embed.device")]

    @property
    def training_seed(self) -> int:
        """The seed of the model's training draws: the workflow's ``seed`` plus the entry's."""
        return int(self.seed) + int(self.model_seed)
