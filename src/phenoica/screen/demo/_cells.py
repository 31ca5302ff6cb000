"""Rendering cells from morphology factors into multi-channel images that survive per-image instance normalization."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import special
from skimage import filters

from phenoica.screen.demo._design import FACTORS

ROLES: tuple[str, ...] = ("nucleus", "er", "actin", "mito", "golgi")


RENDER_BLOCK = 32  # at most this many images rendered at once (see render_block)


_SOFT_EDGE = 0.7  # px, width of the sigmoid at cell and nucleus borders


_COUNT_GAIN = 0.4  # log cell count per unit of the (bounded) cell_count factor


_COUNT_JITTER = 0.08  # SD of the image-to-image log cell count at a fixed factor value


ZOOM_RANGE = (0.8, 1.25)  # magnification nuisance is clipped to this range


# Difference-of-Gaussians band-pass: high SD = _DOG_RATIO x low SD; the transfer function
# peaks at f0 when low SD = _DOG_PEAK / f0 (f0 in cycles/px).
_DOG_RATIO = 1.6


_DOG_PEAK = math.sqrt(math.log(_DOG_RATIO) / (_DOG_RATIO**2 - 1.0)) / math.pi


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
    top = cells_per_image * math.exp(_COUNT_GAIN * 2.5 + _COUNT_JITTER * 4.0) / ZOOM_RANGE[0] ** 2
    return int(math.ceil(top)) + 1


def render_block(image_size: int, cells_per_image: float) -> int:
    """Images rendered at once: bounded so the (images, cells, H, W) distance array stays
    ~4M values. A function of the config only, so outputs stay deterministic."""
    per_image = _max_cells(cells_per_image) * image_size * image_size
    return max(1, min(RENDER_BLOCK, (1 << 22) // per_image))


def blur(x: np.ndarray, sigma: np.ndarray) -> np.ndarray:
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
    spots = blur(points, sigma) * (2.0 * math.pi * np.asarray(sigma).reshape(-1, 1, 1) ** 2)
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


@dataclass(frozen=True)
class _Draws:
    """The fixed-shape random draws of one block of images, drawn in a fixed order."""

    z_count: np.ndarray
    pos: np.ndarray
    cluster: np.ndarray
    theta: np.ndarray
    z_size: np.ndarray
    z_asp: np.ndarray
    z_nuc: np.ndarray
    z_dna: np.ndarray
    off_x: np.ndarray
    off_y: np.ndarray
    phase: np.ndarray
    golgi_dir: np.ndarray
    lobe_1: np.ndarray
    lobe_2: np.ndarray
    noise_chromatin: np.ndarray
    noise_er: np.ndarray
    u_mito: np.ndarray
    u_golgi: np.ndarray
    u_chromatin: np.ndarray

    @classmethod
    def draw(cls, rng: np.random.Generator, n: int, kmax: int, size: int) -> _Draws:
        z_count = rng.standard_normal(n)
        pos = rng.uniform(0.0, size, (n, kmax, 2))
        cluster = rng.uniform(0.25 * size, 0.75 * size, (n, 1, 2))
        theta = rng.uniform(0.0, math.pi, (n, kmax))
        z_size, z_asp, z_nuc, z_dna, off_x, off_y = rng.standard_normal((6, n, kmax))
        phase, golgi_dir, lobe_1, lobe_2 = rng.uniform(0.0, 2.0 * math.pi, (4, n, kmax))
        noise_chromatin, noise_er = rng.standard_normal((2, n, size, size))
        u_mito, u_golgi, u_chromatin = rng.random((3, n, size, size)).astype(np.float32)
        return cls(
            z_count, pos, cluster, theta, z_size, z_asp, z_nuc, z_dna, off_x, off_y, phase, golgi_dir, lobe_1,
            lobe_2, noise_chromatin, noise_er, u_mito, u_golgi, u_chromatin,
        )  # fmt: skip


@dataclass(frozen=True)
class _Owners:
    """Which cell owns each pixel: ``owner`` (n, H*W) indexes the first ``K`` cell slots."""

    owner: np.ndarray
    K: int
    size: int

    def own(self, p: np.ndarray) -> np.ndarray:
        """A per-cell value (n, cells) as an image: each pixel gets its owning cell's value."""
        picked = np.take_along_axis(np.asarray(p)[:, : self.K], self.owner, axis=1)
        return picked.reshape(self.owner.shape[0], self.size, self.size).astype(np.float32)


