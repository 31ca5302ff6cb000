"""The encoder architectures, each registered under its name (``models.NAME.architecture``).

In the style of timm's ``register_model`` / ``create_model``: each architecture's module
decorates the function that builds its encoder with :func:`register_model` (the names are
those of :mod:`phenoica.models._layouts`, spelled out: that module imports the builders' modules), and
:func:`phenoica.models.create_model` looks the name up here
(:func:`model_entrypoint`). A builder takes the model entry (``config["models"][name]``), the
channel count the screen feeds it, the checkpoint (None = the entry's seeded init, where the
architecture allows it), a logger and the checkpoint's tensors when they were already read to
detect the layout; it returns the encoder and the normalization its recipe asks for
(:mod:`phenoica.screen._preprocess`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, TypeVar

from phenoica.contract import ConfigError

if TYPE_CHECKING:
    import torch
    from torch import nn


class EncoderBuilder(Protocol):
    """What :func:`register_model` registers: (spec, in_chans, checkpoint, log, state) -> (encoder, normalize)."""

    def __call__(
        self,
        spec: Mapping[str, Any],
        in_chans: int,
        checkpoint: Path | str | None,
        log: logging.Logger,
        state: Mapping[str, torch.Tensor] | None,
    ) -> tuple[nn.Module, str]: ...


_ARCHITECTURES: dict[str, EncoderBuilder] = {}
Builder = TypeVar("Builder", bound=Callable[..., Any])


def register_model(name: str) -> Callable[[Builder], Builder]:
    """Decorator: register the decorated encoder builder under ``name`` (once)."""

    def register(builder: Builder) -> Builder:
        if name in _ARCHITECTURES:
            raise ValueError(f"architecture {name!r} is registered twice")
        _ARCHITECTURES[name] = builder
        return builder

    return register


def list_models() -> list[str]:
    """The registered architecture names, sorted."""
    return sorted(_ARCHITECTURES)


def model_entrypoint(name: str) -> EncoderBuilder:
    """The builder registered under ``name``; ConfigError naming the registered ones otherwise."""
    try:
        return _ARCHITECTURES[name]
    except KeyError:
        raise ConfigError(f"architecture must be one of {', '.join(list_models())}; got {name!r}") from None
