"""From a model entry of the config to a feature extractor: crops (B, C, s, s) -> features (B, F).

:func:`build_feature_extractor` picks the architecture (``models.NAME.architecture``, or
``timm_name``, or the checkpoint's keys), builds the encoder with its weights through the
registry (:func:`create_model`, :mod:`phenoica.models._registry`: each architecture's module
registers its builder with ``register_model``), and wraps it in :class:`FeatureExtractor` (the
declared :class:`~phenoica.models.Extractor` interface), which applies the embedding
options of the config:

* ``block``: tokens of this transformer block (0-based; negative counts from the end), as
  timm's ``forward_intermediates`` returns them (before any final norm); null = the output of
  ``forward_features`` (after the encoder's final norm where it has one; OpenPhenom has none);
* ``pool``: ``mean`` of the patch tokens (class and register tokens excluded) or the ``cls``
  token;
* ``per_channel``: for encoders with one projection shared by all channels, the mean of each
  channel's patch tokens, concatenated channel by channel (C x D features, named
  ``emb_{channel}_{j}``).

Each extractor also says how its crops are preprocessed (``normalize``, see
:mod:`phenoica.screen._preprocess`) and which crop size it takes (``img_size``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from phenoica.contract import ConfigError, ScreenError, feature_name
from phenoica.models import _openphenom as openphenom
from phenoica.models import _timm_models as timm_models
from phenoica.models import _vit as vit
from phenoica.models._checkpoint import CheckpointError, read_checkpoint
from phenoica.models._declared import block_index, check_extractor_options
from phenoica.models._extractor import Extractor
from phenoica.models._layouts import PHENOICA, TIMM, closeness, detect_architecture, key_patterns
from phenoica.models._registry import model_entrypoint
from phenoica.models._vit import check_input, shares_channels
from phenoica.screen import NORMALIZE_IMAGE

ARCHITECTURE_MODULES = (vit, openphenom, timm_models)
"""The modules whose builders :func:`create_model` finds (importing them registers them)."""


class FeatureExtractor(Extractor):
    """Encoder + token choice + pooling: normalized crops (B, C, img, img) -> float32 (B, F).

    The declared :class:`~phenoica.models.Extractor` interface: ``in_chans`` (None =
    any count up to ``max_in_chans``, for shared-projection encoders), ``feature_dim`` (None
    when it depends on the channel count: ``per_channel``), ``img_size``, ``normalize``,
    :meth:`check`, :meth:`output_dim`, :meth:`feature_names` and :meth:`options`.
    """

    def __init__(
        self,
        encoder: nn.Module,
        pool: str = "mean",
        block: int | None = None,
        per_channel: bool = False,
        normalize: str = NORMALIZE_IMAGE,
        architecture: str = PHENOICA,
    ) -> None:
        super().__init__()
        shared = shares_channels(encoder)
        check_extractor_options(pool, per_channel, shared, getattr(encoder, "cls_token", None) is not None)
        self.encoder = encoder
        self.pool = pool
        self.per_channel = bool(per_channel)
        self.normalize = normalize
        self.architecture = architecture
        self.block = None if block is None else self._block_index(block)
        self.embed_dim = int(getattr(encoder, "embed_dim", getattr(encoder, "num_features", 0)))
        self.feature_dim: int | None = None if self.per_channel else self.embed_dim
        patch_embed = getattr(encoder, "patch_embed", None)
        self.tokens_per_channel: int | None = int(patch_embed.num_spatial) if shared else None
        # Channels the extractor takes; None = any count up to max_in_chans (shared projection).
        self.in_chans: int | None = None if shared else int(getattr(encoder, "in_chans", 3))
        self.max_in_chans: int | None = int(patch_embed.max_chans) if shared else self.in_chans
        self.img_size = _img_size(encoder)

    def _block_index(self, block: int) -> int:
        blocks = getattr(self.encoder, "blocks", None)
        if blocks is None or not hasattr(self.encoder, "forward_intermediates"):
            raise ValueError(
                f"block {block}: the encoder ({type(self.encoder).__name__}) has no transformer blocks to choose from"
            )
        return block_index(block, len(blocks))

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        """(B, prefix + L, D) tokens of the chosen block (or of ``forward_features``)."""
        if self.block is None:
            return self.encoder.forward_features(x)
        prefix = int(getattr(self.encoder, "num_prefix_tokens", 0))
        (out,) = self.encoder.forward_intermediates(
            x,
            indices=[self.block],
            norm=False,
            stop_early=True,
            output_fmt="NLC",
            intermediates_only=True,
            return_prefix_tokens=prefix > 0,
        )
        if isinstance(out, tuple):
            spatial, prefix_tokens = out
            return torch.cat([prefix_tokens, spatial], dim=1)
        return out

    def check(self, x: torch.Tensor) -> None:
        """ScreenError unless ``x`` (only its shape is read: a meta tensor will do) fits the encoder."""
        if hasattr(getattr(self.encoder, "patch_embed", None), "img_size"):
            check_input(self.encoder, x, "FeatureExtractor input")
        elif x.ndim != 4 or x.shape[1] != self.in_chans:
            raise ScreenError(f"FeatureExtractor input: shape {tuple(x.shape)}, expected (B, {self.in_chans}, H, W)")

    def output_dim(self, n_chans: int) -> int:
        """Features per crop of ``n_chans`` channels (C x D when per_channel), without a forward pass."""
        return self.embed_dim * n_chans if self.per_channel else self.embed_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.check(x)
        tokens = self.tokens(x)
        if tokens.ndim == 4:  # a convolutional feature map (B, D, h, w)
            return tokens.mean(dim=(-2, -1)).float()
        patches = tokens[:, int(getattr(self.encoder, "num_prefix_tokens", 0)) :]
        if self.per_channel:
            b, n_chans = x.shape[0], x.shape[1]
            per = patches.reshape(b, n_chans, self.tokens_per_channel, -1).mean(dim=2)
            return per.reshape(b, -1).float()
        pooled = patches.mean(dim=1) if self.pool == "mean" else tokens[:, 0]
        return pooled.float()

    def feature_names(self, channels: Sequence[str]) -> list[str]:
        """Column names of the features for crops of these channels (in the order given)."""
        if self.per_channel:
            return [f"emb_{ch}_{j:04d}" for ch in channels for j in range(self.embed_dim)]
        return [feature_name(j) for j in range(self.embed_dim)]

    def options(self) -> dict[str, Any]:
        """The embedding options, as recorded in the embeddings parquet's metadata."""
        return {
            "architecture": self.architecture,
            "pool": self.pool,
            "block": self.block,
            "per_channel": self.per_channel,
            "normalize": self.normalize,
            "img_size": self.img_size,
        }


