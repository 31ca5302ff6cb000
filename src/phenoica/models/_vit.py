"""phenoica's own ViT encoder (timm), its checkpoints, and their strict loading.

The encoder is always a ``timm.models.vision_transformer.VisionTransformer`` built by
:func:`build_encoder`, so a timm state dict and a phenoica checkpoint are interchangeable
(same key names: ``patch_embed.proj.weight``, ``blocks.0.attn.qkv.weight``, ...).

Two patch embeddings:

* standard: timm's ``PatchEmbed`` (Conv2d C -> D); (img/patch)^2 tokens plus the class token;
  the learned ``pos_embed`` starts as a 2-D sin-cos table and is kept fixed during MAE training.
* channel-agnostic (``channel_agnostic: true``): :class:`ChannelAgnosticPatchEmbed`, one
  Conv2d 1 -> D shared by every channel, so a C-channel crop gives C x (img/patch)^2 tokens
  (channel-major: token ``c * N + n`` is patch ``n`` of channel ``c``); each token gets a fixed
  2-D sin-cos spatial position plus a learned embedding of its channel. The same weights
  serve any channel count up to :data:`MAX_CHANNELS`.

(The published OpenPhenom layout, which repeats a fixed sin-cos table per channel instead of
learning channel embeddings, is :mod:`phenoica.models._openphenom`.)
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Mapping

import torch
from safetensors.torch import save_file
from timm.layers import build_sincos2d_pos_embed
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from phenoica.contract import ScreenError
from phenoica.models._checkpoint import (
    CheckpointError,
    check_keys,
    checkpoint_metadata,
    read_checkpoint,
    sort_safetensors_header,
    strip_prefixes,
)
from phenoica.models._declared import (
    MAX_CHANNELS,
    check_encoder_channels,
    check_sincos_dim,
    check_vit_spec,
    input_problem,
)
from phenoica.models._layers import SharedChannelPatchEmbed
from phenoica.models._registry import register_model
from phenoica.models._spec import ARCH_KEYS
from phenoica.screen import NORMALIZE_IMAGE
from phenoica.utils import atomic_path

METADATA_SPEC = "phenoica.spec"
METADATA_IN_CHANS = "phenoica.in_chans"

# Keys of MAE checkpoints (phenoica's and the original MAE's) and of classifier heads that an
# encoder does not use; load_encoder skips them and logs that it did.
_SKIPPED_PREFIXES = ("decoder", "mask_token", "head.")
_WRAPPER_PREFIXES = ("module.", "encoder.")


# --------------------------------------------------------------------------------------------
# Encoder
# --------------------------------------------------------------------------------------------


def sincos_grid(grid: int, dim: int) -> torch.Tensor:
    """Fixed 2-D sin-cos position table (grid*grid, dim), rows in row-major patch order."""
    check_sincos_dim(dim)
    return build_sincos2d_pos_embed([grid, grid], dim=dim)


class ChannelAgnosticPatchEmbed(SharedChannelPatchEmbed):
    """timm-compatible patch embedding shared across channels, with positions added.

    Called by ``VisionTransformer(embed_layer=ChannelAgnosticPatchEmbed, pos_embed='none')``
    with timm's keyword arguments. ``forward`` maps (B, C, H, W) with any C <= ``max_chans``
    to (B, C * N, D), N = (img/patch)^2 (the shared projection of
    :class:`~phenoica.models._layers.SharedChannelPatchEmbed`), and adds spatial + channel
    position embeddings. Weights: ``channel_embed``, ``proj.weight``, ``proj.bias``.
    """

    def __init__(
        self,
        img_size: int = 224,
        patch_size: int = 16,
        in_chans: int = 3,
        embed_dim: int = 768,
        bias: bool = True,
        dynamic_img_pad: bool = False,
        max_chans: int = MAX_CHANNELS,
        device: Any = None,
        dtype: Any = None,
        **unsupported: Any,
    ) -> None:
        super().__init__(
            img_size,
            patch_size,
            in_chans,
            embed_dim,
            bias,
            dynamic_img_pad,
            max_chans=max_chans,
            label="channel-agnostic encoder",
            device=device,
            dtype=dtype,
            **unsupported,
        )
        self.channel_embed = nn.Parameter(torch.zeros(max_chans, embed_dim, device=device, dtype=dtype))
        self.register_buffer(
            "spatial_embed", sincos_grid(self.grid_size[0], embed_dim).to(device=device), persistent=False
        )
        self.init_weights()

    def init_weights(self) -> None:
        """Channel table ~ N(0, 0.02); called by timm's ViT initialisation too."""
        nn.init.trunc_normal_(self.channel_embed, std=0.02)

    def position_embedding(self, n_chans: int) -> torch.Tensor:
        """(n_chans * N, D) position of every token: spatial sin-cos + learned channel embedding."""
        spatial = self.spatial_embed.to(self.channel_embed.dtype).repeat(n_chans, 1)
        channel = self.channel_embed[:n_chans].repeat_interleave(self.num_spatial, dim=0)
        return spatial + channel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, C * N, D): the shared projection's tokens plus their positions."""
        return super().forward(x) + self.position_embedding(x.shape[1]).unsqueeze(0)


