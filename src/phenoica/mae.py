"""ViT encoder (timm), masked-autoencoder pretraining on the screen's tiles, checkpoints.

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

The MAE (:class:`MaskedAutoencoder`) masks a seeded random ``mask_ratio`` of the tokens, runs
the encoder on the visible ones, and a light timm-``Block`` decoder predicts the pixels of every
token; the loss is the MSE over masked tokens only, on per-patch normalized pixels when
``norm_pix_loss``. :class:`FeatureExtractor` is what the embedding stage uses.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from timm.layers import build_sincos2d_pos_embed
from timm.models.vision_transformer import Block, VisionTransformer
from torch import nn

from phenoica.io import atomic_path, get_logger
from phenoica.preprocess import normalize_per_channel, scale_intensity
from phenoica.screen import ScreenError, open_plate

MAX_CHANNELS = 16
"""Channels a channel-agnostic encoder can embed (size of its learned channel table)."""

ARCH_KEYS: tuple[str, ...] = (
    "img_size", "patch_size", "embed_dim", "depth", "num_heads", "mlp_ratio", "channel_agnostic",
)
"""Spec keys that decide the encoder's architecture (stored in checkpoint metadata)."""

METADATA_SPEC = "phenoica.spec"
METADATA_IN_CHANS = "phenoica.in_chans"
POOLS = ("mean", "cls")

# Keys of MAE checkpoints (phenoica's and the original MAE's) and of classifier heads that an
# encoder does not use; load_encoder skips them and logs that it did.
_SKIPPED_PREFIXES = ("decoder", "mask_token", "head.")


class CheckpointError(ValueError):
    """A checkpoint that does not fit the requested encoder; the message names the file."""


# --------------------------------------------------------------------------------------------
# Encoder
# --------------------------------------------------------------------------------------------


def sincos_grid(grid: int, dim: int) -> torch.Tensor:
    """Fixed 2-D sin-cos position table (grid*grid, dim), rows in row-major patch order."""
    if dim % 4:
        raise ValueError(f"2-D sin-cos position embeddings need a dimension divisible by 4, got {dim}")
    return build_sincos2d_pos_embed([grid, grid], dim=dim)


class ChannelAgnosticPatchEmbed(nn.Module):
    """timm-compatible patch embedding shared across channels.

    Called by ``VisionTransformer(embed_layer=ChannelAgnosticPatchEmbed, pos_embed='none')``
    with timm's keyword arguments. ``forward`` maps (B, C, H, W) with any C <= ``max_chans``
    to (B, C * N, D), N = (img/patch)^2, and adds spatial + channel position embeddings.
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
        super().__init__()
        if unsupported:
            raise ValueError(f"ChannelAgnosticPatchEmbed: unsupported options {sorted(unsupported)}")
        if dynamic_img_pad:
            raise ValueError("ChannelAgnosticPatchEmbed: dynamic_img_pad is not supported")
        if img_size % patch_size:
            raise ValueError(f"img_size {img_size} is not a multiple of patch_size {patch_size}")
        if not 1 <= in_chans <= max_chans:
            raise ValueError(f"channel-agnostic encoder supports 1..{max_chans} channels, got {in_chans}")
        self.img_size = (img_size, img_size)
        self.patch_size = (patch_size, patch_size)
        self.grid_size = (img_size // patch_size, img_size // patch_size)
        self.num_spatial = self.grid_size[0] * self.grid_size[1]
        self.in_chans = in_chans
        self.max_chans = max_chans
        # Nominal token count (for the in_chans the model was built with); any C works.
        self.num_patches = in_chans * self.num_spatial
        self.proj = nn.Conv2d(1, embed_dim, patch_size, patch_size, bias=bias, device=device, dtype=dtype)
        self.channel_embed = nn.Parameter(torch.zeros(max_chans, embed_dim, device=device, dtype=dtype))
        self.register_buffer(
            "spatial_embed", sincos_grid(self.grid_size[0], embed_dim).to(device=device), persistent=False
        )
        self.init_weights()

    def init_weights(self) -> None:
        """Channel table ~ N(0, 0.02); called by timm's ViT initialisation too."""
        nn.init.trunc_normal_(self.channel_embed, std=0.02)

    def feat_ratio(self, as_scalar: bool = True) -> int | tuple[int, int]:
        """Spatial reduction (the patch size), as timm's PatchEmbed reports it."""
        return self.patch_size[0] if as_scalar else self.patch_size

    def position_embedding(self, n_chans: int) -> torch.Tensor:
        """(n_chans * N, D) position of every token: spatial sin-cos + learned channel embedding."""
        spatial = self.spatial_embed.to(self.channel_embed.dtype).repeat(n_chans, 1)
        channel = self.channel_embed[:n_chans].repeat_interleave(self.num_spatial, dim=0)
        return spatial + channel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        if c > self.max_chans:
            raise ScreenError(
                f"channel-agnostic encoder supports at most {self.max_chans} channels, got {c}"
            )
        if (h, w) != self.img_size:
            raise ScreenError(f"encoder expects {self.img_size[0]}x{self.img_size[1]} crops, got {h}x{w}")
        tokens = self.proj(x.reshape(b * c, 1, h, w)).flatten(2).transpose(1, 2)  # (B*C, N, D)
        tokens = tokens.reshape(b, c * self.num_spatial, -1)
        return tokens + self.position_embedding(c).unsqueeze(0)