def _img_size(encoder: nn.Module) -> int:
    """The crop side the encoder takes (its patch embedding's, else its pretrained config's)."""
    size = getattr(getattr(encoder, "patch_embed", None), "img_size", None)
    if size is not None:
        return int(size[0] if isinstance(size, (tuple, list)) else size)
    cfg = getattr(encoder, "pretrained_cfg", None) or {}
    return int(cfg.get("input_size", (3, 224, 224))[-1])


def resolve_architecture(
    spec: Mapping[str, Any], checkpoint: Path | str | None, log: logging.Logger | None = None
) -> tuple[str, dict[str, torch.Tensor] | None]:
    """(architecture, the checkpoint's tensors when they had to be read to decide it).

    ``timm_name`` set -> timm; ``architecture`` set -> that; no checkpoint -> phenoica (trained
    on the screen); else detected from the checkpoint's keys.
    """
    if spec.get("timm_name"):
        if spec.get("architecture") not in (None, TIMM):
            raise ConfigError(f"timm_name is set, so architecture must be null or 'timm', not {spec['architecture']!r}")
        return TIMM, None
    if spec.get("architecture"):
        return str(spec["architecture"]), None
    if checkpoint is None:
        return PHENOICA, None
    state = read_checkpoint(checkpoint, log)
    return detect_architecture(state, checkpoint), state


def create_model(
    name: str,
    spec: Mapping[str, Any],
    in_chans: int,
    checkpoint: Path | str | None = None,
    log: logging.Logger | None = None,
    state: Mapping[str, torch.Tensor] | None = None,
) -> tuple[nn.Module, str]:
    """(encoder, normalization) of architecture ``name``, by the builder registered under it
    (:func:`phenoica.models.register_model`); ConfigError for an unknown name.

    ``spec`` is the model entry, ``in_chans`` the channels the screen feeds it, ``state`` the
    checkpoint's tensors when already read (to detect the layout)."""
    builder = model_entrypoint(name)
    return builder(spec, in_chans, checkpoint, log or logging.getLogger("phenoica.models"), state)


def build_feature_extractor(
    spec: Mapping[str, Any],
    in_chans: int,
    checkpoint: Path | str | None = None,
    log: logging.Logger | None = None,
) -> FeatureExtractor:
    """The feature extractor of a model entry (``config["models"][name]`` of a config
    :func:`phenoica.contract.validate_config` filled: every key of the entry present), in
    eval mode.

    ``in_chans`` is the number of channels the screen feeds it (after ``models.NAME.channels``).
    phenoica: weights from ``checkpoint`` or seeded random init (the spec's geometry);
    openphenom: the checkpoint's encoder (geometry read from it); timm: ``timm_name`` + checkpoint.
    """
    log = log or logging.getLogger("phenoica.models")
    arch, state = resolve_architecture(spec, checkpoint, log)
    try:
        encoder, normalize = create_model(arch, spec, in_chans, checkpoint, log, state)
    except CheckpointError as exc:
        if arch == TIMM or checkpoint is None or not Path(checkpoint).is_file():
            raise
        keys = state if state is not None else read_checkpoint(checkpoint)
        how = "detected from its keys" if state is not None else "set by models.NAME.architecture"
        raise CheckpointError(f"{exc} [layout {arch!r} {how}; {closeness(key_patterns(keys))}]") from None
    return FeatureExtractor(
        encoder,
        pool=str(spec["pool"]),
        block=spec["block"],
        per_channel=bool(spec["per_channel"]),
        normalize=normalize,
        architecture=arch,
    ).eval()