def build_encoder(spec: Mapping[str, Any], in_chans: int, seed: int = 0) -> VisionTransformer:
    """The timm ViT of a model spec (``config["models"][name]``) for ``in_chans`` channels.

    Weights are randomly initialised from ``seed`` (the global RNG is left untouched). A spec
    with ``in_chans`` set must agree with ``in_chans`` unless the model is channel-agnostic.
    """
    check_vit_spec(spec)
    check_encoder_channels(spec, in_chans)
    agnostic = bool(spec["channel_agnostic"])
    grid = spec["img_size"] // spec["patch_size"]
    kwargs: dict[str, Any] = dict(
        img_size=spec["img_size"],
        patch_size=spec["patch_size"],
        in_chans=in_chans,
        num_classes=0,
        embed_dim=spec["embed_dim"],
        depth=spec["depth"],
        num_heads=spec["num_heads"],
        mlp_ratio=float(spec["mlp_ratio"]),
        class_token=True,
        global_pool="token",
    )
    if agnostic:
        kwargs.update(embed_layer=ChannelAgnosticPatchEmbed, pos_embed="none")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        encoder = VisionTransformer(**kwargs)
    if not agnostic:
        table = sincos_grid(grid, spec["embed_dim"])
        with torch.no_grad():  # class token position 0, patches sin-cos (as in MAE)
            encoder.pos_embed.zero_()
            encoder.pos_embed[0, 1:] = table
    return encoder


def is_channel_agnostic(encoder: VisionTransformer) -> bool:
    """True for phenoica's channel-agnostic encoder (shared projection + learned channel embeddings)."""
    return isinstance(encoder.patch_embed, ChannelAgnosticPatchEmbed)


def shares_channels(encoder: nn.Module) -> bool:
    """True when one patch projection embeds every channel (phenoica's channel-agnostic encoder or
    the OpenPhenom layout): tokens are channel-major and any channel count up to ``max_chans`` works."""
    return bool(getattr(getattr(encoder, "patch_embed", None), "shares_channels", False))


def check_input(encoder: VisionTransformer, x: torch.Tensor, source: str = "input") -> None:
    """Raise ScreenError unless ``x`` is (B, C, img, img) with a channel count the encoder takes."""
    shared = shares_channels(encoder)
    in_chans = None if shared else int(encoder.in_chans)
    max_chans = int(encoder.patch_embed.max_chans) if shared else None
    problem = input_problem(tuple(x.shape), in_chans, max_chans, tuple(encoder.patch_embed.img_size), source)
    if problem:
        raise ScreenError(problem)


# --------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------


def _arch_of(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {k: spec[k] for k in ARCH_KEYS if k in spec}


def save_checkpoint(
    model: nn.Module, spec: Mapping[str, Any], path: Path | str, extra: Mapping[str, Any] | None = None
) -> Path:
    """Write encoder weights (timm key names) and, for an MAE, ``decoder.*`` weights as safetensors.

    ``model`` is a MaskedAutoencoder (``encoder`` + ``decoder``), a FeatureExtractor
    (``encoder``) or the VisionTransformer itself. The architecture spec and input channel
    count go into the file's metadata, with ``extra`` (JSON-encoded values) under
    ``phenoica.<key>``. Written atomically.
    """
    encoder = getattr(model, "encoder", model)
    decoder = getattr(model, "decoder", None)
    if not isinstance(encoder, VisionTransformer):
        raise TypeError(
            f"save_checkpoint: expected an MAE, a VisionTransformer or a FeatureExtractor, got {type(model).__name__}"
        )
    named = dict(encoder.state_dict())
    if decoder is not None:
        named.update({f"decoder.{k}": v for k, v in decoder.state_dict().items()})
    tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in named.items()}
    metadata = {
        METADATA_SPEC: json.dumps(_arch_of(spec), sort_keys=True),
        METADATA_IN_CHANS: str(int(encoder.in_chans)),
        "format": "pt",
    }
    for key, value in (extra or {}).items():
        metadata[f"phenoica.{key}"] = json.dumps(value)
    path = Path(path)
    if path.suffix != ".safetensors":
        raise ValueError(f"{path}: checkpoints are written as .safetensors")
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata=metadata)
        sort_safetensors_header(tmp)  # same model, same bytes
    return path


