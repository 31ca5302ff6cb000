"""Stock timm models (ViTs, MAE encoders) from a local checkpoint, adapted to the screen's channels.

``timm.create_model(name, pretrained=False, num_classes=..., in_chans=C_ckpt, checkpoint_path=...)``
builds the model and timm loads the file strictly; nothing is downloaded. ``C_ckpt`` is the
channel count of the checkpoint's first convolution (timm's ``first_conv``), so the file
loads as it was saved. A checkpoint with a classifier head is loaded with it and the head is
then removed (``reset_classifier(0)``): the embedding is the encoder's.

Channel adaptation: a screen whose channel count differs from the checkpoint's (an RGB model
on a 5-channel Cell Painting screen) gets timm's own ``adapt_input_conv`` on the first
convolution, the rule timm applies to pretrained weights: 1 channel = the sum of the RGB
filters; C channels = the RGB filters repeated cyclically, first C kept, scaled by 3 / C so
the response to a uniform input keeps its size. The log says when it happens. To avoid it,
pick 3 of the screen's channels, in the order the model should see them, with
``models.NAME.channels``.
"""

from __future__ import annotations

import difflib
import logging
from pathlib import Path
from typing import Any, Mapping

import timm
import torch
from timm.models import adapt_input_conv, get_pretrained_cfg
from torch import nn

from phenoica.contract import ConfigError
from phenoica.models._checkpoint import SAFETENSORS, CheckpointError, file_format, read_checkpoint, strip_prefixes
from phenoica.models._registry import register_model
from phenoica.screen import NORMALIZE_IMAGE


def check_timm_name(name: str, key: str = "timm_name") -> None:
    """ConfigError unless timm knows ``name`` (an architecture, optionally with a ``.tag``)."""
    if timm.is_model(name):
        return
    close = difflib.get_close_matches(name.split(".")[0], timm.list_models(), n=5, cutoff=0.6)
    raise ConfigError(
        f"config key {key}: timm {timm.__version__} knows no model {name!r}"
        + (f"; closest names: {close}" if close else "; list them with timm.list_models('vit_*')")
    )


def _first_conv(name: str) -> str:
    """timm's name of the model's first convolution (its pretrained config's ``first_conv``)."""
    cfg = get_pretrained_cfg(name)
    conv = (cfg.first_conv if cfg is not None else None) or "patch_embed.proj"
    return conv[0] if isinstance(conv, (list, tuple)) else conv


def _classifier_rows(name: str, state: dict[str, torch.Tensor]) -> int:
    """Rows of the checkpoint's classifier weight (0 = no head in the file)."""
    cfg = get_pretrained_cfg(name)
    heads = (cfg.classifier if cfg is not None else None) or "head"
    for head in (heads,) if isinstance(heads, str) else heads:
        weight = state.get(f"{head}.weight")
        if weight is not None and weight.ndim == 2:
            return int(weight.shape[0])
    return 0


def build_timm_encoder(
    name: str, checkpoint: Path | str | None, in_chans: int, log: logging.Logger | None = None
) -> nn.Module:
    """The timm model ``name`` with the weights of ``checkpoint``, taking ``in_chans`` channels, in eval mode.

    Errors: a name timm does not know (ConfigError, with the closest names), no checkpoint or a
    missing file, and a file that does not fit the model (CheckpointError naming the file).
    """
    log = log or logging.getLogger("phenoica.models")
    check_timm_name(name)
    if checkpoint is None:
        raise ConfigError(f"timm model {name!r} needs a checkpoint (models.NAME.checkpoint); nothing is downloaded")
    path = Path(checkpoint)
    fmt = file_format(path)  # raises CheckpointError for a missing or unreadable file
    if (path.suffix.lower() == ".safetensors") != (fmt == SAFETENSORS):
        raise CheckpointError(
            f"{path}: the file is a {fmt} checkpoint but its name says otherwise; timm reads by the name, so "
            f"rename it to end in {'.safetensors' if fmt == SAFETENSORS else '.pth'}"
        )
    state = strip_prefixes(read_checkpoint(path, log), ("module.", "_orig_mod."))
    conv = _first_conv(name)
    weight = state.get(f"{conv}.weight")
    if weight is None or weight.ndim != 4:
        raise CheckpointError(
            f"{path}: no 4-D {conv}.weight (the first convolution of timm's {name!r}); is it a checkpoint of this model?"
        )
    ckpt_chans, head_rows = int(weight.shape[1]), _classifier_rows(name, state)
    del state
    try:
        model = timm.create_model(
            name, pretrained=False, num_classes=head_rows, in_chans=ckpt_chans, checkpoint_path=str(path)
        )
    except (RuntimeError, KeyError, ValueError) as exc:
        raise CheckpointError(f"{path}: does not load into timm's {name!r}: {exc}") from None
    if head_rows:
        model.reset_classifier(0)
        log.info("%s: removed the checkpoint's %d-class head; embeddings come from the encoder", path.name, head_rows)
    if in_chans != ckpt_chans:
        adapt_first_conv(model, conv, in_chans)
        log.info(
            "%s: channel adaptation: timm's %s was trained on %d channels, the screen gives %d; %s.weight "
            "adapted with timm's adapt_input_conv (%s)",
            path.name,
            name,
            ckpt_chans,
            in_chans,
            conv,
            "filters summed" if in_chans == 1 else f"filters repeated cyclically, scaled by {ckpt_chans}/{in_chans}",
        )
    return model.eval()


@register_model("timm")
def timm_encoder(
    spec: Mapping[str, Any],
    in_chans: int,
    checkpoint: Path | str | None,
    log: logging.Logger,
    state: Mapping[str, torch.Tensor] | None,
) -> tuple[nn.Module, str]:
    """A stock timm model (architecture ``timm``): ``timm_name`` with the weights of ``checkpoint``
    (:func:`build_timm_encoder`; ``state`` is not used, timm reads the file); images normalized whole."""
    return build_timm_encoder(str(spec["timm_name"]), checkpoint, in_chans, log), NORMALIZE_IMAGE


def adapt_first_conv(model: nn.Module, conv_name: str, in_chans: int) -> None:
    """Replace the model's first Conv2d by one taking ``in_chans`` channels (timm's adapt_input_conv)."""
    conv = model.get_submodule(conv_name)
    if not isinstance(conv, nn.Conv2d):
        raise CheckpointError(f"cannot adapt {conv_name} ({type(conv).__name__}) to {in_chans} channels")
    new = nn.Conv2d(
        in_chans,
        conv.out_channels,
        conv.kernel_size,
        conv.stride,
        conv.padding,
        conv.dilation,
        conv.groups,
        conv.bias is not None,
        conv.padding_mode,
    )
    with torch.no_grad():
        new.weight.copy_(adapt_input_conv(in_chans, conv.weight.detach(), base_chans=conv.in_channels))
        if conv.bias is not None:
            new.bias.copy_(conv.bias)
    parent_name, _, leaf = conv_name.rpartition(".")
    setattr(model.get_submodule(parent_name) if parent_name else model, leaf, new)
    if hasattr(model, "in_chans"):
        model.in_chans = in_chans
