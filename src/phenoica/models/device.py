"""The torch device a job runs on, and how tensors travel between the host and it.

:func:`resolve_device` turns the config's ``embed.device`` (with ``embed.without_cuda``) into a
``torch.device``. :class:`Staging` moves chunks host -> device and embeddings device -> host:
on CUDA through pinned memory and a side stream, so that copies overlap the forward; on the
CPU the same calls are plain (synchronous, no copies), so the one code path runs everywhere.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

WITHOUT_CUDA = ("fail", "cpu")
"""What ``device: cuda`` does on a machine without CUDA: fail, or log and embed on the CPU."""


def resolve_device(device: str = "auto", without_cuda: str = "fail", log: logging.Logger | None = None) -> torch.device:
    """'auto' = CUDA when available else CPU; 'cpu'; 'cuda' (or 'cuda:N'): without a CUDA device
    this fails (``without_cuda="fail"``) or logs why and returns the CPU (``"cpu"``)."""
    if without_cuda not in WITHOUT_CUDA:
        raise ValueError(f"embed.without_cuda must be one of {WITHOUT_CUDA}, got {without_cuda!r}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda" or device.startswith("cuda:"):
        if torch.cuda.is_available():
            return torch.device(device)
        why = (
            f"device {device!r} requested (config key embed.device) but no CUDA device is available "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda or 'none'})"
        )
        if without_cuda == "fail":
            raise ValueError(f"{why}; set embed.without_cuda: cpu to fall back to the CPU")
        (log or logging.getLogger("phenoica.embed")).warning(
            "%s: falling back to the CPU (float32, no bf16 autocast), as embed.without_cuda: cpu says", why
        )
        return torch.device("cpu")
    raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")


@dataclass(eq=False)
class InFlight:
    """A tensor on its way (to the device or back): ``done`` is the CUDA event after which it
    may be used (None on the CPU: it is ready); ``source`` keeps the copy's source alive."""

    tensor: torch.Tensor
    done: torch.cuda.Event | None = None
    source: torch.Tensor | None = None


class Staging:
    """Host <-> device transfers of one embedding run.

    ``upload`` (called in a loader thread) pins a host tensor and copies it to the device on a
    side stream; ``take`` (the model's thread) makes the compute stream wait for that copy;
    ``download`` queues the device -> pinned host copy of a result on the compute stream; and
    ``result`` (the writer's thread) waits for it and returns the numpy array. On the CPU all
    four are plain: nothing is copied, nothing waits.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.copy_stream = torch.cuda.Stream(device) if self.cuda else None

    def upload(self, host: torch.Tensor) -> InFlight:
        if not self.cuda:
            return InFlight(host)
        pinned = host if host.is_pinned() else host.pin_memory()
        with torch.cuda.stream(self.copy_stream):
            on_device = pinned.to(self.device, non_blocking=True)
            done = torch.cuda.Event()
            done.record(self.copy_stream)
        return InFlight(on_device, done, pinned)

    def take(self, item: InFlight) -> torch.Tensor:
        if item.done is not None:
            compute = torch.cuda.current_stream(self.device)
            compute.wait_event(item.done)
            item.tensor.record_stream(compute)  # its memory was allocated on the copy stream
        return item.tensor

    def download(self, result: torch.Tensor) -> InFlight:
        if not self.cuda:
            return InFlight(result)
        host = torch.empty(result.shape, dtype=result.dtype, pin_memory=True)
        host.copy_(result, non_blocking=True)
        done = torch.cuda.Event()
        done.record(torch.cuda.current_stream(self.device))
        return InFlight(host, done, result)

    @staticmethod
    def result(item: InFlight) -> np.ndarray:
        if item.done is not None:
            item.done.synchronize()
        return item.tensor.numpy().astype(np.float32, copy=False)
