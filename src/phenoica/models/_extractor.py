"""The one declared interface between a model and the stages that feed it (embed, validate).

:class:`Extractor` is what a feature extractor declares: the channel count it takes
(``in_chans``, None = any count up to ``max_in_chans``), its features per crop
(``feature_dim``, or :meth:`Extractor.output_dim` for a channel count), the crop side it takes
(``img_size``), its preprocessing (``normalize``), a shape check that needs no forward pass
(:meth:`Extractor.check`), its feature names and the options recorded with its embeddings.
:class:`phenoica.models.FeatureExtractor` implements it.

:class:`ModelInputs` is what the embed and validate stages read of any model, declared
(an :class:`Extractor`) or not (a bare timm model or a test double, described once here from
what torch and timm declare); :func:`check_fit` is the plate/model fit check both stages call
(image size against the crop, the channels fed against the model's), and :class:`Misfit` words
its finding for an embedding job (:meth:`Misfit.plate_message`) or for the check of the whole
screen (:meth:`Misfit.screen_message`). :func:`probe_feature_dim` gives the features per crop
(declared, or from one zero crop). Which of a plate's channels a model is fed is
:func:`phenoica.contract.channel_indices`.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

import torch
from torch import nn

from phenoica.contract import ScreenError
from phenoica.models._vit import shares_channels


class Extractor(nn.Module):
    """A feature extractor's declared interface: normalized crops (B, C, s, s) -> float32 (B, F).

    Attributes: ``in_chans`` (the channel count it takes; None = any count up to
    ``max_in_chans``), ``max_in_chans`` (None = no limit), ``feature_dim`` (features per crop;
    None when it depends on the channel count, see :meth:`output_dim`), ``img_size`` (the crop
    side it takes) and ``normalize`` (its preprocessing, :mod:`phenoica.screen._preprocess`).
    """

    in_chans: int | None
    max_in_chans: int | None
    feature_dim: int | None
    img_size: int
    normalize: str

    def check(self, x: torch.Tensor) -> None:
        """ScreenError unless crops of ``x``'s shape fit (only the shape is read: a meta tensor will do)."""
        raise NotImplementedError

    def output_dim(self, n_chans: int) -> int:
        """Features per crop of ``n_chans`` channels, without a forward pass."""
        raise NotImplementedError

    def feature_names(self, channels: Sequence[str]) -> list[str]:
        """Column names of the features for crops of these channels (in the order given)."""
        raise NotImplementedError

    def options(self) -> dict[str, Any]:
        """The embedding options, as recorded in the embeddings parquet's metadata."""
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class ModelInputs:
    """What the embed and validate stages know of a model before any crop goes through it.

    ``in_chans``: the channel count it takes (None = any, checked then by the probe pass only);
    ``max_in_chans``: the most channels it embeds (None = no limit); ``feature_dim``: its
    declared features per crop (None = not declared); ``extractor``: the declared interface,
    whose :meth:`Extractor.check` and :meth:`Extractor.output_dim` answer without a forward
    pass (None for a model that declares none).
    """

    in_chans: int | None
    max_in_chans: int | None = None
    feature_dim: int | None = None
    extractor: Extractor | None = None

    @classmethod
    def of(cls, model: nn.Module) -> ModelInputs:
        """The inputs of ``model``: an :class:`Extractor` says them; any other module is described
        from what torch and timm declare, in order: a patch embedding shared by all channels
        (phenoica.models) -> any count; an integer ``in_chans`` attribute (a timm ViT); the input
        channels of ``patch_embed.proj``; and integer ``max_in_chans`` / ``feature_dim``
        attributes when it has them."""
        if isinstance(model, Extractor):
            return cls(model.in_chans, model.max_in_chans, model.feature_dim, model)
        return cls(
            _foreign_in_chans(model), _int_attribute(model, "max_in_chans"), _int_attribute(model, "feature_dim")
        )


def _int_attribute(obj: Any, name: str) -> int | None:
    value = getattr(obj, name, None)
    return value if isinstance(value, int) else None


def _foreign_in_chans(model: nn.Module) -> int | None:
    """The channel count of a module that declares no :class:`Extractor` interface (None = any)."""
    if shares_channels(model):
        return None
    if hasattr(model, "in_chans"):
        return _int_attribute(model, "in_chans")
    return _int_attribute(getattr(getattr(model, "patch_embed", None), "proj", None), "in_channels")


