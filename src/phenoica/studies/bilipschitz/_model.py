"""The study's leaky-ReLU MLP autoencoders (negative-side slope 1 - alpha) and their training loop."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import orthogonal

from phenoica.models import resolve_device

if TYPE_CHECKING:
    from phenoica.studies.bilipschitz._options import BilipschitzTrainOptions

PARAMETRIZATIONS: tuple[str, ...] = ("orthogonal", "none")


def negative_slope(alpha: float) -> float:
    """Negative-side slope ``1 - alpha`` of the leaky ReLU for nonlinearity strength alpha in [0, 1]."""
    if not (0.0 <= float(alpha) <= 1.0) or math.isnan(float(alpha)):
        raise ValueError(f"alpha must lie in [0, 1] (0 = linear, 1 = ReLU), got {alpha!r}")
    return 1.0 - float(alpha)


def mlp(sizes: Sequence[int], alpha: float, parametrization: str = "orthogonal") -> nn.Sequential:
    """Linear layers through ``sizes`` with the alpha leaky ReLU between them (none after the last).

    ``parametrization="orthogonal"`` makes every weight matrix semi-orthogonal during training
    (``torch.nn.utils.parametrizations.orthogonal`` with the Cayley map: orthonormal rows when
    the layer narrows, orthonormal columns when it widens); ``"none"`` leaves the layers
    unconstrained.
    """
    if len(sizes) < 2 or any(int(s) < 1 for s in sizes):
        raise ValueError(f"an MLP needs two or more positive layer sizes, got {list(sizes)}")
    if parametrization not in PARAMETRIZATIONS:
        raise ValueError(f"parametrization must be one of {PARAMETRIZATIONS}, got {parametrization!r}")
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        linear = nn.Linear(int(a), int(b))
        if parametrization == "orthogonal":
            linear = orthogonal(linear, orthogonal_map="cayley")
        layers.append(linear)
        if i < len(sizes) - 2:
            layers.append(nn.LeakyReLU(negative_slope(alpha)))
    return nn.Sequential(*layers)


class Autoencoder(nn.Module):
    """MLP encoder R^D -> R^d and mirrored decoder, leaky-ReLU slope ``1 - alpha``, layers as ``parametrization``."""

    def __init__(
        self, in_dim: int, latent_dim: int, hidden: Sequence[int], alpha: float, parametrization: str = "orthogonal"
    ) -> None:
        super().__init__()
        if latent_dim < 1 or in_dim < 1:
            raise ValueError(f"in_dim and latent_dim must be positive, got {in_dim}, {latent_dim}")
        self.alpha = float(alpha)
        self.parametrization = parametrization
        self.encoder = mlp([in_dim, *hidden, latent_dim], alpha, parametrization)
        self.decoder = mlp([latent_dim, *reversed(list(hidden)), in_dim], alpha, parametrization)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))

    def freeze(self) -> "Autoencoder":
        """Replace each parametrized weight by its current (orthogonal) value: plain linear
        layers computing the same function, cheaper to differentiate through."""
        for module in self.modules():
            if parametrize.is_parametrized(module):
                for name in list(module.parametrizations.keys()):
                    parametrize.remove_parametrizations(module, name, leave_parametrized=True)
        return self


@dataclass(frozen=True)
class TrainSettings:
    """How one autoencoder is trained: its shape (``latent_dim``, ``hidden``, ``parametrization``),
    the optimizer's run (``epochs``, ``batch_size``, ``lr``), early stopping (``converge_tol``,
    ``converge_window``; tol 0 never stops early) and the torch ``device``; the study's are
    :meth:`from_options`."""

    latent_dim: int
    hidden: Sequence[int]
    epochs: int
    batch_size: int
    lr: float
    parametrization: str
    converge_tol: float
    converge_window: int
    device: str

    @classmethod
    def from_options(cls, options: BilipschitzTrainOptions, dataset: str) -> TrainSettings:
        """The study's training settings (:class:`~phenoica.studies.bilipschitz.BilipschitzTrainOptions`)
        for one dataset: the isometric dataset's latent size is ``isometric_latent_dim``."""
        latent = options.isometric_latent_dim if dataset == "isometric" else options.latent_dim
        return cls(
            latent_dim=int(latent),
            hidden=tuple(options.hidden),
            epochs=int(options.epochs),
            batch_size=int(options.batch_size),
            lr=float(options.lr),
            parametrization=str(options.parametrization),
            converge_tol=float(options.converge_tol),
            converge_window=int(options.converge_window),
            device=str(options.device),
        )