@dataclass(frozen=True)
class _Cells:
    """Where the cells of a block of images are, pixel by pixel: masks, distances, frames.

    ``F`` holds the bounded factor values by name, ``s`` the zoom, ``owners`` which cell owns
    each pixel.
    """

    F: dict[str, np.ndarray]
    s: np.ndarray
    draws: _Draws
    owners: _Owners
    cell: np.ndarray
    nuc: np.ndarray
    cyto: np.ndarray
    dc: np.ndarray
    dn: np.ndarray
    yr: np.ndarray
    xn: np.ndarray
    yn: np.ndarray
    rc_o: np.ndarray

    def own(self, p: np.ndarray) -> np.ndarray:
        """A per-cell value (n, cells) as an image (see :meth:`_Owners.own`)."""
        return self.owners.own(p)

    def col(self, x: np.ndarray) -> np.ndarray:
        """A per-image value (n,) shaped to broadcast over the image."""
        return np.asarray(x, dtype=np.float32).reshape(-1, 1, 1)


def _layout(F: dict[str, np.ndarray], s: np.ndarray, d: _Draws, size: int, cells_per_image: float) -> _Cells:
    """Geometry: how many cells, where, how big and what shape (all in px at this zoom), and
    which cell owns each pixel (the smallest normalized elliptical distance)."""
    f32 = np.float32
    n, kmax = d.pos.shape[:2]
    rate = cells_per_image * np.exp(_COUNT_GAIN * F["cell_count"] + _COUNT_JITTER * d.z_count) / s**2
    counts = np.clip(np.rint(rate), 1, kmax).astype(np.int64)
    K = int(counts.max())
    active = np.arange(kmax)[None, :] < counts[:, None]
    base_rc = _base_cell_radius(size, cells_per_image) * s * np.exp(0.2 * F["cell_size"])
    pull = 0.6 * special.expit(1.5 * F["cell_clustering"])[:, None, None]
    pos = (1.0 - pull) * d.pos + pull * d.cluster
    pos = _spread_out(pos, active, 1.2 * base_rc, size)
    cx, cy = pos[..., 0].astype(f32), pos[..., 1].astype(f32)

    rc = base_rc[:, None] * np.exp(0.08 * d.z_size)
    # Aspect ratio >= 1 and monotone in the factor (1 at the round end, ~3.5 at the elongated end).
    sqrt_asp = np.exp(0.5 * np.abs(0.25 * (F["elongation"][:, None] + 2.5) + 0.08 * d.z_asp))
    rn = 0.42 * rc * np.exp(0.22 * F["nucleus_size"][:, None] + 0.05 * d.z_nuc)
    lobes = 0.08 * np.exp(0.55 * F["nucleus_irregularity"])[:, None] * np.ones((1, kmax))
    cos_t, sin_t = np.cos(d.theta), np.sin(d.theta)

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
    owners = _Owners(owner, K, size)
    own = owners.own

    xo = coord[None, None, :] - own(cx)
    yo = coord[None, :, None] - own(cy)
    co, so = own(cos_t), own(sin_t)
    xr, yr = xo * co + yo * so, yo * co - xo * so  # pixel in its cell's frame (x along the long axis)
    rc_o, sa_o = own(rc), own(sqrt_asp)
    dc = np.sqrt((xr / (rc_o * sa_o)) ** 2 + (yr * sa_o / rc_o) ** 2)
    cell = special.expit((1.0 - dc) * rc_o / _SOFT_EDGE).astype(f32)
    rn_o, san_o = own(rn), np.sqrt(sa_o)
    xn, yn = xr - own(0.12 * rc * d.off_x), yr - own(0.12 * rc * d.off_y)
    angle = np.arctan2(yn, xn)
    outline = 1.0 + own(lobes) * (np.cos(3.0 * angle + own(d.lobe_1)) + 0.7 * np.cos(5.0 * angle + own(d.lobe_2)))
    dn = np.sqrt((xn / (rn_o * san_o)) ** 2 + (yn * san_o / rn_o) ** 2) / outline
    nuc = (special.expit((1.0 - dn) * rn_o / _SOFT_EDGE) * cell).astype(f32)
    cyto = np.clip(cell - nuc, 0.0, None)
    return _Cells(F, s, d, owners, cell=cell, nuc=nuc, cyto=cyto, dc=dc, dn=dn, yr=yr, xn=xn, yn=yn, rc_o=rc_o)


def _nucleus(g: _Cells) -> np.ndarray:
    """DNA: the nucleus with each cell's own DNA content and a fine grain; condensation moves
    DNA signal from the diffuse nucleoplasm into bright heterochromatin foci."""
    d, s = g.draws, g.s
    grain = g.nuc * np.maximum(1.0 + 0.15 * _bandpass(d.noise_chromatin, 0.25 / s), 0.0)
    foci = _puncta(d.u_chromatin, 0.06 * g.nuc, 0.9 * s) * g.nuc
    condensed = g.col(special.expit(1.3 * g.F["chromatin_condensation"]))
    return 0.5 * g.own(np.exp(0.1 * d.z_dna)) * ((1.0 - 0.65 * condensed) * grain + condensed * foci)