def _check_spec(spec: Mapping[str, Any]) -> None:
    missing = [k for k in ARCH_KEYS if k not in spec]
    if missing:
        raise ValueError(f"model spec is missing key(s) {missing}; expected {list(ARCH_KEYS)}")
    if spec["img_size"] % spec["patch_size"]:
        raise ValueError(
            f"model spec: img_size {spec['img_size']} is not a multiple of patch_size {spec['patch_size']}"
        )
    if spec["embed_dim"] % spec["num_heads"]:
        raise ValueError(
            f"model spec: embed_dim {spec['embed_dim']} is not divisible by num_heads {spec['num_heads']}"
        )


def build_encoder(spec: Mapping[str, Any], in_chans: int, seed: int = 0) -> VisionTransformer:
    """The timm ViT of a model spec (``config["models"][name]``) for ``in_chans`` channels.

    Weights are randomly initialised from ``seed`` (the global RNG is left untouched). A spec
    with ``in_chans`` set must agree with ``in_chans`` unless the model is channel-agnostic.
    """
    _check_spec(spec)
    fixed = spec.get("in_chans")
    agnostic = bool(spec["channel_agnostic"])
    if fixed is not None and fixed != in_chans and not agnostic:
        raise ScreenError(
            f"model spec takes in_chans={fixed} channels but the screen has {in_chans}; "
            "set in_chans to null or use a channel-agnostic model"
        )
    if in_chans < 1 or (agnostic and in_chans > MAX_CHANNELS):
        raise ScreenError(f"cannot build an encoder for {in_chans} channels (channel-agnostic max {MAX_CHANNELS})")
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
    """True when the encoder embeds channels with one shared projection."""
    return isinstance(encoder.patch_embed, ChannelAgnosticPatchEmbed)


def check_input(encoder: VisionTransformer, x: torch.Tensor, source: str = "input") -> None:
    """Raise ScreenError unless ``x`` is (B, C, img, img) with a channel count the encoder takes."""
    if x.ndim != 4:
        raise ScreenError(f"{source}: expected a (batch, channels, height, width) tensor, got shape {tuple(x.shape)}")
    c, h, w = x.shape[1:]
    size = tuple(encoder.patch_embed.img_size)
    if is_channel_agnostic(encoder):
        limit = encoder.patch_embed.max_chans
        if c > limit:
            raise ScreenError(f"{source}: {c} channels, but the channel-agnostic encoder takes at most {limit}")
    elif c != encoder.in_chans:
        raise ScreenError(
            f"{source}: {c} channels, but the encoder was built for {encoder.in_chans}; "
            "a checkpoint trained on another channel count needs a channel-agnostic model"
        )
    if (h, w) != size:
        raise ScreenError(f"{source}: crops are {h}x{w}, but the encoder takes {size[0]}x{size[1]}")


# --------------------------------------------------------------------------------------------
# Masked autoencoder
# --------------------------------------------------------------------------------------------


def patchify(imgs: torch.Tensor, patch_size: int, channel_agnostic: bool) -> torch.Tensor:
    """Pixels of every token, in the encoder's token order.

    Standard: (B, C, H, W) -> (B, N, p*p*C) (pixel-major, channel-minor); channel-agnostic:
    -> (B, C*N, p*p), token ``c * N + n`` = patch ``n`` of channel ``c``.
    """
    b, c, h, w = imgs.shape
    p = patch_size
    gh, gw = h // p, w // p
    x = imgs.reshape(b, c, gh, p, gw, p)
    if channel_agnostic:
        return x.permute(0, 1, 2, 4, 3, 5).reshape(b, c * gh * gw, p * p)
    return x.permute(0, 2, 4, 3, 5, 1).reshape(b, gh * gw, p * p * c)


