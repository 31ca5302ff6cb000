"""Reading checkpoint files: safetensors or torch pickles, told apart by their bytes.

A file's name does not decide how it is read: published microscopy checkpoints circulate as
torch pickles named ``.safetensors``, so :func:`file_format` looks at the first bytes. Weights
nested under ``state_dict`` / ``model`` / ``module`` (torch) are unwrapped; key prefixes are
left as they are (each architecture's loader decides which prefixes it expects).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Mapping

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

SAFETENSORS = "safetensors"
TORCH = "torch"
_SUFFIX_FORMAT = {".safetensors": SAFETENSORS, ".pth": TORCH, ".pt": TORCH, ".bin": TORCH, ".ckpt": TORCH}
_CONTAINERS = ("state_dict", "model", "module")


class CheckpointError(ValueError):
    """A checkpoint that does not fit the requested encoder; the message names the file."""


def file_format(path: Path | str) -> str:
    """``"safetensors"`` or ``"torch"``, from the file's first bytes (not its name).

    safetensors files start with an 8-byte little-endian header length and a JSON header; torch
    checkpoints are zip archives (``PK``) or, in the legacy format, a pickle (``0x80``).
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    with open(path, "rb") as fh:
        head = fh.read(9)
    size = path.stat().st_size
    if len(head) == 9 and head[8:9] == b"{" and 0 < int.from_bytes(head[:8], "little") <= size - 8:
        return SAFETENSORS
    if head[:4] == b"PK\x03\x04" or head[:1] == b"\x80":
        return TORCH
    raise CheckpointError(f"{path}: neither a safetensors file nor a torch checkpoint (starts with bytes {head[:8]!r})")


def _unwrap(obj: Any, path: Path) -> dict[str, torch.Tensor]:
    """A flat {name: tensor} from a torch-saved object, descending into state_dict/model/module."""
    for _ in range(4):
        if isinstance(obj, Mapping) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
            return dict(obj)
        if isinstance(obj, Mapping):
            inner = next((obj[k] for k in _CONTAINERS if isinstance(obj.get(k), Mapping)), None)
            if inner is not None:
                obj = inner
                continue
        break
    keys = list(obj)[:8] if isinstance(obj, Mapping) else type(obj).__name__
    raise CheckpointError(
        f"{path}: not a state dict of tensors (also looked under 'model' / 'state_dict'); found {keys}"
    )


def read_checkpoint(path: Path | str, log: logging.Logger | None = None) -> dict[str, torch.Tensor]:
    """All tensors of a checkpoint, unwrapped from ``state_dict``/``model``/``module``.

    The format comes from the bytes (:func:`file_format`); a name that says otherwise is logged.
    Flat safetensors keys under a ``state_dict.`` prefix (the torch nesting, flattened) lose it.
    """
    path = Path(path)
    fmt = file_format(path)
    named = _SUFFIX_FORMAT.get(path.suffix.lower())
    if named is not None and named != fmt and log is not None:
        log.info("%s: the file is a %s checkpoint despite its %s name; reading it as one", path, fmt, path.suffix)
    if fmt == SAFETENSORS:
        try:
            state = load_file(str(path))
        except (SafetensorError, OSError) as exc:
            raise CheckpointError(f"{path}: cannot read safetensors checkpoint ({exc})") from None
        for container in _CONTAINERS:
            prefix = container + "."
            if state and all(k.startswith(prefix) for k in state):
                state = {k[len(prefix) :]: v for k, v in state.items()}
                break
        return state
    try:  # from an open file: given a path named .safetensors, torch would hand it to safetensors
        with open(path, "rb") as fh:
            obj = torch.load(fh, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for unreadable files
        raise CheckpointError(f"{path}: cannot read torch checkpoint ({exc})") from None
    return _unwrap(obj, path)


def strip_prefixes(state: Mapping[str, torch.Tensor], prefixes: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """Keys with any leading run of ``prefixes`` removed (``module.encoder.x`` -> ``x``)."""
    out = {}
    for key, value in state.items():
        changed = True
        while changed:
            changed = False
            for prefix in prefixes:
                if key.startswith(prefix):
                    key, changed = key[len(prefix) :], True
        out[key] = value
    return out


def check_keys(
    path: Path | str, state: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor], what: str
) -> None:
    """Raise CheckpointError listing missing keys, unexpected keys and shape mismatches of
    ``state`` against ``expected`` (a model's state dict); ``what`` names the model in the message."""
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
        raise CheckpointError(f"{path}: checkpoint does not fit {what}: " + ", ".join(parts))


def checkpoint_metadata(path: Path | str) -> dict[str, Any]:
    """Decoded ``phenoica.*`` metadata of a safetensors checkpoint ({} for other files or none)."""
    path = Path(path)
    if file_format(path) != SAFETENSORS:
        return {}
    try:
        with safe_open(str(path), framework="pt") as fh:
            raw = fh.metadata() or {}
    except (SafetensorError, OSError) as exc:  # e.g. a truncated file
        raise CheckpointError(f"{path}: cannot read safetensors checkpoint ({exc})") from None
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key.startswith("phenoica."):
            try:
                out[key[len("phenoica.") :]] = json.loads(value)
            except json.JSONDecodeError:
                out[key[len("phenoica.") :]] = value
    return out


def sort_safetensors_header(path: Path | str) -> None:
    """Rewrite a safetensors file's JSON header in place with its keys sorted.

    safetensors writes the ``__metadata__`` entries in hash-map order, which changes from call
    to call, so the same tensors and metadata gave files with different bytes (and a different
    SHA-256, which the embeddings record). The sorted header has the same length (padded with
    spaces, as the format allows), so the tensor data does not move.
    """
    with open(path, "r+b") as fh:
        size = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(size))
        text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        if len(text) > size:
            raise CheckpointError(f"{path}: sorted safetensors header longer than the original")
        fh.seek(8)
        fh.write(text.ljust(size, b" "))


def file_sha256(path: Path | str) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
