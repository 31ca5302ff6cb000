"""What the embed and validate stages know of a model before any crop goes through it, torch-free.

:class:`ModelInputs` (the channels a model takes, the most it embeds, its declared features per
crop), :func:`check_fit` (the plate/model fit both stages call: image size against the crop, the
channels fed against the model's) and :class:`Misfit`, which words its finding for an embedding
job (:meth:`Misfit.plate_message`) or for the check of the whole screen
(:meth:`Misfit.screen_message`). Kept free of torch so that the door (the check of the whole
screen, :mod:`phenoica.workflow._model_checks`) can check a model whose geometry its spec declares
(:mod:`phenoica.models._declared`) without importing torch; a built module is described by
:func:`phenoica.models.module_inputs` (:mod:`phenoica.models._extractor`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, Sequence

from phenoica.contract import ScreenError


class Declares(Protocol):
    """What a declared extractor answers without a forward pass
    (:class:`phenoica.models.Extractor`): its shape check and its features per crop."""

    def check(self, x: Any) -> None: ...

    def output_dim(self, n_chans: int) -> int: ...


@dataclass(frozen=True, eq=False)
class ModelInputs:
    """What the embed and validate stages know of a model before any crop goes through it.

    ``in_chans``: the channel count it takes (None = any, checked then by the probe pass only);
    ``max_in_chans``: the most channels it embeds (None = no limit); ``feature_dim``: its
    declared features per crop (None = not declared); ``extractor``: the declared interface
    (:class:`phenoica.models.Extractor`), whose ``check`` and ``output_dim`` answer without a
    forward pass (None for a model that declares none).
    """

    in_chans: int | None
    max_in_chans: int | None = None
    feature_dim: int | None = None
    extractor: Declares | None = None


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


def rejected_crops(store: Path | str, shape: tuple[int, ...], exc: Exception) -> ScreenError:
    """The error for a model that rejects crops of ``shape`` (raising ``exc``), naming ``store``."""
    return ScreenError(
        f"{store}: the model rejects crops of shape {shape} "
        f"({type(exc).__name__}: {exc}); check embed.crop_size against the model's img_size"
    )
