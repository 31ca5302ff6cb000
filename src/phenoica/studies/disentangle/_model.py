"""The study's models: one convolutional encoder/decoder for AE, beta-VAE, beta-TCVAE and BioAE, their losses and training loop."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from phenoica.models import resolve_device
from phenoica.studies.disentangle._data import FactorDataset, eval_index
from phenoica.studies.disentangle._options import DisentangleTrainOptions
from phenoica.utils import atomic_path

MODELS: tuple[str, ...] = ("ae", "beta_vae", "beta_tcvae", "bioae")


HIDDEN = 256


def _n_convs(image_size: int) -> int:
    if image_size < 16 or image_size & (image_size - 1):
        raise ValueError(f"image size must be a power of two >= 16, got {image_size}")
    return int(math.log2(image_size)) - 2  # halve down to 4 x 4


def _scaled(units: int, width: float) -> int:
    return max(4, int(round(units * width)))


def _channels(n: int, width: float = 1.0) -> list[int]:
    """Conv channels of the ``n`` layers: 32, ..., 32, 64, 64 at ``width`` 1 (scaled by ``width``)."""
    base = [32] * (n - 2) + [64, 64] if n >= 2 else [64] * n
    return [_scaled(c, width) for c in base]


class Encoder(nn.Module):
    """4x4 stride-2 conv stack (ReLU) down to 4x4, dense 256, dense ``n_out`` (units x ``width``)."""

    def __init__(self, image_size: int, n_out: int, width: float = 1.0) -> None:
        super().__init__()
        chans = [3] + _channels(_n_convs(image_size), width)
        hidden = _scaled(HIDDEN, width)
        layers: list[nn.Module] = []
        for c_in, c_out in zip(chans[:-1], chans[1:]):
            layers += [nn.Conv2d(c_in, c_out, 4, 2, 1), nn.ReLU()]
        self.net = nn.Sequential(
            *layers, nn.Flatten(), nn.Linear(chans[-1] * 16, hidden), nn.ReLU(), nn.Linear(hidden, n_out)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Decoder(nn.Module):
    """Mirror of :class:`Encoder`: dense 256, dense to 4x4, transposed convs; Bernoulli logits."""

    def __init__(self, image_size: int, latent_dim: int, width: float = 1.0) -> None:
        super().__init__()
        chans = ([3] + _channels(_n_convs(image_size), width))[::-1]
        hidden = _scaled(HIDDEN, width)
        self.top = chans[0]
        layers: list[nn.Module] = []
        for i, (c_in, c_out) in enumerate(zip(chans[:-1], chans[1:])):
            layers.append(nn.ConvTranspose2d(c_in, c_out, 4, 2, 1))
            if i < len(chans) - 2:
                layers.append(nn.ReLU())
        self.dense = nn.Sequential(
            nn.Linear(latent_dim, hidden), nn.ReLU(), nn.Linear(hidden, self.top * 16), nn.ReLU()
        )
        self.net = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(self.dense(z).view(-1, self.top, 4, 4))


class FactorAE(nn.Module):
    """Encoder + decoder; ``variational`` encoders output (mean, log-variance)."""

    def __init__(self, image_size: int, latent_dim: int, variational: bool, width: float = 1.0) -> None:
        super().__init__()
        self.latent_dim = latent_dim
        self.variational = variational
        self.encoder = Encoder(image_size, 2 * latent_dim if variational else latent_dim, width)
        self.decoder = Decoder(image_size, latent_dim, width)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = self.encoder(x)
        if self.variational:
            mu, logvar = h.chunk(2, dim=1)
            return mu, logvar.clamp(-12.0, 8.0)
        return h, None


def build_model(model: str, image_size: int, latent_dim: int, width: float = 1.0) -> FactorAE:
    """The network of ``model``; ``width`` scales every conv channel count and dense layer (1 = 32/64 channels, 256 units)."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    if latent_dim < 2:
        raise ValueError(f"latent_dim must be >= 2, got {latent_dim}")
    if not width > 0:
        raise ValueError(f"width must be > 0, got {width}")
    return FactorAE(image_size, latent_dim, variational=model in ("beta_vae", "beta_tcvae"), width=float(width))