def random_masking(
    tokens: torch.Tensor, mask_ratio: float, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Keep a random ``round((1 - mask_ratio) * L)`` tokens of each sample (at least one).

    Returns (visible (B, K, D), mask (B, L) with 1 = masked, ids_restore (B, L)). The noise is
    drawn on the CPU from ``generator`` so the choice is the same on every device.
    """
    b, n, d = tokens.shape
    if not 0.0 <= mask_ratio < 1.0:
        raise ValueError(f"mask_ratio must be in [0, 1), got {mask_ratio}")
    keep = max(1, int(round((1.0 - mask_ratio) * n)))
    noise = torch.rand(b, n, generator=generator).to(tokens.device)
    ids_shuffle = torch.argsort(noise, dim=1)
    ids_restore = torch.argsort(ids_shuffle, dim=1)
    ids_keep = ids_shuffle[:, :keep]
    visible = torch.gather(tokens, 1, ids_keep.unsqueeze(-1).expand(-1, -1, d))
    mask = torch.ones(b, n, device=tokens.device)
    mask[:, :keep] = 0
    mask = torch.gather(mask, 1, ids_restore)
    return visible, mask, ids_restore


def reconstruction_loss(
    target: torch.Tensor, pred: torch.Tensor, mask: torch.Tensor, norm_pix_loss: bool = True
) -> torch.Tensor:
    """Mean squared error over masked tokens only.

    ``target`` and ``pred`` are (B, L, P) token pixels, ``mask`` (B, L) with 1 = masked. With
    ``norm_pix_loss`` each target token is standardised over its own pixels first.
    """
    target = target.float()
    if norm_pix_loss:
        mean = target.mean(dim=-1, keepdim=True)
        var = target.var(dim=-1, keepdim=True, unbiased=False)
        target = (target - mean) / (var + 1e-6).sqrt()
    per_token = ((pred.float() - target) ** 2).mean(dim=-1)
    return (per_token * mask).sum() / mask.sum().clamp_min(1.0)


class MaskedAutoencoder(nn.Module):
    """MAE: the timm ViT ``encoder`` on visible tokens + a light transformer ``decoder``.

    ``state_dict`` keys are ``encoder.*`` (timm names) and ``decoder.*``.
    """

    def __init__(
        self,
        encoder: VisionTransformer,
        decoder_embed_dim: int = 64,
        decoder_depth: int = 2,
        decoder_num_heads: int = 4,
        mlp_ratio: float = 4.0,
        norm_pix_loss: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if decoder_embed_dim % decoder_num_heads:
            raise ValueError(
                f"decoder_embed_dim {decoder_embed_dim} is not divisible by decoder_num_heads {decoder_num_heads}"
            )
        self.encoder = encoder
        self.channel_agnostic = is_channel_agnostic(encoder)
        self.patch_size = int(encoder.patch_embed.patch_size[0])
        self.grid = int(encoder.patch_embed.grid_size[0])
        self.norm_pix_loss = norm_pix_loss
        if not self.channel_agnostic:
            encoder.pos_embed.requires_grad_(False)  # fixed sin-cos positions during pretraining
        embed_dim = encoder.embed_dim
        n_pixels = self.patch_size**2 * (1 if self.channel_agnostic else encoder.in_chans)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + 1)
            decoder = nn.Module()
            decoder.embed = nn.Linear(embed_dim, decoder_embed_dim)
            decoder.mask_token = nn.Parameter(torch.zeros(1, 1, decoder_embed_dim))
            decoder.blocks = nn.Sequential(
                *[Block(decoder_embed_dim, decoder_num_heads, mlp_ratio, qkv_bias=True) for _ in range(decoder_depth)]
            )
            decoder.norm = nn.LayerNorm(decoder_embed_dim)
            decoder.pred = nn.Linear(decoder_embed_dim, n_pixels)
            if self.channel_agnostic:
                decoder.channel_embed = nn.Parameter(torch.zeros(MAX_CHANNELS, decoder_embed_dim))
                nn.init.trunc_normal_(decoder.channel_embed, std=0.02)
            nn.init.normal_(decoder.mask_token, std=0.02)
            for module in decoder.modules():
                if isinstance(module, nn.Linear):
                    nn.init.xavier_uniform_(module.weight)
                    nn.init.zeros_(module.bias)
        self.decoder = decoder
        self.register_buffer("decoder_spatial", sincos_grid(self.grid, decoder_embed_dim), persistent=False)

    def _decoder_positions(self, n_chans: int) -> torch.Tensor:
        """(1, 1 + L, Dd) decoder positions: zero for the class token, then one per token."""
        spatial = self.decoder_spatial
        if self.channel_agnostic:
            pos = spatial.repeat(n_chans, 1) + self.decoder.channel_embed[:n_chans].repeat_interleave(
                spatial.shape[0], dim=0
            )
        else:
            pos = spatial
        return torch.cat([torch.zeros_like(pos[:1]), pos]).unsqueeze(0)

    def encode_visible(
        self, imgs: torch.Tensor, mask_ratio: float, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Encoder on a random visible subset: (latent (B, 1+K, D), mask (B, L), ids_restore)."""
        enc = self.encoder
        tokens = enc.patch_embed(imgs)
        if not self.channel_agnostic:
            tokens = tokens + enc.pos_embed[:, 1:]
        visible, mask, ids_restore = random_masking(tokens, mask_ratio, generator)
        cls = enc.cls_token if self.channel_agnostic else enc.cls_token + enc.pos_embed[:, :1]
        x = torch.cat([cls.expand(visible.shape[0], -1, -1), visible], dim=1)
        x = enc.norm(enc.blocks(enc.norm_pre(x)))
        return x, mask, ids_restore

    def decode(self, latent: torch.Tensor, ids_restore: torch.Tensor, n_chans: int) -> torch.Tensor:
        """Predicted pixels of every token (B, L, P) from the visible latents."""
        dec = self.decoder
        x = dec.embed(latent)
        b, n_tokens = ids_restore.shape
        masked = dec.mask_token.to(x.dtype).expand(b, n_tokens + 1 - x.shape[1], -1)
        body = torch.cat([x[:, 1:], masked], dim=1)
        body = torch.gather(body, 1, ids_restore.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
        x = torch.cat([x[:, :1], body], dim=1) + self._decoder_positions(n_chans)
        x = dec.norm(dec.blocks(x))
        return dec.pred(x)[:, 1:]

    def forward(
        self, imgs: torch.Tensor, mask_ratio: float = 0.75, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss, pred (B, L, P), mask (B, L)) for normalized crops (B, C, img, img)."""
        check_input(self.encoder, imgs, "MAE input")
        latent, mask, ids_restore = self.encode_visible(imgs, mask_ratio, generator)
        pred = self.decode(latent, ids_restore, imgs.shape[1])
        target = patchify(imgs, self.patch_size, self.channel_agnostic)
        return reconstruction_loss(target, pred, mask, self.norm_pix_loss), pred, mask


def build_mae(spec: Mapping[str, Any], in_chans: int, seed: int = 0, norm_pix_loss: bool = True) -> MaskedAutoencoder:
    """Encoder (:func:`build_encoder`) + decoder from a model spec, initialised from ``seed``."""
    return MaskedAutoencoder(
        build_encoder(spec, in_chans, seed=seed),
        decoder_embed_dim=spec["decoder_embed_dim"],
        decoder_depth=spec["decoder_depth"],
        decoder_num_heads=spec["decoder_num_heads"],
        mlp_ratio=float(spec["mlp_ratio"]),
        norm_pix_loss=norm_pix_loss,
        seed=seed,
    )


# --------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------


def _arch_of(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {k: spec[k] for k in ARCH_KEYS if k in spec}


def save_checkpoint(
    model: nn.Module, spec: Mapping[str, Any], path: Path | str, extra: Mapping[str, Any] | None = None
) -> Path:
    """Write encoder weights (timm key names) and, for an MAE, ``decoder.*`` weights as safetensors.

    ``model`` is a MaskedAutoencoder, a VisionTransformer or a FeatureExtractor. The
    architecture spec and input channel count go into the file's metadata, with ``extra``
    (JSON-encoded values) under ``phenoica.<key>``. Written atomically.
    """
    if isinstance(model, MaskedAutoencoder):
        encoder, decoder = model.encoder, model.decoder
    elif isinstance(model, FeatureExtractor):
        encoder, decoder = model.encoder, None
    elif isinstance(model, VisionTransformer):
        encoder, decoder = model, None
    else:
        raise TypeError(
            "save_checkpoint: expected an MAE, a VisionTransformer or a FeatureExtractor, "
            f"got {type(model).__name__}"
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
    return path


def checkpoint_metadata(path: Path | str) -> dict[str, Any]:
    """Decoded phenoica metadata of a .safetensors checkpoint ({} for other files or none)."""
    path = Path(path)
    if path.suffix != ".safetensors":
        return {}
    with safe_open(str(path), framework="pt") as fh:
        raw = fh.metadata() or {}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key.startswith("phenoica."):
            try:
                out[key[len("phenoica."):]] = json.loads(value)
            except json.JSONDecodeError:
                out[key[len("phenoica."):]] = value
    return out


def _unwrap_state_dict(obj: Any, path: Path) -> dict[str, torch.Tensor]:
    """A flat {name: tensor} from a torch-saved object, descending into 'model'/'state_dict'."""
    for _ in range(4):
        if isinstance(obj, Mapping) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
            return dict(obj)
        if isinstance(obj, Mapping):
            inner = next((obj[k] for k in ("model", "state_dict", "module") if isinstance(obj.get(k), Mapping)), None)
            if inner is not None:
                obj = inner
                continue
        break
    keys = list(obj)[:8] if isinstance(obj, Mapping) else type(obj).__name__
    raise CheckpointError(
        f"{path}: not a state dict of tensors (also looked under 'model' / 'state_dict'); found {keys}"
    )


def _strip_prefixes(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in state.items():
        changed = True
        while changed:
            changed = False
            for prefix in ("module.", "encoder."):
                if key.startswith(prefix):
                    key, changed = key[len(prefix):], True
        out[key] = value
    return out


def read_state_dict(path: Path | str) -> dict[str, torch.Tensor]:
    """Tensors of a .safetensors or torch (.pth/.pt/.bin) checkpoint, prefixes stripped."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: checkpoint not found")
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        state = load_file(str(path))
    elif suffix in {".pth", ".pt", ".bin", ".ckpt"}:
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises several types for unreadable files
            raise CheckpointError(f"{path}: cannot read torch checkpoint ({exc})") from None
        state = _unwrap_state_dict(obj, path)
    else:
        raise CheckpointError(
            f"{path}: expected a .safetensors, .pth, .pt, .bin or .ckpt checkpoint, got {suffix or 'no extension'}"
        )
    return _strip_prefixes(state)


def load_encoder(
    path: Path | str, spec: Mapping[str, Any], in_chans: int, log: logging.Logger | None = None
) -> VisionTransformer:
    """Load a checkpoint into ``build_encoder(spec, in_chans)``, strictly.

    Accepts .safetensors (phenoica or timm) and torch state dicts, possibly nested under
    ``model``/``state_dict`` and with ``module.``/``encoder.`` prefixes. MAE decoder keys
    (``decoder*``, ``mask_token``) and a classifier ``head.*`` are skipped. Any missing key,
    unexpected key or shape mismatch raises CheckpointError listing them with the file name;
    a checkpoint trained on another channel count says so.
    """
    path = Path(path)
    state = read_state_dict(path)
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
    expected = encoder.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    mismatched = [
        f"{k} checkpoint {tuple(state[k].shape)} vs model {tuple(expected[k].shape)}"
        for k in sorted(set(state) & set(expected))
        if tuple(state[k].shape) != tuple(expected[k].shape)
    ]
    if missing or unexpected or mismatched:
        parts = []
        if missing:
            parts.append(f"missing keys {missing}")
        if unexpected:
            parts.append(f"unexpected keys {unexpected}")
        if mismatched:
            parts.append(f"shape mismatches [{'; '.join(mismatched)}]")
        raise CheckpointError(f"{path}: checkpoint does not fit the model spec: " + ", ".join(parts))
    encoder.load_state_dict(state, strict=True)
    return encoder


# --------------------------------------------------------------------------------------------
# Feature extraction
# --------------------------------------------------------------------------------------------


class FeatureExtractor(nn.Module):
    """Encoder + pooling: normalized crops (B, C, img, img) -> features (B, D) float32.

    ``pool="mean"`` averages the patch tokens (class token excluded); ``"cls"`` takes the class
    token. Both after the encoder's final norm.
    """

    def __init__(self, encoder: VisionTransformer, pool: str = "mean") -> None:
        super().__init__()
        if pool not in POOLS:
            raise ValueError(f"pool must be one of {POOLS}, got {pool!r}")
        if pool == "cls" and encoder.cls_token is None:
            raise ValueError("pool 'cls' needs an encoder with a class token")
        self.encoder = encoder
        self.pool = pool
        self.feature_dim = int(encoder.embed_dim)
        # Channels the extractor takes; None = any count up to MAX_CHANNELS (channel-agnostic).
        self.in_chans: int | None = None if is_channel_agnostic(encoder) else int(encoder.in_chans)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(self.encoder, x, "FeatureExtractor input")
        tokens = self.encoder.forward_features(x)
        pooled = self.encoder.pool(tokens, pool_type="avg" if self.pool == "mean" else "token")
        return pooled.float()


def build_feature_extractor(
    spec: Mapping[str, Any], in_chans: int, checkpoint: Path | str | None = None
) -> FeatureExtractor:
    """Feature extractor of a spec, weights from ``checkpoint`` (or seeded random init), eval mode."""
    if checkpoint is None:
        encoder = build_encoder(spec, in_chans, seed=int(spec.get("seed", 0)))
    else:
        encoder = load_encoder(Path(checkpoint), spec, in_chans)
    return FeatureExtractor(encoder, pool=spec.get("pool", "mean")).eval()


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


def resolve_device(device: str = "auto") -> torch.device:
    """'auto' = CUDA when available else CPU; 'cuda' (or 'cuda:N') without a GPU is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but no CUDA device is available")
        return torch.device(device)
    raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")


def sample_training_images(stores: list[Path], max_images: int, seed: int) -> list[np.ndarray]:
    """Up to ``max_images`` images drawn (seeded, without replacement) across plate stores.

    Returns one uint array (n_p, C, H, W) per store that contributed images. All stores must
    have the same channel count.
    """
    if not stores:
        raise ValueError("train_mae: no plate stores given")
    tiles = [open_plate(s) for s in stores]
    chans = {int(t.shape[1]) for t in tiles}
    if len(chans) > 1:
        detail = ", ".join(f"{s}: {t.shape[1]}" for s, t in zip(stores, tiles))
        raise ScreenError(f"plate stores differ in channel count ({detail}); one model needs one channel count")
    counts = np.array([t.shape[0] for t in tiles], dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        raise ScreenError(f"plate stores {[str(s) for s in stores]} hold no images")
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(total, size=min(max_images, total), replace=False))
    bounds = np.concatenate([[0], np.cumsum(counts)])
    out = []
    for i, t in enumerate(tiles):
        idx = chosen[(chosen >= bounds[i]) & (chosen < bounds[i + 1])] - bounds[i]
        if len(idx):
            out.append(np.asarray(t.get_orthogonal_selection((idx,))))
    return out


def random_crops(
    images: list[np.ndarray],
    batch_size: int,
    crop: int,
    generator: torch.Generator,
    intensity_max: float | None = None,
) -> torch.Tensor:
    """A batch of ``crop`` x ``crop`` random crops of randomly chosen images, preprocessed.

    Each chosen image is scaled and instance-normalized whole (phenoica.preprocess), then one
    random crop is cut. Returns (batch_size, C, crop, crop) float32 (CPU).
    """
    sizes = torch.tensor([len(a) for a in images])
    owner = torch.repeat_interleave(torch.arange(len(images)), sizes)
    pick = torch.randint(0, int(sizes.sum()), (batch_size,), generator=generator)
    offsets = torch.cumsum(sizes, 0) - sizes
    crops = []
    for p in torch.unique(owner[pick]).tolist():
        rows = (pick[owner[pick] == p] - offsets[p]).numpy()
        imgs = normalize_per_channel(scale_intensity(images[p][rows], intensity_max, f"training images of store {p}"))
        h, w = imgs.shape[-2:]
        if h < crop or w < crop:
            raise ScreenError(f"training images are {h}x{w}, smaller than the model's img_size {crop}")
        tops = torch.randint(0, h - crop + 1, (len(rows),), generator=generator).tolist()
        lefts = torch.randint(0, w - crop + 1, (len(rows),), generator=generator).tolist()
        crops.extend(img[:, t : t + crop, l : l + crop] for img, t, l in zip(imgs, tops, lefts))
    return torch.stack(crops)


def warmup_cosine(step: int, warmup_steps: int, total_steps: int) -> float:
    """Learning-rate factor: linear warmup to 1 over ``warmup_steps``, then cosine to 0."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def _param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: no weight decay on biases, norms, tokens and embeddings (1-D or tables)."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim <= 1 or name.endswith(("cls_token", "mask_token", "pos_embed", "channel_embed")):
            no_decay.append(param)
        else:
            decay.append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def train_mae(
    stores: list[Path],
    spec: Mapping[str, Any],
    train: Mapping[str, Any],
    seed: int,
    out: Path,
    log: logging.Logger | None = None,
    device: str = "auto",
    on_step: Callable[[int, float], None] | None = None,
    intensity_max: float | None = None,
) -> dict[str, Any]:
    """Masked-autoencoder pretraining on the screen's own tiles; writes a safetensors checkpoint.

    Samples up to ``train["max_images"]`` images (seeded) across ``stores``, draws a random
    ``spec["img_size"]`` crop per image per step, trains with AdamW (warmup + cosine) for
    ``train["steps"]`` steps, logs every ``train["log_every"]`` steps and writes ``out``
    atomically. CUDA with bf16 autocast when available (and ``device`` allows). ``on_step``
    is called with (step, loss) after each step; ``intensity_max`` is passed to
    preprocessing (as the embedding stage's ``embed.intensity_max``). Returns a summary dict.
    """
    log = log or get_logger("phenoica.mae")
    dev = resolve_device(device)
    t0 = time.perf_counter()
    images = sample_training_images([Path(s) for s in stores], int(train["max_images"]), seed)
    in_chans = int(images[0].shape[1])
    n_images = sum(len(a) for a in images)
    load_s = time.perf_counter() - t0
    log.info("MAE training on %d images (%d channels, %.0f MB in memory) from %d store(s), loaded in %.1f s, "
             "device %s", n_images, in_chans, sum(a.nbytes for a in images) / 2**20, len(stores), load_s, dev)

    model = build_mae(spec, in_chans, seed=seed, norm_pix_loss=bool(train["norm_pix_loss"])).to(dev)
    model.train()
    steps, batch_size = int(train["steps"]), int(train["batch_size"])
    optimizer = torch.optim.AdamW(_param_groups(model, float(train["weight_decay"])), lr=float(train["lr"]),
                                  betas=(0.9, 0.95))
    warmup = int(train["warmup_steps"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: warmup_cosine(s, warmup, steps))
    generator = torch.Generator().manual_seed(seed)
    use_bf16 = dev.type == "cuda"
    mask_ratio, log_every = float(train["mask_ratio"]), int(train["log_every"])

    losses: list[float] = []
    t_train = time.perf_counter()
    t_window, last_logged = t_train, 0
    for step in range(1, steps + 1):
        batch = random_crops(images, batch_size, int(spec["img_size"]), generator, intensity_max).to(dev)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=use_bf16):
            loss, _, _ = model(batch, mask_ratio, generator)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        value = float(loss.detach())
        if not math.isfinite(value):
            raise FloatingPointError(f"MAE training diverged at step {step}: loss {value}")
        losses.append(value)
        if on_step is not None:
            on_step(step, value)
        if step % log_every == 0 or step == steps:
            now = time.perf_counter()
            window = step - last_logged
            rate = window * batch_size / max(now - t_window, 1e-9)
            log.info("step %d/%d loss %.4f lr %.2e %.0f img/s", step, steps,
                     float(np.mean(losses[-window:])), scheduler.get_last_lr()[0], rate)
            t_window, last_logged = now, step
    train_s = time.perf_counter() - t_train
    tail = max(1, min(log_every, steps))
    summary = {
        "steps": steps,
        "batch_size": batch_size,
        "n_images": n_images,
        "in_chans": in_chans,
        "initial_loss": float(np.mean(losses[:tail])),
        "final_loss": float(np.mean(losses[-tail:])),
        "last_loss": losses[-1],
        "images_per_s": steps * batch_size / max(train_s, 1e-9),
        "train_seconds": train_s,
        "load_seconds": load_s,
        "device": str(dev),
        "seed": seed,
    }
    save_checkpoint(model, spec, out, extra={"train_summary": summary})
    summary["checkpoint"] = str(out)
    log.info("MAE training done: loss %.4f -> %.4f, %.0f img/s, checkpoint %s",
             summary["initial_loss"], summary["final_loss"], summary["images_per_s"], out)
    return summary