@dataclass(frozen=True)
class Misfit:
    """Why a plate does not fit a model (:func:`check_fit`): ``kind`` ``"crop"`` (images smaller
    than the crop), ``"channels"`` (the model takes ``limit`` channels, not ``len(fed)``) or
    ``"max_channels"`` (the model embeds at most ``limit``)."""

    kind: Literal["crop", "channels", "max_channels"]
    height: int
    width: int
    crop_size: int
    fed: tuple[str, ...]
    limit: int = 0

    def plate_message(self, where: str, channels_key: str) -> str:
        """The finding for one embedding job, prefixed ``where`` (the store and plate)."""
        n_chans = len(self.fed)
        if self.kind == "crop":
            return (
                f"{where} images are {self.height}x{self.width}, smaller than the crop size {self.crop_size} "
                "(the model's img_size, or embed.crop_size)"
            )
        if self.kind == "channels":
            return f"{where} has {n_chans} channels but the model expects {self.limit}"
        return (
            f"{where} gives {n_chans} channels {list(self.fed)} but the model embeds at most {self.limit} "
            f"(max_in_chans); choose up to {self.limit} with config key {channels_key}"
        )

    def screen_message(self, model: str) -> str:
        """The finding for the check of the whole screen, naming model ``model`` and its config key."""
        what = screen_subject((self.height, self.width), self.fed)
        if self.kind == "crop":
            return (
                f"{what}: smaller than model {model}'s crop size {self.crop_size} "
                "(the model's img_size, or embed.crop_size)"
            )
        if self.kind == "channels":
            return f"{what}: model {model} expects {self.limit} channel(s)"
        return (
            f"{what}: model {model} embeds at most {self.limit} channels; "
            f"choose up to {self.limit} with models.{model}.channels"
        )


def screen_subject(image_size: tuple[int, int], fed: Sequence[str]) -> str:
    """How the check of the whole screen names the plates of one finding: their image size and channels fed."""
    return f"{image_size[0]}x{image_size[1]} images, {len(fed)} channel(s) {list(fed)}"


def check_fit(inputs: ModelInputs, image_size: tuple[int, int], crop_size: int, fed: Sequence[str]) -> Misfit | None:
    """The plate/model fit, the same for an embedding job and for the check of the whole screen:
    images of ``image_size`` (height, width) against ``crop_size``, then the channels ``fed``
    against the count the model takes, then against the most it embeds. None when it fits."""
    height, width = image_size
    n_chans = len(fed)
    if height < crop_size or width < crop_size:
        return Misfit("crop", height, width, crop_size, tuple(fed))
    if inputs.in_chans is not None and inputs.in_chans != n_chans:
        return Misfit("channels", height, width, crop_size, tuple(fed), inputs.in_chans)
    if inputs.max_in_chans is not None and n_chans > inputs.max_in_chans:
        return Misfit("max_channels", height, width, crop_size, tuple(fed), inputs.max_in_chans)
    return None


@contextmanager
def inference_context(device: torch.device) -> Iterator[None]:
    """How the model runs when embedding: ``torch.inference_mode``, plus bf16 autocast on CUDA
    (float32 on the CPU)."""
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
    with torch.inference_mode(), autocast:
        yield


def embed_crops(model: nn.Module, crops: torch.Tensor, batch_size: int, device: torch.device) -> torch.Tensor:
    """Crops (n, k, C, s, s) -> float32 embeddings (n, D): the model on batches of ``batch_size``
    crops (bf16 autocast on CUDA), then the mean over each image's k crops."""
    n, k = crops.shape[:2]
    flat = crops.reshape(n * k, *crops.shape[2:])
    outs = []
    with inference_context(device):
        for i in range(0, n * k, batch_size):
            batch = flat[i : i + batch_size].to(device, non_blocking=True)
            outs.append(model(batch).float().clone())  # a CUDA-graph replay (compile option) reuses its output
    feats = torch.cat(outs)
    if feats.ndim != 2 or feats.shape[0] != n * k:
        raise ValueError(f"model returned shape {tuple(feats.shape)} for {n * k} crops; expected (B, D)")
    return feats.reshape(n, k, -1).mean(dim=1)


def probe_feature_dim(
    model: nn.Module, inputs: ModelInputs, in_chans: int, crop_size: int, device: torch.device, store: Path
) -> int:
    """D, the model's features per crop; a model rejecting the crop raises ScreenError.

    A declared :class:`Extractor` (``inputs.extractor``) says both without a forward pass
    (:meth:`Extractor.check` on the crop's shape, :meth:`Extractor.output_dim`), which saves a
    foundation model's first forward (and, compiled, a compilation for batch 1); any other
    model runs one zero crop, and a declared ``feature_dim`` must match what it returns.
    """
    shape = (1, in_chans, crop_size, crop_size)
    try:
        if inputs.extractor is not None:
            inputs.extractor.check(torch.empty(shape, device="meta"))
            return int(inputs.extractor.output_dim(in_chans))
        out = embed_crops(model, torch.zeros(1, *shape), 1, device)
    except Exception as exc:  # a model's failure mode is arbitrary; name the inputs it rejected
        raise ScreenError(
            f"{store}: the model rejects crops of shape {shape} "
            f"({type(exc).__name__}: {exc}); check embed.crop_size against the model's img_size"
        ) from exc
    dim = int(out.shape[1])
    if inputs.feature_dim is not None and inputs.feature_dim != dim:
        raise ValueError(f"model.feature_dim is {inputs.feature_dim} but its forward pass returns {dim} features")
    return dim
