"""The published OpenPhenom layout: a channel-agnostic MAE encoder (ViT-S/16 at 256 px).

What the layout is (recursionpharma/maes_microscopy, ``vit.py`` and ``huggingface_mae.py``):

* a timm ``VisionTransformer`` whose blocks are ``ParallelScalingBlock`` (attention and MLP
  from one fused input projection ``in_proj``), with qk-norm, layer scale (``ls.gamma``), no
  qkv bias (the MLP bias is the separate ``mlp_bias``), a class token, ``global_pool="avg"``
  so that the final norm is ``fc_norm`` (applied after pooling: unused for the embedding) and
  ``forward_features`` ends without a norm;
* one ``Conv2d(1, D, p, p)`` shared by every channel; a C-channel crop gives C x N tokens,
  channel-major (token ``c * N + n`` = patch ``n`` of channel ``c``);
* a fixed 2-D sin-cos position table (columns ``sin(h w_k), cos(h w_k), sin(x w_k), cos(x w_k)``,
  ``w_k = 10000^(-k / (D/4))``) repeated for ``max_in_chans`` channels behind a zero row for the
  class token: ``pos_embed`` is ``[1, 1 + max_in_chans * N, D]`` and a C-channel forward pass
  adds its first ``1 + C * N`` rows;
* in the published file the weights sit under ``state_dict``: the encoder as
  ``encoder.vit_backbone.*``, beside the MAE decoder (``decoder.*``, ``decoder_pred.*``,
  ``encoder_decoder_proj.*``), which the embedding does not use.

The geometry (patch size, width, depth, heads, MLP ratio, image size, ``max_in_chans``) is read
from the checkpoint's tensors, so the same code loads other sizes of this layout.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, Mapping

import torch
from timm.models.vision_transformer import ParallelScalingBlock, VisionTransformer
from torch import nn

from phenoica.contract import ConfigError, ScreenError
from phenoica.models._checkpoint import CheckpointError, check_keys, read_checkpoint, strip_prefixes
from phenoica.models._layers import SharedChannelPatchEmbed
from phenoica.models._registry import register_model

BACKBONE_PREFIX = "encoder.vit_backbone."
DECODER_PREFIXES = ("decoder", "encoder_decoder_proj", "mask_token")
"""Top-level keys of the published MAE file that belong to pretraining, not to the encoder."""
LAYER_SCALE_INIT = 1e-4
SINCOS_SCALE = 10000.0
NORMALIZE = "crop"
"""The recipe normalizes each crop the model sees (phenoica.screen._preprocess, ``normalize="crop"``)."""


@dataclass(frozen=True)
class OpenPhenomGeometry:
    """Sizes of one encoder in the OpenPhenom layout (ViT-S/16 at 256 px: the defaults)."""

    img_size: int = 256
    patch_size: int = 16
    embed_dim: int = 384
    depth: int = 12
    num_heads: int = 6
    mlp_ratio: float = 4.0
    max_in_chans: int = 11

    @property
    def grid(self) -> int:
        return self.img_size // self.patch_size


def sincos_table(grid: int, dim: int, scale: float = SINCOS_SCALE) -> torch.Tensor:
    """The (grid*grid, dim) 2-D sin-cos table of the layout, rows in row-major patch order.

    Column blocks of dim/4: sin and cos of the row index times each frequency, then sin and
    cos of the column index; frequency k is ``scale ** (-k / (dim / 4))``.
    """
    if dim % 4:
        raise ValueError(f"2-D sin-cos position embeddings need a dimension divisible by 4, got {dim}")
    quarter = dim // 4
    freqs = scale ** (-torch.arange(quarter, dtype=torch.float64) / quarter)
    rows, cols = torch.meshgrid(
        torch.arange(grid, dtype=torch.float64), torch.arange(grid, dtype=torch.float64), indexing="ij"
    )
    r = rows.reshape(-1, 1) * freqs
    c = cols.reshape(-1, 1) * freqs
    return torch.cat([r.sin(), r.cos(), c.sin(), c.cos()], dim=1).float()


def position_table(grid: int, dim: int, max_in_chans: int) -> torch.Tensor:
    """``pos_embed`` of the layout: (1, 1 + max_in_chans * grid^2, dim), row 0 (class token) zero."""
    table = sincos_table(grid, dim).repeat(max_in_chans, 1)
    return torch.cat([torch.zeros(1, dim), table]).unsqueeze(0)


class OpenPhenomViT(VisionTransformer):
    """timm ViT that adds only the first ``1 + C * N`` rows of ``pos_embed`` (C = the input's channels)."""

    def _pos_embed(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        n = x.shape[1]
        if n > self.pos_embed.shape[1]:
            raise ScreenError(
                f"{n - 1} patch tokens exceed the {self.pos_embed.shape[1] - 1} rows of pos_embed "
                f"(max_in_chans {self.patch_embed.max_chans})"
            )
        return self.pos_drop(x + self.pos_embed[:, :n])


def build_openphenom(geometry: OpenPhenomGeometry = OpenPhenomGeometry(), seed: int = 0) -> OpenPhenomViT:
    """An encoder of the layout with seeded random weights and the fixed sin-cos ``pos_embed``
    (global RNG untouched); load a checkpoint with :func:`load_openphenom`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = OpenPhenomViT(
            img_size=geometry.img_size,
            patch_size=geometry.patch_size,
            in_chans=geometry.max_in_chans,
            num_classes=0,
            embed_dim=geometry.embed_dim,
            depth=geometry.depth,
            num_heads=geometry.num_heads,
            mlp_ratio=geometry.mlp_ratio,
            qkv_bias=False,
            qk_norm=True,
            init_values=LAYER_SCALE_INIT,
            block_fn=ParallelScalingBlock,
            class_token=True,
            global_pool="avg",
            fc_norm=None,
            embed_layer=partial(SharedChannelPatchEmbed, label="OpenPhenom encoder (max_in_chans)"),
        )
    with torch.no_grad():
        model.pos_embed.copy_(position_table(geometry.grid, geometry.embed_dim, geometry.max_in_chans))
    model.pos_embed.requires_grad_(False)
    return model


def split_state(
    state: Mapping[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], list[str], dict[str, torch.Tensor]]:
    """(encoder weights with ``encoder.vit_backbone.`` removed, ignored decoder keys, other tensors).

    A file holding only the backbone (no ``encoder.vit_backbone.`` prefix) is taken as it is.
    """
    state = strip_prefixes(state, ("module.",))
    if any(k.startswith(BACKBONE_PREFIX) for k in state):
        backbone = {k[len(BACKBONE_PREFIX) :]: v for k, v in state.items() if k.startswith(BACKBONE_PREFIX)}
        rest = [k for k in state if not k.startswith(BACKBONE_PREFIX)]
    else:
        backbone = {k: v for k, v in state.items() if not k.startswith(DECODER_PREFIXES)}
        rest = [k for k in state if k.startswith(DECODER_PREFIXES)]
    ignored = sorted(k for k in rest if k.startswith(DECODER_PREFIXES))
    other = {k: state[k] for k in rest if not k.startswith(DECODER_PREFIXES)}
    return backbone, ignored, other


def _tensor(state: Mapping[str, torch.Tensor], key: str, path: Path, ndim: int) -> torch.Tensor:
    value = state.get(key)
    if value is None:
        raise CheckpointError(f"{path}: OpenPhenom layout needs {BACKBONE_PREFIX}{key}, which the checkpoint lacks")
    if value.ndim != ndim:
        raise CheckpointError(f"{path}: {BACKBONE_PREFIX}{key} has shape {tuple(value.shape)}, expected {ndim} dims")
    return value


def geometry_from_state(state: Mapping[str, torch.Tensor], path: Path | str) -> OpenPhenomGeometry:
    """Read the layout's sizes off the backbone tensors (``encoder.vit_backbone.`` removed).

    The image size and ``max_in_chans`` come from ``pos_embed``: the grid g whose sin-cos table
    its rows repeat (rows = 1 + max_in_chans * g^2). CheckpointError names the key that does not fit.
    """
    path = Path(path)
    proj = _tensor(state, "patch_embed.proj.weight", path, 4)
    dim, in_ch, patch = int(proj.shape[0]), int(proj.shape[1]), int(proj.shape[2])
    if in_ch != 1:
        raise CheckpointError(
            f"{path}: {BACKBONE_PREFIX}patch_embed.proj.weight takes {in_ch} channels; the OpenPhenom layout "
            "shares one single-channel projection across channels"
        )
    depth = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
    if depth == 0:
        raise CheckpointError(f"{path}: no {BACKBONE_PREFIX}blocks.* keys")
    head_dim = int(_tensor(state, "blocks.0.q_norm.weight", path, 1).shape[0])
    if dim % head_dim:
        raise CheckpointError(f"{path}: q_norm width {head_dim} does not divide the embedding width {dim}")
    in_proj = _tensor(state, "blocks.0.in_proj.weight", path, 2)
    hidden = int(in_proj.shape[0]) - 3 * dim
    if hidden <= 0:
        raise CheckpointError(f"{path}: blocks.0.in_proj.weight {tuple(in_proj.shape)} is not [mlp + 3 x {dim}, {dim}]")
    pos = _tensor(state, "pos_embed", path, 3)
    rows = int(pos.shape[1]) - 1
    grid = _sincos_grid_of(pos[0].float(), dim)
    if grid is None:
        raise CheckpointError(
            f"{path}: {BACKBONE_PREFIX}pos_embed {tuple(pos.shape)} is not a fixed 2-D sin-cos table repeated per "
            "channel behind a zero class-token row (the OpenPhenom layout)"
        )
    return OpenPhenomGeometry(
        img_size=grid * patch,
        patch_size=patch,
        embed_dim=dim,
        depth=depth,
        num_heads=dim // head_dim,
        mlp_ratio=hidden / dim,
        max_in_chans=rows // (grid * grid),
    )


def _sincos_grid_of(pos: torch.Tensor, dim: int, atol: float = 1e-4) -> int | None:
    """The grid g such that ``pos`` (1 + M g^2, dim) is a zero row and M copies of sincos_table(g)."""
    rows = pos.shape[0] - 1
    if rows < 1 or dim % 4 or pos[0].abs().max() > atol:
        return None
    g = 1
    while g * g <= rows:
        if rows % (g * g) == 0:
            table = sincos_table(g, dim)
            if torch.allclose(pos[1:].reshape(-1, g * g, dim), table.expand(rows // (g * g), -1, -1), atol=atol):
                return g
        g += 1
    return None


def load_openphenom(
    path: Path | str,
    in_chans: int,
    log: logging.Logger | None = None,
    state: Mapping[str, torch.Tensor] | None = None,
) -> OpenPhenomViT:
    """The encoder of a checkpoint in the OpenPhenom layout (torch pickle or safetensors), strictly.

    ``state`` is the file's tensors when already read. Decoder keys are ignored (and logged);
    any other key outside the encoder, a missing key or a shape mismatch raises CheckpointError;
    ``in_chans`` above the checkpoint's ``max_in_chans`` raises ScreenError.
    """
    path = Path(path)
    log = log or logging.getLogger("phenoica.models")
    state = read_checkpoint(path, log) if state is None else state
    backbone, ignored, other = split_state(state)
    if ignored:
        heads = sorted({k.split(".")[0] for k in ignored})
        log.info(
            "%s: ignoring %d MAE decoder key(s) (%s); the embedding uses the encoder only",
            path.name,
            len(ignored),
            ", ".join(f"{h}.*" for h in heads),
        )
    geometry = geometry_from_state(backbone, path)
    log.info("%s: OpenPhenom layout, %s", path.name, ", ".join(f"{k} {v}" for k, v in asdict(geometry).items()))
    if in_chans > geometry.max_in_chans:
        raise ScreenError(
            f"{path}: the screen gives {in_chans} channels but this checkpoint embeds at most "
            f"{geometry.max_in_chans} (max_in_chans of its pos_embed); choose channels with models.NAME.channels"
        )
    model = build_openphenom(geometry)
    check_keys(path, {**backbone, **other}, model.state_dict(), "the OpenPhenom layout")
    model.load_state_dict(backbone, strict=True)
    model.pos_embed.requires_grad_(False)
    return model.eval()


@register_model("openphenom")
def openphenom_encoder(
    spec: Mapping[str, Any],
    in_chans: int,
    checkpoint: Path | str | None,
    log: logging.Logger,
    state: Mapping[str, torch.Tensor] | None,
) -> tuple[nn.Module, str]:
    """The OpenPhenom layout (architecture ``openphenom``): the checkpoint's encoder, geometry read
    from it; each crop normalized (:data:`NORMALIZE`)."""
    if checkpoint is None:
        raise ConfigError("architecture openphenom needs a checkpoint (models.NAME.checkpoint)")
    return load_openphenom(checkpoint, in_chans, log, state=state), NORMALIZE
