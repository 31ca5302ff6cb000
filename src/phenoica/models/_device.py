"""The torch device a job runs on, and how tensors travel between the host and it.

:func:`resolve_device` turns the config's ``embed.device`` (with ``embed.without_cuda``) into a
``torch.device``. :class:`Staging` moves chunks host -> device and embeddings device -> host:
on CUDA through pinned memory and a side stream, so that copies overlap the forward; on the
CPU the same calls are plain (synchronous, no copies), so the one code path runs everywhere.
:func:`keep_freed_memory` lets a job's process reuse the memory of freed tensors instead of
handing it back to the system after every batch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
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


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 * 2**20  # glibc's largest: blocks above it still come from (and go back to) mmap
TRIM_THRESHOLD = 2**30


def keep_freed_memory() -> bool:
    """Keep freed heap memory in the process for the next allocation (glibc's ``mallopt``):
    blocks up to 32 MiB come from the heap, and up to 1 GiB freed at its top stays there.

    A CPU forward allocates the same large activations at every batch; with glibc's defaults
    they are mapped afresh and page-faulted in each time (system CPU time), because the heap's
    top is handed back to the system above a threshold that adapts to the block sizes. The
    numbers computed do not change, only where their memory comes from; the process keeps its
    peak heap until it exits. Returns whether it applied (False without glibc, e.g. on macOS).
    """
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):
        mallopt = None
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


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