def _er(g: _Cells) -> np.ndarray:
    """ER-resident marker: a tubular network (zero crossings of band-passed noise) in the
    perinuclear cytoplasm, its mesh size a factor; translocation moves the marker into the
    nucleus (the nuclear : cytoplasmic ratio of one channel)."""
    field = _bandpass(g.draws.noise_er, 0.05 * np.exp(0.5 * g.F["er_network_scale"]) / g.s)
    tubules = np.exp(-((field / 0.5) ** 2))
    cytoplasm = g.cyto * np.exp(-1.2 * g.dc) * (0.2 + tubules)
    nuclear = g.col(0.3 * np.exp(0.7 * g.F["er_translocation"])) * g.nuc
    return 0.5 * (cytoplasm + nuclear)


def _actin(g: _Cells) -> np.ndarray:
    """Actin: cortical ring plus stress fibres along the cell's long axis; the factor sets
    fibres against cortex (relative intensity of two compartments of one channel)."""
    ring = g.cell * np.exp(-(((1.0 - g.dc) * g.rc_o / (1.3 * g.col(g.s))) ** 2))
    fibers = g.cell * ((1.0 + np.cos(2.0 * math.pi * g.yr / (3.0 * g.col(g.s)) + g.own(g.draws.phase))) / 2.0) ** 4
    strength = g.col(0.45 * np.exp(0.6 * g.F["actin_fibers"]))
    return 0.45 * (0.8 * ring + 0.1 * g.cell + strength * fibers)


def _mito(g: _Cells) -> np.ndarray:
    """Mitochondria: puncta in the cytoplasm; density, size and how tightly they cluster
    around the nucleus are factors."""
    reach = g.col(1.2 * np.exp(0.5 * g.F["mito_perinuclear"]))
    prob = g.col(0.07 * np.exp(0.5 * g.F["mito_density"])) * g.cyto * np.exp(-reach * np.maximum(g.dn - 1.0, 0.0) / 2.0)
    spots = _puncta(g.draws.u_mito, prob, 0.7 * g.s * np.exp(0.25 * g.F["mito_size"]))
    return 0.5 * (spots + 0.08 * g.cyto)


def _golgi(g: _Cells) -> np.ndarray:
    """Golgi marker: a perinuclear band on one side of the nucleus; the factor moves the
    marker from diffuse cytoplasm into puncta, another spreads the band."""
    width = g.col(0.3 * np.exp(0.35 * g.F["golgi_spread"]))
    direction = g.draws.golgi_dir
    toward = (g.xn * g.own(np.cos(direction)) + g.yn * g.own(np.sin(direction))) / (np.sqrt(g.xn**2 + g.yn**2) + 1e-3)
    band = np.exp(-(((g.dn - 1.4) / width) ** 2)) * g.cyto * special.expit(3.0 * toward)
    punctate = g.col(special.expit(1.3 * g.F["golgi_punctate"]))
    spots = _puncta(g.draws.u_golgi, 0.35 * band, 0.8 * g.s)
    return 0.45 * (punctate * spots + (1.0 - punctate) * 0.35 * g.cyto)


#: How each channel role is drawn from the cells' geometry.
_CHANNEL_RENDERERS: dict[str, Callable[[_Cells], np.ndarray]] = {
    "nucleus": _nucleus,
    "er": _er,
    "actin": _actin,
    "mito": _mito,
    "golgi": _golgi,
}


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
    if not (np.all(s >= ZOOM_RANGE[0] - 1e-9) and np.all(s <= ZOOM_RANGE[1] + 1e-9)):
        raise ValueError(f"zoom must lie in {list(ZOOM_RANGE)}, got {float(s.min())}..{float(s.max())}")
    b = np.zeros((n, len(FACTORS)))
    b[:, : f.shape[1]] = _bounded(f)
    F = {name: b[:, i] for i, (name, _) in enumerate(FACTORS)}
    draws = _Draws.draw(rng, n, _max_cells(cells_per_image), size)
    cells = _layout(F, s, draws, size, cells_per_image)
    cache: dict[str, np.ndarray] = {}
    out = np.empty((n, len(channels), size, size), dtype=np.float32)
    for c, role in enumerate(channel_roles(channels)):
        if role not in cache:
            cache[role] = _CHANNEL_RENDERERS[role](cells).astype(np.float32)
        out[:, c] = cache[role]
    return out