def read_state_dict(path: Path | str, log: logging.Logger | None = None) -> dict[str, torch.Tensor]:
    """Tensors of a safetensors or torch checkpoint, ``module.``/``encoder.`` prefixes stripped."""
    return strip_prefixes(read_checkpoint(path, log), _WRAPPER_PREFIXES)


def load_encoder(
    path: Path | str,
    spec: Mapping[str, Any],
    in_chans: int,
    log: logging.Logger | None = None,
    state: Mapping[str, torch.Tensor] | None = None,
) -> VisionTransformer:
    """Load a checkpoint into ``build_encoder(spec, in_chans)``, strictly.

    Accepts .safetensors (phenoica or timm) and torch state dicts, possibly nested under
    ``model``/``state_dict`` and with ``module.``/``encoder.`` prefixes. MAE decoder keys
    (``decoder*``, ``mask_token``) and a classifier ``head.*`` are skipped. Any missing key,
    unexpected key or shape mismatch raises CheckpointError listing them with the file name;
    a checkpoint trained on another channel count says so. ``state`` is the file's tensors
    when already read (:func:`phenoica.models._checkpoint.read_checkpoint`).
    """
    path = Path(path)
    state = read_state_dict(path, log) if state is None else strip_prefixes(state, _WRAPPER_PREFIXES)
    meta = checkpoint_metadata(path)
    skipped = sorted(k for k in state if k.startswith(_SKIPPED_PREFIXES))
    state = {k: v for k, v in state.items() if not k.startswith(_SKIPPED_PREFIXES)}
    if skipped and log is not None:
        log.info("%s: skipping %d decoder/head key(s) (%s ...)", path.name, len(skipped), skipped[0])

    saved_arch = meta.get("spec") if isinstance(meta.get("spec"), dict) else None
    arch_diff = [
        f"{k}: checkpoint {saved_arch[k]!r} vs spec {spec[k]!r}"
        for k in ARCH_KEYS
        if saved_arch is not None and k in saved_arch and k in spec and saved_arch[k] != spec[k]
    ]
    if arch_diff:
        raise CheckpointError(f"{path}: architecture differs from the model spec: " + "; ".join(arch_diff))

    proj = state.get("patch_embed.proj.weight")
    agnostic = bool(spec["channel_agnostic"])
    if proj is not None and proj.ndim == 4:
        trained = int(proj.shape[1])
        if agnostic and trained != 1:
            raise CheckpointError(
                f"{path}: spec says channel_agnostic, but the checkpoint's patch projection takes "
                f"{trained} channels (a standard ViT trained on {trained}-channel images)"
            )
        if not agnostic and trained != in_chans:
            hint = " (its projection takes 1 channel: set channel_agnostic: true)" if trained == 1 else ""
            raise CheckpointError(
                f"{path}: checkpoint was trained on {trained}-channel images but the screen has "
                f"{in_chans} channels{hint}"
            )

    encoder = build_encoder(spec, in_chans)
    check_keys(path, state, encoder.state_dict(), "the model spec")
    encoder.load_state_dict(state, strict=True)
    return encoder


@register_model("phenoica")
def phenoica_encoder(
    spec: Mapping[str, Any],
    in_chans: int,
    checkpoint: Path | str | None,
    log: logging.Logger,
    state: Mapping[str, torch.Tensor] | None,
) -> tuple[nn.Module, str]:
    """phenoica's ViT (architecture ``phenoica``): weights from ``checkpoint`` (strictly), or the
    spec's seeded random init when there is none; images normalized whole."""
    if checkpoint is None:
        return build_encoder(spec, in_chans, seed=int(spec["seed"])), NORMALIZE_IMAGE
    return load_encoder(Path(checkpoint), spec, in_chans, log, state=state), NORMALIZE_IMAGE