def gaussian_log_density(z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    return -0.5 * (math.log(2 * math.pi) + logvar + (z - mu) ** 2 * torch.exp(-logvar))


def tc_decomposition(
    z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor, dataset_size: int
) -> dict[str, torch.Tensor]:
    """Minibatch-weighted-sampling estimates (Chen et al. 2018) of MI, TC and dimension-wise KL (batch means).

    ``log q(z_i) ~ logsumexp_j log q(z_i | x_j) - log(N M)`` and the same per dimension for
    ``prod_k q(z_ik)``, with ``N`` the dataset size and ``M`` the batch size.
    """
    m = z.shape[0]
    pairwise = gaussian_log_density(z[:, None, :], mu[None, :, :], logvar[None, :, :])  # (M, M, D)
    log_nm = math.log(dataset_size * m)
    log_qz = torch.logsumexp(pairwise.sum(dim=2), dim=1) - log_nm
    log_prod_qzk = (torch.logsumexp(pairwise, dim=1) - log_nm).sum(dim=1)
    log_qz_x = gaussian_log_density(z, mu, logvar).sum(dim=1)
    log_pz = gaussian_log_density(z, torch.zeros_like(z), torch.zeros_like(z)).sum(dim=1)
    return {
        "mi": (log_qz_x - log_qz).mean(),
        "tc": (log_qz - log_prod_qzk).mean(),
        "dwkl": (log_prod_qzk - log_pz).mean(),
    }


def model_loss(
    model_name: str, net: FactorAE, x: torch.Tensor, options: DisentangleTrainOptions, dataset_size: int
) -> tuple[torch.Tensor, dict[str, float]]:
    """The training loss of ``model_name`` on batch ``x`` (and its parts, as floats); the losses'
    weights are ``options``'."""
    mu, logvar = net.encode(x)
    if net.variational:
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
    else:
        z = mu
    recon = F.binary_cross_entropy_with_logits(net.decoder(z), x, reduction="sum") / x.shape[0]
    parts: dict[str, torch.Tensor] = {"recon": recon}
    if model_name == "beta_vae":
        kl = 0.5 * (mu**2 + logvar.exp() - 1.0 - logvar).sum(dim=1).mean()
        parts["kl"] = kl
        loss = recon + options.beta_vae_beta * kl
    elif model_name == "beta_tcvae":
        d = tc_decomposition(z, mu, logvar, dataset_size)
        parts.update(d)
        loss = recon + d["mi"] + options.beta_tcvae_beta * d["tc"] + d["dwkl"]
    elif model_name == "bioae":
        nonneg = (F.relu(-z) ** 2).sum(dim=1).mean()
        activity = (z**2).sum(dim=1).mean()
        weights = sum((p**2).sum() for n, p in net.decoder.named_parameters() if n.endswith("weight"))
        parts.update(nonneg=nonneg, activity=activity, weight_energy=weights)
        loss = (
            recon + options.bioae_nonneg * nonneg + options.bioae_activity * activity + options.bioae_weight * weights
        )
    elif model_name == "ae":
        loss = recon
    else:
        raise ValueError(f"model must be one of {MODELS}, got {model_name!r}")
    return loss, {k: float(v.detach()) for k, v in parts.items()}


def train_model(
    model_name: str,
    data: FactorDataset,
    options: DisentangleTrainOptions,
    seed: int,
    log: Any = None,
    on_milestone: Callable[[int, FactorAE], None] | None = None,
    milestones: Sequence[int] = (),
) -> tuple[FactorAE, dict[str, Any]]:
    """Train one model with Adam (learning rate ``options.lr``) for ``options.steps`` minibatches
    of ``options.batch_size`` on ``options.device``.

    Minibatches are drawn uniformly with replacement (seeded). ``options.width`` scales the
    network, ``options.latent_dim`` is its latent size. ``on_milestone(step, net)`` is called (network in eval mode, on the
    training device; it is put back into training mode after) after each step count in
    ``milestones``: with a constant learning rate, the network at step t is exactly the
    network of a ``steps = t`` run, so one run gives a whole training-length curve. Returns the
    network (on CPU, eval mode) and a summary: per-step ``loss`` list, ``images_per_s``
    (training throughput, excluding the first 5 warm-up steps and milestone callbacks),
    ``seconds`` (training only), ``device``.
    """
    steps, batch_size, lr = int(options.steps), int(options.batch_size), float(options.lr)
    if steps < 1 or batch_size < 2 or lr <= 0:
        raise ValueError(f"steps >= 1, batch_size >= 2 and lr > 0 required, got {steps}, {batch_size}, {lr}")
    bad = [m for m in milestones if not 1 <= int(m) <= steps]
    if bad:
        raise ValueError(f"milestones must lie in 1..steps={steps}, got {bad}")
    marks = {int(m) for m in milestones}
    dev = resolve_device(options.device)
    torch.manual_seed(seed)
    net = build_model(model_name, data.image_size, int(options.latent_dim), float(options.width)).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    losses: list[float] = []
    net.train()
    train_seconds, warm_seconds = 0.0, 0.0
    warm_step = min(5, steps - 1)
    for step in range(steps):
        t0 = time.perf_counter()
        x = torch.from_numpy(data.batch(rng.integers(0, len(data), size=batch_size))).to(dev)
        loss, parts = model_loss(model_name, net, x, options, len(data))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if dev.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - t0
        train_seconds += elapsed
        if step >= warm_step:
            warm_seconds += elapsed
        if log is not None and (step % max(1, steps // 10) == 0 or step == steps - 1):
            log.info(
                "%s step %d/%d loss %.2f %s",
                model_name,
                step + 1,
                steps,
                losses[-1],
                {k: round(v, 3) for k, v in parts.items()},
            )
        if on_milestone is not None and step + 1 in marks:
            net.eval()
            on_milestone(step + 1, net)
            net.train()
    timed_steps = steps - warm_step
    summary = {
        "loss": losses,
        "seconds": train_seconds,
        "device": str(dev),
        "images_per_s": timed_steps * batch_size / max(warm_seconds, 1e-9),
    }
    return net.cpu().eval(), summary


@torch.no_grad()
def encode(net: FactorAE, data: FactorDataset, index: np.ndarray, batch_size: int = 512) -> np.ndarray:
    """Deterministic latents (posterior means for VAEs) of the images at ``index``, ``(n, latent_dim)``."""
    out = []
    dev = next(net.parameters()).device
    for i in range(0, len(index), batch_size):
        mu, _ = net.encode(torch.from_numpy(data.batch(index[i : i + batch_size])).to(dev))
        out.append(mu.cpu().numpy())
    return np.concatenate(out).astype(np.float64)


def train_and_encode(
    data: FactorDataset,
    model_name: str,
    options: DisentangleTrainOptions,
    seed: int,
    latents_path: str | Path,
    checkpoint_path: str | Path,
    log: Any = None,
) -> dict[str, Any]:
    """Train one (dataset, model, seed) as ``options`` say, write the eval-set latents (npz; the
    seeded evaluation subset of ``options.n_eval`` images) and the weights (safetensors)."""
    from safetensors.torch import save_file

    net, summary = train_model(model_name, data, options, seed, log)
    index = eval_index(len(data), int(options.n_eval), int(options.eval_seed))
    latents = encode(net, data, index)
    with atomic_path(latents_path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(
                fh,
                latents=latents,
                factors=data.factors[index],
                index=index,
                factor_names=np.array(data.factor_names),
                loss=np.array(summary["loss"]),
                images_per_s=summary["images_per_s"],
                seconds=summary["seconds"],
            )
    with atomic_path(checkpoint_path) as tmp:
        save_file(
            {k: v.contiguous() for k, v in net.state_dict().items()},
            str(tmp),
            metadata={
                "model": model_name,
                "seed": str(seed),
                "dataset": data.name,
                "latent_dim": str(options.latent_dim),
                "width": str(options.width),
                "image_size": str(data.image_size),
            },
        )
    return summary
