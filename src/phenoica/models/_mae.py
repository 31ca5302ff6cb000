"""Masked-autoencoder pretraining of phenoica's ViT on the screen's own tiles.

The MAE (:class:`MaskedAutoencoder`) masks a seeded random ``mask_ratio`` of the tokens, runs
the encoder (:func:`phenoica.models._vit.build_encoder`) on the visible ones, and a light
timm-``Block`` decoder predicts the pixels of every token; the loss is the MSE over masked
tokens only, on per-patch normalized pixels when ``norm_pix_loss``. :func:`train_mae` (rule
``train_mae``, its settings read once from the config: :class:`~phenoica.models.TrainOptions`)
writes a safetensors checkpoint (encoder keys in timm's names, decoder under ``decoder.*``).

Encoders, checkpoints, feature extraction and device choice live in the other modules of
:mod:`phenoica.models`; this module is the training only. :func:`record_training` writes the record of the plates a
model was trained on, which :func:`phenoica.workflow.training_plates` reads when the DAG is built.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from timm.models.vision_transformer import Block, VisionTransformer
from torch import nn

from phenoica.contract import ScreenError, channel_indices, open_plate, read_images
from phenoica.models._crops import CropSampler
from phenoica.models._device import resolve_device
from phenoica.models._options import TrainOptions
from phenoica.models._vit import (
    MAX_CHANNELS,
    build_encoder,
    check_input,
    is_channel_agnostic,
    save_checkpoint,
    sincos_grid,
)
from phenoica.utils import get_logger, write_json

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
# Training
# --------------------------------------------------------------------------------------------


def sample_training_images(
    stores: list[Path],
    max_images: int,
    seed: int,
    channels: Sequence[str] | None = None,
    channels_key: str = "channels",
) -> list[np.ndarray]:
    """Up to ``max_images`` images drawn (seeded, without replacement) across plate stores.

    Returns one uint array (n_p, C, H, W) per store that contributed images. ``channels``
    names the stores' channels to keep, in the model's order (None = all, as stored; a name a
    store lacks raises ScreenError naming ``channels_key``). All stores must give the same
    channel count.
    """
    if not stores:
        raise ValueError("train_mae: no plate stores given")
    tiles = [open_plate(s) for s in stores]
    selected = (
        [channel_indices(Path(s), channels, channels_key)[0] for s in stores] if channels else [None] * len(stores)
    )
    chans = {int(t.shape[1]) for t in tiles}
    if len(chans) > 1 and not channels:
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
            keep = selected[i]
            selection = (idx,) if keep is None else (idx, keep)
            source = f"{stores[i]} (plate {Path(stores[i]).name.removesuffix('.zarr')})"
            out.append(read_images(t, int(idx[0]), int(idx[-1]) + 1, source, selection))
    return out


def random_crops(
    images: list[np.ndarray],
    batch_size: int,
    crop: int,
    generator: torch.Generator,
    intensity_max: float | None = None,
) -> torch.Tensor:
    """A batch of ``crop`` x ``crop`` random crops of randomly chosen images, preprocessed.

    Each chosen image is scaled and instance-normalized whole (phenoica.screen._preprocess), then one
    random crop is cut. Returns (batch_size, C, crop, crop) float32 (CPU). One batch of
    :class:`~phenoica.models._crops.CropSampler`, which a training loop builds once.
    """
    return CropSampler(images, crop, intensity_max).batch(batch_size, generator)


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
    train: TrainOptions,
    out: Path,
    log: logging.Logger | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Masked-autoencoder pretraining on the screen's own tiles; writes a safetensors checkpoint.

    Builds the MAE of ``train.spec`` and samples up to ``train.max_images`` images across
    ``stores``, both from ``train.training_seed``; draws a random ``spec["img_size"]`` crop per
    image per step (intensities scaled by the dtype's maximum), trains with AdamW (warmup +
    cosine) for ``train.steps`` steps, logs every ``train.log_every`` steps and writes ``out``
    atomically. CUDA with bf16 autocast when available (and ``train.device`` allows).
    ``on_step`` is called with (step, loss) after each step. Returns a summary dict.
    """
    log = log or get_logger("phenoica.mae")
    spec, seed = train.spec, train.training_seed
    dev = resolve_device(train.device)
    t0 = time.perf_counter()
    images = sample_training_images([Path(s) for s in stores], train.max_images, seed, channels=spec.get("channels"))
    in_chans = int(images[0].shape[1])
    n_images = sum(len(a) for a in images)
    load_s = time.perf_counter() - t0
    log.info(
        "MAE training on %d images (%d channels, %.0f MB in memory) from %d store(s), loaded in %.1f s, device %s",
        n_images,
        in_chans,
        sum(a.nbytes for a in images) / 2**20,
        len(stores),
        load_s,
        dev,
    )

    model = build_mae(spec, in_chans, seed=seed, norm_pix_loss=train.norm_pix_loss).to(dev)
    model.train()
    t_train = time.perf_counter()
    losses = _optimize(model, images, int(spec["img_size"]), train, seed, dev, log, on_step)
    train_s = time.perf_counter() - t_train
    steps, batch_size = train.steps, train.batch_size
    tail = max(1, min(train.log_every, steps))
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
    # The file holds what training made, not how fast: the same run gives the same bytes.
    made = {k: v for k, v in summary.items() if k not in ("images_per_s", "train_seconds", "load_seconds")}
    save_checkpoint(model, spec, out, extra={"train_summary": made})
    summary["checkpoint"] = str(out)
    log.info(
        "MAE training done: loss %.4f -> %.4f, %.0f img/s, checkpoint %s",
        summary["initial_loss"],
        summary["final_loss"],
        summary["images_per_s"],
        out,
    )
    return summary


def _optimize(
    model: MaskedAutoencoder,
    images: list[np.ndarray],
    crop: int,
    train: TrainOptions,
    seed: int,
    dev: torch.device,
    log: logging.Logger,
    on_step: Callable[[int, float], None] | None,
) -> list[float]:
    """The training loop: ``train.steps`` AdamW steps (warmup + cosine) on random ``crop`` crops;
    the loss of every step."""
    steps, batch_size = train.steps, train.batch_size
    optimizer = torch.optim.AdamW(_param_groups(model, train.weight_decay), lr=train.lr, betas=(0.9, 0.95))
    warmup = train.warmup_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: warmup_cosine(s, warmup, steps))
    generator = torch.Generator().manual_seed(seed)
    sampler = CropSampler(images, crop)  # each image's channel statistics, computed once
    use_bf16 = dev.type == "cuda"
    mask_ratio, log_every = train.mask_ratio, train.log_every

    losses: list[float] = []
    t_window, last_logged = time.perf_counter(), 0
    for step in range(1, steps + 1):
        batch = sampler.batch(batch_size, generator).to(dev)
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
            log.info(
                "step %d/%d loss %.4f lr %.2e %.0f img/s",
                step,
                steps,
                float(np.mean(losses[-window:])),
                scheduler.get_last_lr()[0],
                rate,
            )
            t_window, last_logged = now, step
    return losses


def record_training(path: Path | str, stores: Sequence[Path | str], summary: Mapping[str, Any]) -> Path:
    """Write the training record atomically: ``{"plates": [...], "summary": {...}}``, the plates
    (store names without ``.zarr``) a model was trained on, which later DAGs read
    (:func:`phenoica.workflow.training_plates`) so that adding plates never retrains it."""
    plates = [Path(s).name.removesuffix(".zarr") for s in stores]
    return write_json({"plates": plates, "summary": dict(summary)}, path)
