"""phenoica's own ViT read from its spec alone: what it takes and gives, without building it.

A model of architecture ``phenoica`` with no checkpoint (trained on the screen) is decided by its
``models`` entry: the channels it takes, the most it embeds, the crop side, the features per crop
and every error building it would raise are functions of the spec and the channel count.
:func:`declared_model` gives them as a :class:`DeclaredViT`, so that the check of the whole screen
(:mod:`phenoica.workflow._model_checks`) imports neither torch nor timm for such a model. The rules
here are the ones building the network applies (:func:`phenoica.models._vit.build_encoder`,
:class:`phenoica.models.FeatureExtractor` and its shape check call them), so the two cannot
disagree; a model read from a checkpoint or timm is built as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from phenoica.contract import ScreenError, check_model_geometry
from phenoica.models._plate_fit import ModelInputs
from phenoica.models._spec import ARCH_KEYS

MAX_CHANNELS = 16
"""Channels a channel-agnostic encoder can embed (size of its learned channel table)."""
POOLS = ("mean", "cls")
"""How a feature extractor pools the tokens (``models.NAME.pool``)."""


def check_vit_spec(spec: Mapping[str, Any]) -> None:
    """A spec has every architecture key and the config's geometry rules; its width takes a 2-D
    sin-cos position table (ValueError, or the config's ConfigError)."""
    missing = [k for k in ARCH_KEYS if k not in spec]
    if missing:
        raise ValueError(f"model spec is missing key(s) {missing}; expected {list(ARCH_KEYS)}")
    check_model_geometry(spec)
    check_sincos_dim(int(spec["embed_dim"]))


def check_sincos_dim(dim: int) -> None:
    """ValueError unless a 2-D sin-cos position table of width ``dim`` exists (``dim`` divisible by 4)."""
    if dim % 4:
        raise ValueError(f"2-D sin-cos position embeddings need a dimension divisible by 4, got {dim}")


def check_encoder_channels(spec: Mapping[str, Any], in_chans: int) -> None:
    """ScreenError unless the spec's encoder can be built for ``in_chans`` channels: a spec with
    ``in_chans`` set must agree unless the model is channel-agnostic, which embeds 1 to
    :data:`MAX_CHANNELS`."""
    fixed = spec.get("in_chans")
    agnostic = bool(spec["channel_agnostic"])
    if fixed is not None and fixed != in_chans and not agnostic:
        raise ScreenError(
            f"model spec takes in_chans={fixed} channels but the screen has {in_chans}; "
            "set in_chans to null or use a channel-agnostic model"
        )
    if in_chans < 1 or (agnostic and in_chans > MAX_CHANNELS):
        raise ScreenError(f"cannot build an encoder for {in_chans} channels (channel-agnostic max {MAX_CHANNELS})")


def check_extractor_options(pool: str, per_channel: bool, shared: bool, class_token: bool) -> None:
    """ValueError unless the embedding options fit an encoder (``shared``: one patch projection
    for every channel; ``class_token``: it has one)."""
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {POOLS}, got {pool!r}")
    if pool == "cls" and not class_token:
        raise ValueError("pool 'cls' needs an encoder with a class token")
    if per_channel and not shared:
        raise ValueError(
            "per_channel needs an encoder with one patch projection shared by all channels "
            "(channel_agnostic: true, or the OpenPhenom layout): only then are tokens per channel"
        )
    if per_channel and pool != "mean":
        raise ValueError(
            "per_channel pools each channel's patch tokens: it needs pool 'mean' (the class token is not per channel)"
        )


def block_index(block: int, depth: int) -> int:
    """The 0-based index of transformer block ``block`` (negative counts from the end) among ``depth``."""
    if not -depth <= block < depth:
        raise ValueError(
            f"block {block} is out of range for an encoder of {depth} blocks (0..{depth - 1}, or -1..-{depth})"
        )
    return block % depth


def input_problem(
    shape: Sequence[int], in_chans: int | None, max_chans: int | None, size: tuple[int, int], source: str
) -> str | None:
    """Why crops of ``shape`` do not fit a ViT taking ``in_chans`` channels (None: any up to
    ``max_chans``, a shared projection) and crops of ``size``; None when they fit."""
    if len(shape) != 4:
        return f"{source}: expected a (batch, channels, height, width) tensor, got shape {tuple(shape)}"
    c, h, w = shape[1:]
    if in_chans is None:
        if max_chans is not None and c > max_chans:
            return f"{source}: {c} channels, but the channel-agnostic encoder takes at most {max_chans}"
    elif c != in_chans:
        return (
            f"{source}: {c} channels, but the encoder was built for {in_chans}; "
            "a checkpoint trained on another channel count needs a channel-agnostic model"
        )
    if (h, w) != tuple(size):
        return f"{source}: crops are {h}x{w}, but the encoder takes {size[0]}x{size[1]}"
    return None


@dataclass(frozen=True)
class DeclaredViT:
    """phenoica's ViT of one spec for one channel count, as its feature extractor would declare it:
    ``in_chans`` (None = any up to ``max_in_chans``: channel-agnostic), ``img_size`` (the crop
    side), ``embed_dim`` and ``per_channel`` (features per crop: :meth:`output_dim`)."""

    in_chans: int | None
    max_in_chans: int
    img_size: int
    embed_dim: int
    per_channel: bool

    @property
    def inputs(self) -> ModelInputs:
        """What the fit check reads (:func:`phenoica.models.check_fit`)."""
        return ModelInputs(self.in_chans, self.max_in_chans, None if self.per_channel else self.embed_dim)

    def check(self, shape: Sequence[int]) -> None:
        """ScreenError unless crops of ``shape`` fit, as the built extractor's shape check says."""
        size = (self.img_size, self.img_size)
        problem = input_problem(shape, self.in_chans, self.max_in_chans, size, "FeatureExtractor input")
        if problem:
            raise ScreenError(problem)

    def output_dim(self, n_chans: int) -> int:
        """Features per crop of ``n_chans`` channels (C x D when per_channel)."""
        return self.embed_dim * n_chans if self.per_channel else self.embed_dim


def declared_model(spec: Mapping[str, Any], in_chans: int) -> DeclaredViT | None:
    """The model of a ``models`` entry (filled by :func:`phenoica.contract.validate_config`) for
    ``in_chans`` channels, read from the entry alone, raising what building it would raise; None
    when the entry does not declare it (a checkpoint, ``timm_name``, another architecture)."""
    if spec.get("timm_name") or spec.get("checkpoint") or spec.get("architecture") not in (None, "phenoica"):
        return None
    check_vit_spec(spec)
    check_encoder_channels(spec, in_chans)
    agnostic = bool(spec["channel_agnostic"])
    check_extractor_options(str(spec["pool"]), bool(spec["per_channel"]), agnostic, class_token=True)
    if spec["block"] is not None:
        block_index(int(spec["block"]), int(spec["depth"]))
    return DeclaredViT(
        in_chans=None if agnostic else in_chans,
        max_in_chans=MAX_CHANNELS if agnostic else in_chans,
        img_size=int(spec["img_size"]),
        embed_dim=int(spec["embed_dim"]),
        per_channel=bool(spec["per_channel"]),
    )
