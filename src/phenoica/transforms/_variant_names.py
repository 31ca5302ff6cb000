"""The variants' names and their components' names: the facts the workflow reads when it builds
its DAG, in a module that imports no fitting library (the fits are :mod:`phenoica.transforms._variant`)."""

from __future__ import annotations

from typing import Sequence

from phenoica.contract import schema_enum

#: every variant, in the report's order: the schema's ``transforms.variants`` names, declared once there
VARIANTS: tuple[str, ...] = schema_enum("transforms.variants")
#: the variants whitened by PCA (all but base)
WHITENED_VARIANTS: tuple[str, ...] = tuple(v for v in VARIANTS if v != "base")
COMPONENT_PREFIX = "comp_"


def component_name(i: int) -> str:
    """Name of whitened/rotated feature ``i``: ``comp_0000``."""
    return f"{COMPONENT_PREFIX}{i:04d}"


def swept_variants(variants: Sequence[str]) -> tuple[str, ...]:
    """The variants the sweep scores: the whitened ones of ``variants`` whose component count
    the sweep sets (``tvn`` keeps every component)."""
    return tuple(v for v in variants if v in WHITENED_VARIANTS and v != "tvn")
