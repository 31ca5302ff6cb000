"""The one declared interface between a model and the stages that feed it (embed, validate).

:class:`Extractor` is what a feature extractor declares: the channel count it takes
(``in_chans``, None = any count up to ``max_in_chans``), its features per crop
(``feature_dim``, or :meth:`Extractor.output_dim` for a channel count), the crop side it takes
(``img_size``), its preprocessing (``normalize``), a shape check that needs no forward pass
(:meth:`Extractor.check`), its feature names and the options recorded with its embeddings.
:class:`phenoica.models.FeatureExtractor` implements it.

:func:`module_inputs` describes any built module by what the embed and validate stages read of
a model (:class:`phenoica.models._plate_fit.ModelInputs`, declared by an :class:`Extractor` or, for a
bare timm model or a test double, read once here from what torch and timm declare); the fit check
both stages call (:func:`phenoica.models._plate_fit.check_fit`) needs no torch.
:func:`probe_feature_dim` gives the features per crop (declared, or from one zero crop). Which
of a plate's channels a model is fed is :func:`phenoica.contract.channel_indices`.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch
from torch import nn

from phenoica.models._plate_fit import ModelInputs, rejected_crops
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


def module_inputs(model: nn.Module) -> ModelInputs:
    """The inputs of a built ``model`` (:func:`phenoica.models.module_inputs`): an :class:`Extractor` says them;
    any other module is described from what torch and timm declare, in order: a patch embedding
    shared by all channels (phenoica.models) -> any count; an integer ``in_chans`` attribute (a
    timm ViT); the input channels of ``patch_embed.proj``; and integer ``max_in_chans`` /
    ``feature_dim`` attributes when it has them."""
    if isinstance(model, Extractor):
        return ModelInputs(model.in_chans, model.max_in_chans, model.feature_dim, model)
    return ModelInputs(
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
        raise rejected_crops(store, shape, exc) from exc
    dim = int(out.shape[1])
    if inputs.feature_dim is not None and inputs.feature_dim != dim:
        raise ValueError(f"model.feature_dim is {inputs.feature_dim} but its forward pass returns {dim} features")
    return dim
