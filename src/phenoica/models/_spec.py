"""The keys of a ``models`` entry that decide phenoica's own ViT and its MAE pretraining.

Kept free of torch so that the Snakefile can import it when it builds the DAG.
"""

from __future__ import annotations

from typing import Any, Mapping

ARCH_KEYS: tuple[str, ...] = (
    "img_size",
    "patch_size",
    "embed_dim",
    "depth",
    "num_heads",
    "mlp_ratio",
    "channel_agnostic",
)
"""Spec keys that decide the encoder's architecture (stored in checkpoint metadata)."""

TRAINING_KEYS: tuple[str, ...] = ARCH_KEYS + (
    "in_chans",
    "channels",
    "decoder_embed_dim",
    "decoder_depth",
    "decoder_num_heads",
)
"""Spec keys MAE pretraining reads (the seed is passed on its own): the model's shape and the
channels it is trained on."""


def training_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a model entry that ``train_mae`` depends on: embedding options (pool, block,
    per_channel) and the checkpoint are left out, so changing them re-embeds but never retrains."""
    return {k: spec[k] for k in TRAINING_KEYS if k in spec}
