"""The demo's design: its morphology factors, the genes (in real CORUM complexes), guides and their effects, all from the seed."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd

from phenoica.contract import CONTROL, FACTOR_PREFIX, GENE, GUIDE, PERT_TYPE, PERTURBATION, SUPPORTED_DTYPES
from phenoica.screen._annotations import corum_complexes
from phenoica.screen._options import DemoOptions
from phenoica.utils import rng_from_sequence

CONTROL_GENE = "non-targeting"


CONTROL_GUIDE_PREFIX = "NTC_"


MAX_CONTROL_GUIDES = 4


# What each factor controls, and the non-Gaussian distribution it is drawn from. The first
# demo.n_factors are used; the others stay at 0 (their typical value) when rendering. Each
# one survives per-image, per-channel instance normalization: none only scales a channel.
FACTORS: tuple[tuple[str, str], ...] = (
    ("cell_count", "uniform"),  # cells in the field (density)
    ("nucleus_size", "laplace"),  # nucleus : cell size ratio
    ("cell_size", "gamma"),  # cell radius
    ("elongation", "bimodal"),  # cell (and nucleus) aspect ratio
    ("er_translocation", "exponential"),  # ER-channel marker moving cytoplasm -> nucleus
    ("chromatin_condensation", "uniform"),  # DNA texture: diffuse vs granular heterochromatin foci
    ("actin_fibers", "laplace"),  # stress fibres vs cortical ring (one channel's compartments)
    ("mito_density", "neg_gamma"),  # mitochondrial puncta per cytoplasm area
    ("golgi_punctate", "bimodal"),  # Golgi marker moving from diffuse cytoplasm into puncta
    ("er_network_scale", "exponential"),  # ER texture: mesh size of the tubular network
    ("nucleus_irregularity", "uniform"),  # lobed / blebbed nuclear outline
    ("mito_perinuclear", "gamma"),  # mitochondria clustered around the nucleus vs spread out
    ("golgi_spread", "laplace"),  # compact vs dispersed Golgi band
    ("mito_size", "bimodal"),  # size of the mitochondrial puncta
    ("cell_clustering", "neg_gamma"),  # cells gathered in a colony vs scattered
)


_BIMODAL_MEAN = 0.9  # +/- mode of the bimodal mixture; its SD is sqrt(1 - 0.9**2)


# Standard plate formats (rows, columns), smallest first.
_PLATE_FORMATS: tuple[tuple[int, int], ...] = ((8, 12), (16, 24), (32, 48))


def factor_name(i: int) -> str:
    """Column name of morphology factor ``i``: ``factor_00``."""
    return f"{FACTOR_PREFIX}{i:02d}"


def _check_n_factors(n_factors: int) -> None:
    if not 1 <= n_factors <= len(FACTORS):
        raise ValueError(
            f"demo.n_factors is {n_factors}; the simulator renders 1..{len(FACTORS)} factors "
            f"({', '.join(name for name, _ in FACTORS)})"
        )


def check_demo(demo: DemoOptions) -> None:
    """Raise ValueError naming the ``demo.*`` key that the simulator cannot work with."""
    _check_n_factors(int(demo.n_factors))
    if not 1 <= demo.factors_per_gene <= demo.n_factors:
        raise ValueError(
            f"demo.factors_per_gene ({demo.factors_per_gene}) must be between 1 and demo.n_factors ({demo.n_factors})"
        )
    if not 0 <= demo.n_null_genes <= demo.n_genes:
        raise ValueError(f"demo.n_null_genes ({demo.n_null_genes}) must be between 0 and demo.n_genes")
    lo, hi = demo.guide_efficacy
    if not 0 <= lo <= hi:
        raise ValueError(f"demo.guide_efficacy {list(demo.guide_efficacy)} must be [low, high] with 0 <= low <= high")
    channels = list(demo.channels)
    if len(channels) < 1 or len(set(channels)) != len(channels):
        raise ValueError(f"demo.channels {channels} must be non-empty and have unique names")
    if np.dtype(demo.dtype) not in SUPPORTED_DTYPES:
        raise ValueError(f"demo.dtype is {demo.dtype!r}; expected uint8 or uint16")
    if demo.image_size < 8:
        raise ValueError(f"demo.image_size ({demo.image_size}) must be at least 8 pixels")
    if not demo.cells_per_image > 0:
        raise ValueError(f"demo.cells_per_image must be positive, got {demo.cells_per_image}")
    if n_complexes(demo) and int(demo.genes_per_complex) < 2:
        raise ValueError(f"demo.genes_per_complex ({demo.genes_per_complex}) must be at least 2")
    big = [c for c, genes in corum_complexes().items() if len(genes) >= int(demo.genes_per_complex)]
    if n_complexes(demo) > len(big):
        raise ValueError(
            f"demo.n_complexes ({demo.n_complexes}): the built-in CORUM list has only {len(big)} complexes with at "
            f"least demo.genes_per_complex ({demo.genes_per_complex}) members"
        )
    for key in ("effect_size", "batch_strength", "noise"):
        if getattr(demo, key) < 0:
            raise ValueError(f"demo.{key} must be >= 0, got {getattr(demo, key)}")
    plate_format(_wells_per_plate(demo))


def batch_of(demo: DemoOptions, plate: str) -> str:
    """The batch of demo plate ``plate``; ValueError for a plate the screen does not have."""
    plates = demo.plates()
    for batch, name in plates:
        if name == plate:
            return batch
    raise ValueError(
        f"plate {plate!r} is not a demo plate; expected one of {[p for _, p in plates]} "
        f"(demo.n_batches={demo.n_batches}, demo.plates_per_batch={demo.plates_per_batch})"
    )


def _standardized(dist: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws of a named non-Gaussian distribution with mean 0 and SD 1."""
    if dist == "uniform":
        return rng.uniform(-math.sqrt(3.0), math.sqrt(3.0), n)
    if dist == "laplace":
        return rng.laplace(0.0, 1.0 / math.sqrt(2.0), n)
    if dist == "exponential":
        return rng.exponential(1.0, n) - 1.0
    if dist in ("gamma", "neg_gamma"):
        x = (rng.gamma(2.0, 1.0, n) - 2.0) / math.sqrt(2.0)
        return x if dist == "gamma" else -x
    if dist == "bimodal":
        sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        return sign * _BIMODAL_MEAN + rng.normal(0.0, math.sqrt(1.0 - _BIMODAL_MEAN**2), n)
    raise ValueError(f"unknown factor distribution {dist!r}")


