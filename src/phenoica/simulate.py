"""The demo screen generator: a small synthetic CRISPR screen in the data contract's format.

Generative model, per image:

1. Morphology factors ``factor_00 ...`` are drawn independently, each from its own
   non-Gaussian distribution (uniform, Laplace, skewed, bimodal), standardized to zero mean
   and unit SD (``FACTORS`` lists what each one controls).
2. A guide of a gene with an effect adds ``sign * effect_size * efficacy`` to each of its
   gene's ``factors_per_gene`` affected factors; null genes and controls add nothing. Genes
   with an effect are grouped into ``n_complexes`` complexes of ``genes_per_complex`` genes
   whose members shift the same factors with the same signs (their guides' efficacies still
   differ), plus a complex-free remainder. Gene symbols come from real CORUM complexes
   (``complex_design``), so a complex's members are a real complex's members. Gene and
   guide effects derive from the global seed only, so they are identical on every plate.
3. Cells are rendered from the factors into multi-channel images (nucleus, ER, actin,
   mitochondria, Golgi roles; see ``channel_roles``): cells partition the field like a
   weighted Voronoi diagram of ellipses, nuclei (lobed ellipses) sit inside them, textures are
   band-passed noise (``skimage.filters.difference_of_gaussians``) and organelles are blurred
   point processes. The factors are phenotypes as real perturbations show them, chosen to
   survive the MAE's per-image, per-channel instance normalization: cell count and density,
   cell and nucleus size and shape, texture, subcellular localization (a marker moving from
   cytoplasm to nucleus, or from diffuse to puncta) and the balance between compartments of
   one channel. None of them only scales a channel's intensity (normalization erases that).
4. Nuisance (batch) effects follow the microscope: magnification (apparent cell size and
   count), channel bleed-through, defocus blur, illumination gradient and vignetting,
   per-channel gamma, gain and background offset, then pixel noise; drawn per batch (seed,
   batch), per plate (seed, plate) and per image (seed, plate), all scaled by
   ``batch_strength``.

The saved factors are the values used to render (after gene shifts, before nuisance);
``nuisance_*`` columns hold each image's nuisance parameters. Everything is deterministic
given the seed; plate outputs depend only on (seed, plate name, demo sizes), not on how many
other plates the screen has.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import special
from skimage import filters

from phenoica import screen
from phenoica.biomap.annotations import corum_complexes
from phenoica.config import demo_plates
from phenoica.contract import FACTOR_PREFIX
from phenoica.io import write_parquet
from phenoica.seeding import seed_sequence

CONTROL_GENE = "non-targeting"
CONTROL_GUIDE_PREFIX = "NTC_"
MAX_CONTROL_GUIDES = 4
NUISANCE_PREFIX = "nuisance_"
ROLES: tuple[str, ...] = ("nucleus", "er", "actin", "mito", "golgi")
RENDER_BLOCK = 32  # at most this many images rendered at once (see _render_block)

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
_DEMO_KEYS = (
    "n_batches",
    "plates_per_batch",
    "n_genes",
    "n_null_genes",
    "guides_per_gene",
    "control_wells_per_plate",
    "wells_per_guide_per_plate",
    "sites_per_well",
    "image_size",
    "channels",
    "cells_per_image",
    "n_factors",
    "factors_per_gene",
    "effect_size",
    "guide_efficacy",
    "batch_strength",
    "noise",
    "dtype",
    "chunk_images",
    "n_complexes",
    "genes_per_complex",
)
# Standard plate formats (rows, columns), smallest first.
_PLATE_FORMATS: tuple[tuple[int, int], ...] = ((8, 12), (16, 24), (32, 48))
_SOFT_EDGE = 0.7  # px, width of the sigmoid at cell and nucleus borders
_COUNT_GAIN = 0.4  # log cell count per unit of the (bounded) cell_count factor
_COUNT_JITTER = 0.08  # SD of the image-to-image log cell count at a fixed factor value
_ZOOM_RANGE = (0.8, 1.25)  # magnification nuisance is clipped to this range
# Difference-of-Gaussians band-pass: high SD = _DOG_RATIO x low SD; the transfer function
# peaks at f0 when low SD = _DOG_PEAK / f0 (f0 in cycles/px).
_DOG_RATIO = 1.6
_DOG_PEAK = math.sqrt(math.log(_DOG_RATIO) / (_DOG_RATIO**2 - 1.0)) / math.pi


# ---------------------------------------------------------------------------------------------
# Names, seeds, checks


def factor_name(i: int) -> str:
    """Column name of morphology factor ``i``: ``factor_00``."""
    return f"{FACTOR_PREFIX}{i:02d}"


def rng_for(seed: int, *keys: str | int) -> np.random.Generator:
    """The simulator's generator for one purpose: seeded with the keys' ``SeedSequence``
    (:func:`phenoica.seeding.seed_sequence`, the same words ``derive_seed`` uses)."""
    return np.random.default_rng(seed_sequence(seed, *keys))


def _check_n_factors(n_factors: int) -> None:
    if not 1 <= n_factors <= len(FACTORS):
        raise ValueError(
            f"demo.n_factors is {n_factors}; the simulator renders 1..{len(FACTORS)} factors "
            f"({', '.join(name for name, _ in FACTORS)})"
        )


def check_demo(demo: Mapping[str, Any]) -> None:
    """Raise ValueError naming the ``demo.*`` key that the simulator cannot work with."""
    missing = [k for k in _DEMO_KEYS if k not in demo]
    if missing:
        raise ValueError(
            f"demo config lacks key(s) {missing}; pass config['demo'] after phenoica.config.validate_config"
        )
    _check_n_factors(int(demo["n_factors"]))
    if not 1 <= demo["factors_per_gene"] <= demo["n_factors"]:
        raise ValueError(
            f"demo.factors_per_gene ({demo['factors_per_gene']}) must be between 1 and "
            f"demo.n_factors ({demo['n_factors']})"
        )
    if not 0 <= demo["n_null_genes"] <= demo["n_genes"]:
        raise ValueError(f"demo.n_null_genes ({demo['n_null_genes']}) must be between 0 and demo.n_genes")
    lo, hi = demo["guide_efficacy"]
    if not 0 <= lo <= hi:
        raise ValueError(
            f"demo.guide_efficacy {list(demo['guide_efficacy'])} must be [low, high] with 0 <= low <= high"
        )
    channels = list(demo["channels"])
    if len(channels) < 1 or len(set(channels)) != len(channels):
        raise ValueError(f"demo.channels {channels} must be non-empty and have unique names")
    if np.dtype(demo["dtype"]) not in screen.SUPPORTED_DTYPES:
        raise ValueError(f"demo.dtype is {demo['dtype']!r}; expected uint8 or uint16")
    if demo["image_size"] < 8:
        raise ValueError(f"demo.image_size ({demo['image_size']}) must be at least 8 pixels")
    if not demo["cells_per_image"] > 0:
        raise ValueError(f"demo.cells_per_image must be positive, got {demo['cells_per_image']}")
    if n_complexes(demo) and int(demo["genes_per_complex"]) < 2:
        raise ValueError(f"demo.genes_per_complex ({demo['genes_per_complex']}) must be at least 2")
    big = [c for c, genes in corum_complexes().items() if len(genes) >= int(demo["genes_per_complex"])]
    if n_complexes(demo) > len(big):
        raise ValueError(
            f"demo.n_complexes ({demo['n_complexes']}): the built-in CORUM list has only {len(big)} complexes with at "
            f"least demo.genes_per_complex ({demo['genes_per_complex']}) members"
        )
    for key in ("effect_size", "batch_strength", "noise"):
        if demo[key] < 0:
            raise ValueError(f"demo.{key} must be >= 0, got {demo[key]}")
    _plate_format(_wells_per_plate(demo))


def _batch_of(demo: Mapping[str, Any], plate: str) -> str:
    plates = demo_plates(demo)
    for batch, name in plates:
        if name == plate:
            return batch
    raise ValueError(
        f"plate {plate!r} is not a demo plate; expected one of {[p for _, p in plates]} "
        f"(demo.n_batches={demo['n_batches']}, demo.plates_per_batch={demo['plates_per_batch']})"
    )


# ---------------------------------------------------------------------------------------------
# Factors and gene effects


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


def n_complexes(demo: Mapping[str, Any]) -> int:
    """The simulated complexes: ``demo.n_complexes``, or as many as the genes with an effect
    hold (``(n_genes - n_null_genes) // genes_per_complex``) when fewer."""
    n_effect = int(demo["n_genes"]) - int(demo["n_null_genes"])
    return min(int(demo["n_complexes"]), n_effect // max(1, int(demo["genes_per_complex"])))


def complex_design(demo: Mapping[str, Any], seed: int, null: np.ndarray) -> tuple[list[str], list[str]]:
    """Gene symbols and simulated complexes: (symbol per gene, complex name per gene; "" = none).

    From ``(seed, "complexes")``: ``n_complexes`` real CORUM complexes of the built-in list
    (``phenoica.biomap.annotations.corum_complexes``) with at least ``genes_per_complex`` members are
    drawn; each gives a simulated complex of ``genes_per_complex`` genes with an effect, named
    by ``genes_per_complex`` of its real members. Every other gene (complex-free genes with an
    effect, and null genes) takes one member of a different unused real complex, so no two of
    them share a complex; when the list runs out, the rest get synthetic names ``SIM001 ...``.
    """
    n_genes = len(null)
    n_cx, size = n_complexes(demo), int(demo["genes_per_complex"])
    rng = rng_for(seed, "complexes")
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


def _control_guides(demo: Mapping[str, Any]) -> list[str]:
    n = min(MAX_CONTROL_GUIDES, int(demo["control_wells_per_plate"]))
    return [f"{CONTROL_GUIDE_PREFIX}{i + 1:02d}" for i in range(n)]


def _gene_design(demo: Mapping[str, Any], seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Truth table (one row per guide, controls last) and its shift matrix (guides x factors).

    Draws come from (seed, "genes") only and in a fixed order: null genes, then each gene's
    affected factors and signs, then guide efficacies; effect_size only scales the shifts.
    """
    check_demo(demo)
    n_genes, n_null = int(demo["n_genes"]), int(demo["n_null_genes"])
    n_factors, per_gene = int(demo["n_factors"]), int(demo["factors_per_gene"])
    guides_per_gene = int(demo["guides_per_gene"])
    lo, hi = (float(v) for v in demo["guide_efficacy"])
    rng = rng_for(seed, "genes")
    null = np.zeros(n_genes, dtype=bool)
    null[rng.permutation(n_genes)[:n_null]] = True
    affected = [np.sort(rng.choice(n_factors, per_gene, replace=False)) for _ in range(n_genes)]
    signs = [rng.choice(np.array([-1.0, 1.0]), per_gene) for _ in range(n_genes)]
    efficacy = rng.uniform(lo, hi, size=(n_genes, guides_per_gene))
    morph = [name for name, _ in FACTORS]
    symbols, complex_of = complex_design(demo, seed, null)
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
                shift[idx] = sgn * float(demo["effect_size"]) * efficacy[g, k]
            shifts.append(shift)
            rows.append(
                {
                    screen.GENE: gene,
                    screen.GUIDE: f"{gene}_g{k + 1}",
                    screen.PERT_TYPE: screen.PERTURBATION,
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
                screen.GENE: CONTROL_GENE,
                screen.GUIDE: guide,
                screen.PERT_TYPE: screen.CONTROL,
                "has_effect": False,
                "efficacy": 0.0,
                "affected_factors": "",
                "affected_morphology": "",
                "complex": "",
            }
        )
    return pd.DataFrame(rows), np.vstack(shifts)


def gene_truth(demo: dict, seed: int) -> pd.DataFrame:
    """One row per guide incl. controls: gene, guide, PertType, has_effect, efficacy, affected
    factors and ``complex`` (the simulated complex the gene belongs to, named after the real
    CORUM complex its symbols come from; "" for complex-free genes and controls).

    ``affected_factors`` reads like ``"factor_01+,factor_07-"`` (the sign of the shift);
    ``affected_morphology`` names the same factors by what they control. Controls have
    efficacy 0; a null gene's guides keep their drawn efficacy but shift nothing.
    """
    return _gene_design(demo, seed)[0]


def guide_shifts(demo: dict, seed: int) -> pd.DataFrame:
    """Factor shift of every guide (rows ``Metadata_Guide``, columns ``factor_00 ...``), in factor SDs."""
    truth, shifts = _gene_design(demo, seed)
    return pd.DataFrame(
        shifts,
        index=pd.Index(truth[screen.GUIDE], name=screen.GUIDE),
        columns=[factor_name(j) for j in range(shifts.shape[1])],
    )


# ---------------------------------------------------------------------------------------------
# Plate layout


def _wells_per_plate(demo: Mapping[str, Any]) -> int:
    n_guides = int(demo["n_genes"]) * int(demo["guides_per_gene"])
    return n_guides * int(demo["wells_per_guide_per_plate"]) + int(demo["control_wells_per_plate"])


def _plate_format(n_wells: int) -> tuple[int, int]:
    for rows, cols in _PLATE_FORMATS:
        if n_wells <= rows * cols:
            return rows, cols
    raise ValueError(
        f"the demo needs {n_wells} wells per plate (n_genes * guides_per_gene * "
        f"wells_per_guide_per_plate + control_wells_per_plate), more than a 1536-well plate holds"
    )


def _row_label(i: int) -> str:
    """Plate row label: A..Z, then AA, AB, ... (1536-well plates)."""
    return chr(ord("A") + i) if i < 26 else "A" + chr(ord("A") + i - 26)


def plate_layout(demo: dict, seed: int, plate: str) -> pd.DataFrame:
    """The plate's metadata in the data contract (one row per image, ordered by image index).

    Every perturbation guide gets ``wells_per_guide_per_plate`` wells and the control guides
    share ``control_wells_per_plate`` wells; wells are placed at seeded random positions of
    the smallest standard plate (96/384/1536) that holds them, from (seed, plate). Images are
    indexed in plate reading order (row-major wells, then sites 1..sites_per_well).
    """
    check_demo(demo)
    batch = _batch_of(demo, plate)
    truth = gene_truth(demo, seed)
    perturbed = truth[truth[screen.PERT_TYPE] == screen.PERTURBATION]
    wells_guides = list(np.repeat(perturbed.index.to_numpy(), int(demo["wells_per_guide_per_plate"])))
    controls = truth.index[truth[screen.PERT_TYPE] == screen.CONTROL].to_numpy()
    wells_guides += [controls[i % len(controls)] for i in range(int(demo["control_wells_per_plate"]))]
    rows, cols = _plate_format(len(wells_guides))
    position = rng_for(seed, "layout", plate).choice(rows * cols, len(wells_guides), replace=False)
    order = np.argsort(position)
    position, guide_rows = position[order], np.asarray(wells_guides)[order]
    sites = int(demo["sites_per_well"])
    r, c = np.divmod(np.repeat(position, sites), cols)
    picked = truth.loc[np.repeat(guide_rows, sites)]
    n = len(picked)
    row_labels = [_row_label(int(i)) for i in r]
    return pd.DataFrame(
        {
            screen.BATCH: batch,
            screen.PLATE: plate,
            screen.WELL: [f"{lab}{int(col) + 1:02d}" for lab, col in zip(row_labels, c)],
            screen.SITE: np.tile(np.arange(1, sites + 1), len(position)).astype(np.int64),
            screen.GENE: picked[screen.GENE].to_numpy(),
            screen.GUIDE: picked[screen.GUIDE].to_numpy(),
            screen.PERT_TYPE: picked[screen.PERT_TYPE].to_numpy(),
            screen.IMAGE_INDEX: np.arange(n, dtype=np.int64),
            "Metadata_Row": row_labels,
            "Metadata_Col": (c + 1).astype(np.int64),
        }
    )


# ---------------------------------------------------------------------------------------------
# Rendering


def channel_roles(channels: Sequence[str]) -> list[str]:
    """What each channel shows: a channel named after a role (``ROLES``) shows that role;
    any other name goes by position: channel 0 the nucleus, the rest cycling er, actin,
    mito, golgi."""
    roles = []
    for i, name in enumerate(channels):
        key = str(name).lower()
        roles.append(key if key in ROLES else ("nucleus" if i == 0 else ROLES[1 + (i - 1) % 4]))
    return roles


def _bounded(f: np.ndarray) -> np.ndarray:
    """Monotone squashing of factor values into (-2.5, 2.5) before mapping to rendering."""
    return 2.5 * np.tanh(np.asarray(f) / 2.5)


def _base_cell_radius(image_size: int, cells_per_image: float) -> float:
    """Cell radius (px) at which the mean cell count covers ~45% of the field."""
    r = math.sqrt(0.45 * image_size * image_size / (math.pi * max(cells_per_image, 1.0)))
    return min(r, 0.22 * image_size)


def _max_cells(cells_per_image: float) -> int:
    """Largest cell count an image can get: the densest factor value, count jitter and zoom."""
    top = cells_per_image * math.exp(_COUNT_GAIN * 2.5 + _COUNT_JITTER * 4.0) / _ZOOM_RANGE[0] ** 2
    return int(math.ceil(top)) + 1


def _render_block(image_size: int, cells_per_image: float) -> int:
    """Images rendered at once: bounded so the (images, cells, H, W) distance array stays
    ~4M values. A function of the config only, so outputs stay deterministic."""
    per_image = _max_cells(cells_per_image) * image_size * image_size
    return max(1, min(RENDER_BLOCK, (1 << 22) // per_image))


def _blur(x: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Gaussian blur of each image's last two axes with its own SD (x: (n, ..., H, W), sigma:
    (n,) px; 0 leaves an image unchanged), by ``skimage.filters.gaussian`` (reflect borders)."""
    sigma = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (x.shape[0],))
    out = np.array(x, dtype=np.float32, copy=True)
    lead = (0.0,) * (x.ndim - 3)
    for i, s in enumerate(sigma):
        if s > 0:
            out[i] = filters.gaussian(x[i], sigma=lead + (float(s), float(s)), mode="reflect", preserve_range=True)
    return out


def _bandpass(noise: np.ndarray, f0: np.ndarray) -> np.ndarray:
    """Band-passed white noise (n, H, W) peaking near ``f0`` cycles/px per image, unit SD per
    image: a difference of Gaussians (``skimage.filters.difference_of_gaussians``) whose
    SDs put the transfer function's peak at ``f0``."""
    f0 = np.broadcast_to(np.asarray(f0, dtype=np.float64), (noise.shape[0],))
    out = np.empty(noise.shape, dtype=np.float32)
    for i, f in enumerate(f0):
        low = _DOG_PEAK / max(float(f), 1e-3)
        band = filters.difference_of_gaussians(noise[i], low, _DOG_RATIO * low, mode="reflect")
        band -= band.mean()
        out[i] = band / (band.std() + 1e-12)
    return out


def _puncta(uniform: np.ndarray, prob: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """A point process (pixel on where ``uniform < prob``) blurred to spots of peak ~1."""
    points = (uniform < prob).astype(np.float32)
    spots = _blur(points, sigma) * (2.0 * math.pi * np.asarray(sigma).reshape(-1, 1, 1) ** 2)
    return np.minimum(spots, 1.5).astype(np.float32)


def _spread_out(pos: np.ndarray, active: np.ndarray, spacing: np.ndarray, size: int) -> np.ndarray:
    """Push cell centres (n, K, 2) apart where closer than ``spacing`` (n,): a few rounds of
    pairwise repulsion between active cells, so cells touch rather than pile up."""
    pos = pos.copy()
    pair = active[:, :, None] & active[:, None, :] & ~np.eye(pos.shape[1], dtype=bool)[None]
    for _ in range(4):
        diff = pos[:, :, None, :] - pos[:, None, :, :]
        dist = np.sqrt((diff**2).sum(-1)) + 1e-6
        push = np.where(pair, np.clip(spacing[:, None, None] - dist, 0.0, None) / (2.0 * dist), 0.0)
        pos += (push[..., None] * diff).sum(axis=2)
        np.clip(pos, 0.0, size, out=pos)
    return pos


def render_cells(
    factors: np.ndarray,
    channels: Sequence[str],
    image_size: int,
    cells_per_image: float,
    rng: np.random.Generator,
    zoom: np.ndarray | None = None,
) -> np.ndarray:
    """Render clean images (n, C, H, W) float32, roughly in [0, 1], from factors (n, n_factors).

    Every factor changes how an image looks *after* per-image, per-channel instance
    normalization (the MAE's preprocessing): geometry (cell count, cell and nucleus size and
    shape), texture, where a channel's signal sits (cytoplasm vs nucleus, diffuse vs puncta,
    near vs far from the nucleus) and the balance between compartments of one channel. No
    factor only scales a whole channel, which normalization would erase.

    ``zoom`` (n,) is the microscope's magnification relative to nominal (a nuisance: the
    same cells look bigger and fewer fit in the field); None = 1. Random draws (cell
    positions, shapes, textures, organelle points) have fixed shapes, so the same generator
    state renders the same layout whatever the factor values.
    """
    f = np.asarray(factors, dtype=np.float64)
    if f.ndim != 2 or f.shape[1] > len(FACTORS):
        raise ValueError(f"factors must be (n_images, n_factors<= {len(FACTORS)}), got shape {f.shape}")
    n, size = f.shape[0], int(image_size)
    s = np.ones(n) if zoom is None else np.asarray(zoom, dtype=np.float64).reshape(n)
    if not (np.all(s >= _ZOOM_RANGE[0] - 1e-9) and np.all(s <= _ZOOM_RANGE[1] + 1e-9)):
        raise ValueError(f"zoom must lie in {list(_ZOOM_RANGE)}, got {float(s.min())}..{float(s.max())}")
    b = np.zeros((n, len(FACTORS)))
    b[:, : f.shape[1]] = _bounded(f)
    F = {name: b[:, i] for i, (name, _) in enumerate(FACTORS)}
    kmax = _max_cells(cells_per_image)
    f32 = np.float32

    # Fixed-shape draws, in a fixed order.
    z_count = rng.standard_normal(n)
    pos = rng.uniform(0.0, size, (n, kmax, 2))
    cluster = rng.uniform(0.25 * size, 0.75 * size, (n, 1, 2))
    theta = rng.uniform(0.0, math.pi, (n, kmax))
    z_size, z_asp, z_nuc, z_dna, off_x, off_y = rng.standard_normal((6, n, kmax))
    phase, golgi_dir, lobe_1, lobe_2 = rng.uniform(0.0, 2.0 * math.pi, (4, n, kmax))
    noise_chromatin, noise_er = rng.standard_normal((2, n, size, size))
    u_mito, u_golgi, u_chromatin = rng.random((3, n, size, size)).astype(f32)

    # Geometry: how many cells, where, how big and what shape (all in px at this zoom).
    rate = cells_per_image * np.exp(_COUNT_GAIN * F["cell_count"] + _COUNT_JITTER * z_count) / s**2
    counts = np.clip(np.rint(rate), 1, kmax).astype(np.int64)
    K = int(counts.max())
    active = np.arange(kmax)[None, :] < counts[:, None]
    base_rc = _base_cell_radius(size, cells_per_image) * s * np.exp(0.2 * F["cell_size"])
    pull = 0.6 * special.expit(1.5 * F["cell_clustering"])[:, None, None]
    pos = (1.0 - pull) * pos + pull * cluster
    pos = _spread_out(pos, active, 1.2 * base_rc, size)
    cx, cy = pos[..., 0].astype(f32), pos[..., 1].astype(f32)

    rc = base_rc[:, None] * np.exp(0.08 * z_size)
    # Aspect ratio >= 1 and monotone in the factor (1 at the round end, ~3.5 at the elongated end).
    sqrt_asp = np.exp(0.5 * np.abs(0.25 * (F["elongation"][:, None] + 2.5) + 0.08 * z_asp))
    rn = 0.42 * rc * np.exp(0.22 * F["nucleus_size"][:, None] + 0.05 * z_nuc)
    lobes = 0.08 * np.exp(0.55 * F["nucleus_irregularity"])[:, None] * np.ones((1, kmax))
    cos_t, sin_t = np.cos(theta), np.sin(theta)

    # Which cell owns each pixel: the smallest normalized elliptical distance.
    coord = np.arange(size, dtype=f32) + f32(0.5)
    sl = (slice(None), slice(0, K), None, None)
    dx = coord[None, None, None, :] - cx[sl]
    dy = coord[None, None, :, None] - cy[sl]
    ct, st = cos_t[sl].astype(f32), sin_t[sl].astype(f32)
    a, bb = (rc * sqrt_asp)[sl].astype(f32), (rc / sqrt_asp)[sl].astype(f32)
    d2 = ((dx * ct + dy * st) / a) ** 2 + ((dy * ct - dx * st) / bb) ** 2
    d2[~active[:, :K]] = np.inf
    owner = np.argmin(d2, axis=1).reshape(n, -1)
    del d2, dx, dy

    def own(p: np.ndarray) -> np.ndarray:
        return np.take_along_axis(np.asarray(p)[:, :K], owner, axis=1).reshape(n, size, size).astype(f32)

    def col(x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=f32).reshape(n, 1, 1)

    xo = coord[None, None, :] - own(cx)
    yo = coord[None, :, None] - own(cy)
    co, so = own(cos_t), own(sin_t)
    xr, yr = xo * co + yo * so, yo * co - xo * so  # pixel in its cell's frame (x along the long axis)
    rc_o, sa_o = own(rc), own(sqrt_asp)
    dc = np.sqrt((xr / (rc_o * sa_o)) ** 2 + (yr * sa_o / rc_o) ** 2)
    cell = special.expit((1.0 - dc) * rc_o / _SOFT_EDGE).astype(f32)
    rn_o, san_o = own(rn), np.sqrt(sa_o)
    xn, yn = xr - own(0.12 * rc * off_x), yr - own(0.12 * rc * off_y)
    angle = np.arctan2(yn, xn)
    outline = 1.0 + own(lobes) * (np.cos(3.0 * angle + own(lobe_1)) + 0.7 * np.cos(5.0 * angle + own(lobe_2)))
    dn = np.sqrt((xn / (rn_o * san_o)) ** 2 + (yn * san_o / rn_o) ** 2) / outline
    nuc = (special.expit((1.0 - dn) * rn_o / _SOFT_EDGE) * cell).astype(f32)
    cyto = np.clip(cell - nuc, 0.0, None)
    del xo, yo, co, so

    def nucleus() -> np.ndarray:
        """DNA: the nucleus with each cell's own DNA content and a fine grain; condensation moves
        DNA signal from the diffuse nucleoplasm into bright heterochromatin foci."""
        grain = nuc * np.maximum(1.0 + 0.15 * _bandpass(noise_chromatin, 0.25 / s), 0.0)
        foci = _puncta(u_chromatin, 0.06 * nuc, 0.9 * s) * nuc
        condensed = col(special.expit(1.3 * F["chromatin_condensation"]))
        return 0.5 * own(np.exp(0.1 * z_dna)) * ((1.0 - 0.65 * condensed) * grain + condensed * foci)

    def er() -> np.ndarray:
        """ER-resident marker: a tubular network (zero crossings of band-passed noise) in the
        perinuclear cytoplasm, its mesh size a factor; translocation moves the marker into the
        nucleus (the nuclear : cytoplasmic ratio of one channel)."""
        field = _bandpass(noise_er, 0.05 * np.exp(0.5 * F["er_network_scale"]) / s)
        tubules = np.exp(-((field / 0.5) ** 2))
        cytoplasm = cyto * np.exp(-1.2 * dc) * (0.2 + tubules)
        nuclear = col(0.3 * np.exp(0.7 * F["er_translocation"])) * nuc
        return 0.5 * (cytoplasm + nuclear)

    def actin() -> np.ndarray:
        """Actin: cortical ring plus stress fibres along the cell's long axis; the factor sets
        fibres against cortex (relative intensity of two compartments of one channel)."""
        ring = cell * np.exp(-(((1.0 - dc) * rc_o / (1.3 * col(s))) ** 2))
        fibers = cell * ((1.0 + np.cos(2.0 * math.pi * yr / (3.0 * col(s)) + own(phase))) / 2.0) ** 4
        strength = col(0.45 * np.exp(0.6 * F["actin_fibers"]))
        return 0.45 * (0.8 * ring + 0.1 * cell + strength * fibers)

    def mito() -> np.ndarray:
        """Mitochondria: puncta in the cytoplasm; density, size and how tightly they cluster
        around the nucleus are factors."""
        reach = col(1.2 * np.exp(0.5 * F["mito_perinuclear"]))
        prob = col(0.07 * np.exp(0.5 * F["mito_density"])) * cyto * np.exp(-reach * np.maximum(dn - 1.0, 0.0) / 2.0)
        spots = _puncta(u_mito, prob, 0.7 * s * np.exp(0.25 * F["mito_size"]))
        return 0.5 * (spots + 0.08 * cyto)

    def golgi() -> np.ndarray:
        """Golgi marker: a perinuclear band on one side of the nucleus; the factor moves the
        marker from diffuse cytoplasm into puncta, another spreads the band."""
        width = col(0.3 * np.exp(0.35 * F["golgi_spread"]))
        toward = (xn * own(np.cos(golgi_dir)) + yn * own(np.sin(golgi_dir))) / (np.sqrt(xn**2 + yn**2) + 1e-3)
        band = np.exp(-(((dn - 1.4) / width) ** 2)) * cyto * special.expit(3.0 * toward)
        punctate = col(special.expit(1.3 * F["golgi_punctate"]))
        spots = _puncta(u_golgi, 0.35 * band, 0.8 * s)
        return 0.45 * (punctate * spots + (1.0 - punctate) * 0.35 * cyto)

    render: dict[str, Callable[[], np.ndarray]] = {
        "nucleus": nucleus,
        "er": er,
        "actin": actin,
        "mito": mito,
        "golgi": golgi,
    }
    cache: dict[str, np.ndarray] = {}
    out = np.empty((n, len(channels), size, size), dtype=f32)
    for c, role in enumerate(channel_roles(channels)):
        if role not in cache:
            cache[role] = render[role]().astype(f32)
        out[:, c] = cache[role]
    return out


# ---------------------------------------------------------------------------------------------
# Nuisance (batch) effects


def nuisance_table(demo: dict, seed: int, plate: str, n_images: int) -> pd.DataFrame:
    """Per-image nuisance parameters of a plate: batch level from (seed, batch), plate level
    from (seed, plate), small per-image jitter from (seed, plate); all scaled by batch_strength.

    Columns ``nuisance_{gain,offset,gamma,crosstalk}_{channel}`` and ``nuisance_gradient_x``,
    ``nuisance_gradient_y``, ``nuisance_vignette``, ``nuisance_blur`` (px, defocus),
    ``nuisance_noise`` (multiplier of demo.noise) and ``nuisance_zoom`` (magnification relative
    to nominal: the same cells look bigger and fewer fit in the field, so apparent morphology
    shifts with the batch). With batch_strength 0 every image gets the neutral values.
    """
    check_demo(demo)
    batch = _batch_of(demo, plate)
    channels = list(demo["channels"])
    n_ch, s = len(channels), float(demo["batch_strength"])
    px = demo["image_size"] / 64.0

    def level(rng: np.random.Generator, scale: float) -> dict[str, np.ndarray]:
        angle = rng.uniform(0.0, 2.0 * math.pi)
        strength = scale * s * 0.3 * rng.uniform(0.3, 1.0)
        cross = scale * s * 0.12 * rng.uniform(0.0, 1.0, n_ch)
        cross[0] = 0.0
        return {
            "log_gain": scale * s * 0.3 * rng.standard_normal(n_ch),
            "offset": scale * s * 0.03 * rng.standard_normal(n_ch),
            "log_gamma": scale * s * 0.2 * rng.standard_normal(n_ch),
            "crosstalk": cross,
            "gradient": strength * np.array([math.cos(angle), math.sin(angle)]),
            "vignette": np.array(scale * s * 0.3 * rng.uniform(0.0, 1.0)),
            "blur": np.array(scale * s * 0.9 * px * rng.uniform(0.0, 1.0)),
            "log_noise": np.array(scale * s * 0.3 * rng.standard_normal()),
            "log_zoom": np.array(scale * s * 0.08 * rng.standard_normal()),
        }

    bat = level(rng_for(seed, "batch", batch), 1.0)
    pla = level(rng_for(seed, "plate", plate), 0.3)
    rng = rng_for(seed, "image-nuisance", plate)
    jit_gain = s * 0.05 * rng.standard_normal((n_images, n_ch))
    jit_blur = s * 0.25 * px * np.abs(rng.standard_normal(n_images))
    jit_grad = s * 0.03 * rng.standard_normal((n_images, 2))
    jit_zoom = s * 0.01 * rng.standard_normal(n_images)

    table: dict[str, Any] = {}
    for c, name in enumerate(channels):
        table[f"{NUISANCE_PREFIX}gain_{name}"] = np.exp(bat["log_gain"][c] + pla["log_gain"][c] + jit_gain[:, c])
    for c, name in enumerate(channels):
        table[f"{NUISANCE_PREFIX}offset_{name}"] = np.full(n_images, 0.04 + bat["offset"][c] + pla["offset"][c])
    for c, name in enumerate(channels):
        table[f"{NUISANCE_PREFIX}gamma_{name}"] = np.full(n_images, math.exp(bat["log_gamma"][c] + pla["log_gamma"][c]))
    for c, name in enumerate(channels):
        table[f"{NUISANCE_PREFIX}crosstalk_{name}"] = np.full(n_images, bat["crosstalk"][c] + pla["crosstalk"][c])
    gradient = bat["gradient"] + pla["gradient"] + jit_grad
    table[f"{NUISANCE_PREFIX}gradient_x"] = gradient[:, 0]
    table[f"{NUISANCE_PREFIX}gradient_y"] = gradient[:, 1]
    table[f"{NUISANCE_PREFIX}vignette"] = np.full(n_images, float(bat["vignette"] + pla["vignette"]))
    table[f"{NUISANCE_PREFIX}blur"] = float(bat["blur"] + pla["blur"]) + jit_blur
    table[f"{NUISANCE_PREFIX}noise"] = np.full(n_images, math.exp(float(bat["log_noise"] + pla["log_noise"])))
    zoom = np.exp(float(bat["log_zoom"] + pla["log_zoom"]) + jit_zoom)
    table[f"{NUISANCE_PREFIX}zoom"] = np.clip(zoom, *_ZOOM_RANGE)
    out = pd.DataFrame(table)
    offsets = out[[f"{NUISANCE_PREFIX}offset_{c}" for c in channels]]
    out[offsets.columns] = offsets.clip(lower=0.0)
    return out


def apply_nuisance(
    clean: np.ndarray,
    nuisance: pd.DataFrame,
    channels: Sequence[str],
    noise: float,
    dtype: np.dtype | str,
    rng: np.random.Generator,
) -> np.ndarray:
    """Image clean renders (n, C, H, W) through the microscope described by ``nuisance``.

    In order: bleed-through from the previous channel, defocus blur, illumination gradient
    and vignetting, per-channel gamma, gain and background offset, then Gaussian noise of SD
    ``noise * nuisance_noise * sqrt(0.25 + signal)``; clipped and quantized to ``dtype``.
    """
    x = np.asarray(clean, dtype=np.float32)
    n, n_ch, h, w = x.shape
    if len(nuisance) != n or len(channels) != n_ch:
        raise ValueError(
            f"nuisance table has {len(nuisance)} rows for {n} images and {len(channels)} channels for {n_ch}"
        )

    def per(kind: str) -> np.ndarray:
        cols = [f"{NUISANCE_PREFIX}{kind}_{c}" for c in channels]
        return nuisance[cols].to_numpy(np.float32).reshape(n, n_ch, 1, 1)

    def one(kind: str) -> np.ndarray:
        return nuisance[f"{NUISANCE_PREFIX}{kind}"].to_numpy(np.float32)

    if n_ch > 1:
        x = x.copy()
        x[:, 1:] += per("crosstalk")[:, 1:] * x[:, :-1]
    x = _blur(x, one("blur"))
    yy = np.linspace(-1.0, 1.0, h, dtype=np.float32)[:, None]
    xx = np.linspace(-1.0, 1.0, w, dtype=np.float32)[None, :]
    field = (
        1.0
        + one("gradient_x")[:, None, None] * xx
        + one("gradient_y")[:, None, None] * yy
        - one("vignette")[:, None, None] * (xx**2 + yy**2) / 2.0
    )
    x = x * np.maximum(field, 0.2)[:, None]
    x = np.maximum(x, 0.0) ** per("gamma")
    x = x * per("gain") + per("offset")
    sd = float(noise) * one("noise").reshape(n, 1, 1, 1) * np.sqrt(0.25 + np.clip(x, 0.0, 1.0))
    x = x + sd * rng.standard_normal(x.shape, dtype=np.float32)
    top = float(np.iinfo(np.dtype(dtype)).max)
    return np.rint(np.clip(x, 0.0, 1.0) * top).astype(dtype)


# ---------------------------------------------------------------------------------------------
# Plates and screens


def simulate_plate(demo: dict, seed: int, plate: str) -> tuple[np.ndarray, pd.DataFrame, pd.DataFrame]:
    """Simulate one plate: tiles (n, C, H, W) in demo.dtype, contract metadata, factors table.

    The factors table has ``Metadata_Plate``, ``Metadata_ImageIndex``, the rendered factor
    values ``factor_00 ...`` (after gene shifts, before nuisance) and ``nuisance_*`` columns.
    """
    check_demo(demo)
    metadata = plate_layout(demo, seed, plate)
    n, n_factors = len(metadata), int(demo["n_factors"])
    shifts = guide_shifts(demo, seed)
    factors = draw_factors(n, n_factors, rng_for(seed, "factors", plate))
    factors += shifts.loc[metadata[screen.GUIDE]].to_numpy()
    nuisance = nuisance_table(demo, seed, plate, n)

    channels, size, dtype = list(demo["channels"]), int(demo["image_size"]), np.dtype(demo["dtype"])
    tiles = np.empty((n, len(channels), size, size), dtype=dtype)
    render_rng, noise_rng = rng_for(seed, "render", plate), rng_for(seed, "noise", plate)
    block = _render_block(size, float(demo["cells_per_image"]))
    for start in range(0, n, block):
        stop = min(n, start + block)
        clean = render_cells(
            factors[start:stop],
            channels,
            size,
            float(demo["cells_per_image"]),
            render_rng,
            zoom=nuisance[f"{NUISANCE_PREFIX}zoom"].to_numpy()[start:stop],
        )
        tiles[start:stop] = apply_nuisance(
            clean, nuisance.iloc[start:stop], channels, float(demo["noise"]), dtype, noise_rng
        )

    table = pd.DataFrame(factors, columns=[factor_name(j) for j in range(n_factors)])
    table.insert(0, screen.IMAGE_INDEX, metadata[screen.IMAGE_INDEX].to_numpy())
    table.insert(0, screen.PLATE, plate)
    table = pd.concat([table, nuisance], axis=1)
    return tiles, metadata, table


def write_demo_plate(demo: dict, seed: int, plate: str, store: Path, metadata_path: Path, factors_path: Path) -> None:
    """Simulate one plate and write its Zarr store, metadata and factors (each atomically)."""
    tiles, metadata, factors = simulate_plate(demo, seed, plate)
    metadata = screen.validate_metadata(metadata, source=f"simulated metadata of plate {plate}")
    screen.write_plate(store, tiles, list(demo["channels"]), chunk_images=int(demo["chunk_images"]))
    write_parquet(metadata, metadata_path)
    write_parquet(factors, factors_path)


def simulate_screen(demo: dict, seed: int, out_dir: Path) -> pd.DataFrame:
    """Write every demo plate under ``out_dir`` (plates/, metadata/, factors/ and metadata.parquet
    for all plates) and return the screen's metadata."""
    out_dir = Path(out_dir)
    tables = []
    for _, plate in demo_plates(demo):
        write_demo_plate(
            demo,
            seed,
            plate,
            out_dir / "plates" / f"{plate}.zarr",
            out_dir / "metadata" / f"{plate}.parquet",
            out_dir / "factors" / f"{plate}.parquet",
        )
        tables.append(pd.read_parquet(out_dir / "metadata" / f"{plate}.parquet"))
    metadata = screen.validate_metadata(pd.concat(tables, ignore_index=True), source=str(out_dir / "metadata.parquet"))
    write_parquet(metadata, out_dir / "metadata.parquet")
    return metadata
