"""The torch device a job runs on, from the config's ``device`` value."""

from __future__ import annotations

import torch


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
