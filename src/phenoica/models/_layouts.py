"""Which supported architecture a checkpoint's keys belong to, and how close the others come.

Keys are compared as patterns: wrapper prefixes (``module.``, ``state_dict.``, ``model.``,
``encoder.``, ``vit_backbone.``) removed, MAE decoder and classifier keys dropped, and block
numbers replaced by ``N`` (``blocks.N.attn.qkv.weight``). The reference patterns of each
architecture come from a tiny instance of its own builder, so they never drift from the code.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Iterable

from phenoica.models._checkpoint import CheckpointError, strip_prefixes

PHENOICA = "phenoica"
OPENPHENOM = "openphenom"
TIMM = "timm"
ARCHITECTURES = (PHENOICA, OPENPHENOM, TIMM)

_WRAPPERS = ("module.", "state_dict.", "model.", "encoder.", "vit_backbone.")
_IGNORED = ("decoder", "encoder_decoder_proj", "mask_token", "head.")
_BLOCK = re.compile(r"(^|\.)blocks\.\d+\.")

# Keys that only one layout has: a checkpoint holding one of them is of that layout.
_SIGNATURES = {
    OPENPHENOM: ("blocks.N.in_proj.weight",),
    PHENOICA: ("blocks.N.attn.qkv.weight",),
}


def key_patterns(keys: Iterable[str]) -> set[str]:
    """The comparable pattern of each key (see the module docstring)."""
    stripped = strip_prefixes(dict.fromkeys(keys), _WRAPPERS)
    return {_BLOCK.sub(r"\1blocks.N.", key) for key in stripped if not key.startswith(_IGNORED)}


@functools.lru_cache(maxsize=1)
def reference_patterns() -> dict[str, frozenset[str]]:
    """Key patterns of every supported layout, from tiny instances of their builders."""
    from phenoica.models._openphenom import OpenPhenomGeometry, build_openphenom
    from phenoica.models._vit import build_encoder

    spec = dict(img_size=8, patch_size=4, embed_dim=8, depth=1, num_heads=2, mlp_ratio=1.0, channel_agnostic=False)
    tiny = OpenPhenomGeometry(
        img_size=8, patch_size=4, embed_dim=8, depth=1, num_heads=2, mlp_ratio=1.0, max_in_chans=2
    )
    return {
        PHENOICA: frozenset(key_patterns(build_encoder(spec, 1).state_dict())),
        f"{PHENOICA} (channel_agnostic)": frozenset(
            key_patterns(build_encoder(dict(spec, channel_agnostic=True), 1).state_dict())
        ),
        OPENPHENOM: frozenset(key_patterns(build_openphenom(tiny).state_dict())),
    }


def detect_architecture(keys: Iterable[str], path: Path | str) -> str:
    """``"phenoica"`` or ``"openphenom"`` from a checkpoint's keys; CheckpointError otherwise.

    Detection needs one key only that layout has (its fused ``in_proj`` for OpenPhenom, timm's
    ``attn.qkv`` for phenoica); the loader of the chosen layout then checks every key strictly.
    The error for a file of neither lists the layouts by closeness and what differs.
    """
    patterns = key_patterns(keys)
    found = [arch for arch, sig in _SIGNATURES.items() if any(s in patterns for s in sig)]
    if len(found) == 1:
        return found[0]
    raise CheckpointError(
        f"{path}: checkpoint layout matches no supported architecture "
        f"({PHENOICA}, {OPENPHENOM}; stock timm models are chosen with models.NAME.timm_name). " + closeness(patterns)
    )


def closeness(patterns: set[str], limit: int = 6) -> str:
    """The supported layouts, closest first: shared patterns, and the missing / unexpected ones."""
    ranked = sorted(
        reference_patterns().items(),
        key=lambda item: -len(patterns & item[1]) / max(1, len(patterns | item[1])),
    )
    parts = []
    for arch, ref in ranked:
        missing, unexpected = sorted(ref - patterns), sorted(patterns - ref)
        parts.append(
            f"{arch}: {len(patterns & ref)}/{len(ref)} key patterns present; missing {missing[:limit]}"
            f"{' ...' if len(missing) > limit else ''}, unexpected {unexpected[:limit]}"
            f"{' ...' if len(unexpected) > limit else ''}"
        )
    return "Closest first: " + "; ".join(parts)