def draw_factors(n_images: int, n_factors: int, rng: np.random.Generator) -> np.ndarray:
    """Independent standardized non-Gaussian factors, (n_images, n_factors), ``FACTORS`` order."""
    _check_n_factors(n_factors)
    out = np.empty((n_images, n_factors))
    for j in range(n_factors):
        out[:, j] = _standardized(FACTORS[j][1], n_images, rng)
    return out


def n_complexes(demo: DemoOptions) -> int:
    """The simulated complexes: ``demo.n_complexes``, or as many as the genes with an effect
    hold (``(n_genes - n_null_genes) // genes_per_complex``) when fewer."""
    n_effect = int(demo.n_genes) - int(demo.n_null_genes)
    return min(int(demo.n_complexes), n_effect // max(1, int(demo.genes_per_complex)))


def complex_design(demo: DemoOptions, null: np.ndarray) -> tuple[list[str], list[str]]:
    """Gene symbols and simulated complexes: (symbol per gene, complex name per gene; "" = none).

    From ``(demo.seed, "complexes")``: ``n_complexes`` real CORUM complexes of the built-in list
    (``phenoica.screen._annotations.corum_complexes``) with at least ``genes_per_complex`` members are
    drawn; each gives a simulated complex of ``genes_per_complex`` genes with an effect, named
    by ``genes_per_complex`` of its real members. Every other gene (complex-free genes with an
    effect, and null genes) takes one member of a different unused real complex, so no two of
    them share a complex; when the list runs out, the rest get synthetic names ``SIM001 ...``.
    """
    n_genes = len(null)
    n_cx, size = n_complexes(demo), int(demo.genes_per_complex)
    rng = rng_from_sequence(demo.seed, "complexes")
    complexes = corum_complexes()
    names = sorted(complexes)
    big = [c for c in names if len(complexes[c]) >= size]
    chosen = [big[i] for i in rng.choice(len(big), n_cx, replace=False)] if n_cx else []
    effect = np.flatnonzero(~np.asarray(null))
    members = rng.permutation(effect)[: n_cx * size].reshape(n_cx, size) if n_cx else np.empty((0, size), int)
    symbol: list[str] = [""] * n_genes
    complex_of: list[str] = [""] * n_genes
    for k, real in enumerate(chosen):
        genes = sorted(rng.choice(complexes[real], size, replace=False).tolist())
        for g, name in zip(np.sort(members[k]), genes):
            symbol[g], complex_of[g] = name, real
    rest = [g for g in range(n_genes) if not symbol[g]]
    unused = [names[i] for i in rng.permutation(len(names)) if names[i] not in chosen]
    synthetic = iter(f"SIM{i + 1:03d}" for i in range(n_genes))
    for g, real in itertools.zip_longest(rest, unused):
        if g is None:
            break
        symbol[g] = str(rng.choice(complexes[real])) if real is not None else next(synthetic)
    return symbol, complex_of


def _control_guides(demo: DemoOptions) -> list[str]:
    n = min(MAX_CONTROL_GUIDES, int(demo.control_wells_per_plate))
    return [f"{CONTROL_GUIDE_PREFIX}{i + 1:02d}" for i in range(n)]


def _gene_design(demo: DemoOptions) -> tuple[pd.DataFrame, np.ndarray]:
    """Truth table (one row per guide, controls last) and its shift matrix (guides x factors).

    Draws come from (demo.seed, "genes") only and in a fixed order: null genes, then each gene's
    affected factors and signs, then guide efficacies; effect_size only scales the shifts.
    """
    check_demo(demo)
    n_genes, n_null = int(demo.n_genes), int(demo.n_null_genes)
    n_factors, per_gene = int(demo.n_factors), int(demo.factors_per_gene)
    guides_per_gene = int(demo.guides_per_gene)
    lo, hi = (float(v) for v in demo.guide_efficacy)
    rng = rng_from_sequence(demo.seed, "genes")
    null = np.zeros(n_genes, dtype=bool)
    null[rng.permutation(n_genes)[:n_null]] = True
    affected = [np.sort(rng.choice(n_factors, per_gene, replace=False)) for _ in range(n_genes)]
    signs = [rng.choice(np.array([-1.0, 1.0]), per_gene) for _ in range(n_genes)]
    efficacy = rng.uniform(lo, hi, size=(n_genes, guides_per_gene))
    morph = [name for name, _ in FACTORS]
    symbols, complex_of = complex_design(demo, null)
    for members in pd.Series(range(n_genes)).groupby(pd.Series(complex_of)).groups.values():
        first = int(min(members))
        if complex_of[first]:  # members of a complex shift the same factors, the same way
            for g in members:
                affected[g], signs[g] = affected[first], signs[first]

    rows: list[dict[str, Any]] = []
    shifts: list[np.ndarray] = []
    for g, gene in enumerate(symbols):
        idx, sgn = affected[g], signs[g]
        text = "" if null[g] else ",".join(f"{factor_name(j)}{'+' if s > 0 else '-'}" for j, s in zip(idx, sgn))
        text_morph = "" if null[g] else ",".join(f"{morph[j]}{'+' if s > 0 else '-'}" for j, s in zip(idx, sgn))
        for k in range(guides_per_gene):
            shift = np.zeros(n_factors)
            if not null[g]:
                shift[idx] = sgn * float(demo.effect_size) * efficacy[g, k]
            shifts.append(shift)
            rows.append(
                {
                    GENE: gene,
                    GUIDE: f"{gene}_g{k + 1}",
                    PERT_TYPE: PERTURBATION,
                    "has_effect": bool(not null[g]),
                    "efficacy": float(efficacy[g, k]),
                    "affected_factors": text,
                    "affected_morphology": text_morph,
                    "complex": complex_of[g],
                }
            )
    for guide in _control_guides(demo):
        shifts.append(np.zeros(n_factors))
        rows.append(
            {
                GENE: CONTROL_GENE,
                GUIDE: guide,
                PERT_TYPE: CONTROL,
                "has_effect": False,
                "efficacy": 0.0,
                "affected_factors": "",
                "affected_morphology": "",
                "complex": "",
            }
        )
    return pd.DataFrame(rows), np.vstack(shifts)


def gene_truth(demo: DemoOptions) -> pd.DataFrame:
    """One row per guide incl. controls: gene, guide, PertType, has_effect, efficacy, affected
    factors and ``complex`` (the simulated complex the gene belongs to, named after the real
    CORUM complex its symbols come from; "" for complex-free genes and controls).

    ``affected_factors`` reads like ``"factor_01+,factor_07-"`` (the sign of the shift);
    ``affected_morphology`` names the same factors by what they control. Controls have
    efficacy 0; a null gene's guides keep their drawn efficacy but shift nothing.
    """
    return _gene_design(demo)[0]


def guide_shifts(demo: DemoOptions) -> pd.DataFrame:
    """Factor shift of every guide (rows ``Metadata_Guide``, columns ``factor_00 ...``), in factor SDs."""
    truth, shifts = _gene_design(demo)
    return pd.DataFrame(
        shifts,
        index=pd.Index(truth[GUIDE], name=GUIDE),
        columns=[factor_name(j) for j in range(shifts.shape[1])],
    )


def _wells_per_plate(demo: DemoOptions) -> int:
    n_guides = int(demo.n_genes) * int(demo.guides_per_gene)
    return n_guides * int(demo.wells_per_guide_per_plate) + int(demo.control_wells_per_plate)


def plate_format(n_wells: int) -> tuple[int, int]:
    for rows, cols in _PLATE_FORMATS:
        if n_wells <= rows * cols:
            return rows, cols
    raise ValueError(
        f"the demo needs {n_wells} wells per plate (n_genes * guides_per_gene * "
        f"wells_per_guide_per_plate + control_wells_per_plate), more than a 1536-well plate holds"
    )


def row_label(i: int) -> str:
    """Plate row label: A..Z, then AA, AB, ... (1536-well plates)."""
    return chr(ord("A") + i) if i < 26 else "A" + chr(ord("A") + i - 26)