def train_autoencoder(x: np.ndarray, alpha: float, seed: int, train: TrainSettings) -> tuple[Autoencoder, list[float]]:
    """Train an :class:`Autoencoder` with Adam on mean squared reconstruction error.

    ``seed`` fixes the initialization and the minibatch order (settings: :class:`TrainSettings`).
    Training runs at most ``epochs``
    epochs and stops early once converged (:func:`converged` on the per-step losses, checked at
    the end of each epoch): when the mean loss of the last ``converge_window`` optimizer steps
    fell by less than ``converge_tol`` (relative) from the window before (``converge_tol=0``
    never stops early). The window counts steps, not epochs, so small datasets (few steps per
    epoch) train as many updates per check as large ones. Returns the model (on CPU, eval mode,
    parametrizations frozen into plain weights) and the mean training loss of each epoch run.
    """
    t = train
    epochs, batch_size, lr = t.epochs, t.batch_size, t.lr
    converge_tol, converge_window = t.converge_tol, t.converge_window
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"training data must be (n >= 2, D), got {x.shape}")
    if epochs < 1 or batch_size < 1 or lr <= 0:
        raise ValueError(f"epochs and batch_size must be >= 1 and lr > 0, got {epochs}, {batch_size}, {lr}")
    if converge_tol < 0 or converge_window < 1:
        raise ValueError(f"converge_tol must be >= 0 and converge_window >= 1, got {converge_tol}, {converge_window}")
    dev = resolve_device(t.device)
    torch.manual_seed(seed)
    model = Autoencoder(x.shape[1], t.latent_dim, list(t.hidden), alpha, t.parametrization).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    data = torch.from_numpy(np.asarray(x, dtype=np.float32)).to(dev)
    gen = torch.Generator().manual_seed(seed)
    history: list[float] = []
    steps: list[float] = []
    next_check = 2 * converge_window
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(data.shape[0], generator=gen).to(dev)
        total = 0.0
        for start in range(0, data.shape[0], batch_size):
            xb = data[order[start : start + batch_size]]
            loss = torch.mean((model(xb) - xb) ** 2)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * xb.shape[0]
            steps.append(float(loss.detach()))
        history.append(total / data.shape[0])
        if converge_tol > 0 and len(steps) >= next_check:
            if converged(steps, converge_window, converge_tol):
                break
            next_check = len(steps) + converge_window
    model.eval()
    return model.cpu().freeze(), history


def converged(history: Sequence[float], window: int, tol: float) -> bool:
    """True when ``history`` holds two windows or more and the mean loss of its last ``window``
    entries is less than ``tol`` (relative) below the mean of the ``window`` entries before."""
    n = len(history)
    if n < 2 * window:
        return False
    last, before = float(np.mean(history[-window:])), float(np.mean(history[-2 * window : -window]))
    return (before - last) < tol * abs(before)


def late_improvement(history: Sequence[float], fraction: float = 0.1) -> float:
    """Relative fall of the epoch loss over the last ``fraction`` of training:
    ``(loss[-k-1] - loss[-1]) / loss[-1]``, ``k = max(1, round(fraction * epochs))``; NaN for one epoch.

    A converged run has a value near 0 (the study reports it per model)."""
    h = np.asarray(history, dtype=float)
    if h.size < 2:
        return math.nan
    k = min(h.size - 1, max(1, int(round(fraction * h.size))))
    return float((h[-k - 1] - h[-1]) / max(abs(h[-1]), 1e-300))
