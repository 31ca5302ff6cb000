"""Layers shared by phenoica's encoders (as timm keeps its shared layers in ``timm.layers``).

:class:`SharedChannelPatchEmbed`: one ``Conv2d(1 -> D)`` applied to every channel, the patch
embedding of the OpenPhenom layout (:mod:`phenoica.models._openphenom`) and, with learned
channel positions added, of phenoica's channel-agnostic ViT
(:class:`phenoica.models._vit.ChannelAgnosticPatchEmbed`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from phenoica.contract import ScreenError


class SharedChannelPatchEmbed(nn.Module):
    """One Conv2d(1 -> D) applied to every channel; tokens channel-major, no positions added.

    Built by timm's ``VisionTransformer(embed_layer=...)`` with its keyword arguments.
    ``forward`` maps (B, C, H, W) with any C <= ``max_chans`` to (B, C * N, D), N =
    (img/patch)^2: token ``c * N + n`` is patch ``n`` of channel ``c``. ``max_chans`` defaults to
    ``in_chans`` (the OpenPhenom layout builds with ``in_chans=max_in_chans``); ``num_patches``
    counts the tokens of ``in_chans`` channels, so timm sizes a ``pos_embed`` for that many.
    ``label`` names the encoder in the error for too many channels. The only weights are
    ``proj.weight`` and ``proj.bias``.
    """

    shares_channels = True  # one projection for all channels: any count up to max_chans

    def __init__(
        self,
        img_size: int = 256,
        patch_size: int = 16,
        in_chans: int = 11,
        embed_dim: int = 384,
        bias: bool = True,
        dynamic_img_pad: bool = False,
        max_chans: int | None = None,
        label: str = "channel-shared encoder",
        device: Any = None,
        dtype: Any = None,
        **unsupported: Any,
    ) -> None:
        super().__init__()
        if unsupported or dynamic_img_pad:
            raise ValueError(f"{type(self).__name__}: unsupported options {sorted(unsupported) or ['dynamic_img_pad']}")
        if img_size % patch_size:
            raise ValueError(f"img_size {img_size} is not a multiple of patch_size {patch_size}")
        max_chans = in_chans if max_chans is None else max_chans
        if not 1 <= in_chans <= max_chans:
            raise ValueError(f"{label} supports 1..{max_chans} channels, got {in_chans}")
        self.img_size = (img_size, img_size)
        self.patch_size = (patch_size, patch_size)
        self.grid_size = (img_size // patch_size, img_size // patch_size)
        self.num_spatial = self.grid_size[0] * self.grid_size[1]
        self.in_chans = in_chans
        self.max_chans = max_chans
        self.label = label
        # Nominal token count (for the in_chans the model was built with); any C works.
        self.num_patches = in_chans * self.num_spatial
        self.proj = nn.Conv2d(1, embed_dim, patch_size, patch_size, bias=bias, device=device, dtype=dtype)

    def feat_ratio(self, as_scalar: bool = True) -> int | tuple[int, int]:
        """Spatial reduction (the patch size), as timm's PatchEmbed reports it."""
        return self.patch_size[0] if as_scalar else self.patch_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, C * N, D) tokens, channel-major; an error for C > max_chans or another size."""
        b, c, h, w = x.shape
        if c > self.max_chans:
            raise ScreenError(f"{self.label} embeds at most {self.max_chans} channels, got {c}")
        if (h, w) != self.img_size:
            raise ScreenError(f"encoder expects {self.img_size[0]}x{self.img_size[1]} crops, got {h}x{w}")
        tokens = self.proj(x.reshape(b * c, 1, h, w)).flatten(2).transpose(1, 2)  # (B*C, N, D)
        return tokens.reshape(b, c * self.num_spatial, -1)
