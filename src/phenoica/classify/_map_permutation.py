"""The mAP readout's within-plate permutation null: a guide's wells exchanged with its plates'
control wells.

Under the null hypothesis a guide's wells on a plate are exchangeable with that plate's control
wells. A draw picks, on every plate, which of the plate's (guide + control) wells play the guide
(as many as the guide has there) and computes the mAP from the real cosine similarities exactly as
the readout does: each chosen well ranks the other chosen wells (positives) among its plate's
wells not chosen (negatives), its average precision is the mean over positives of (positives at
or above) / rank, and the mAP the mean over the chosen wells of plates that hold controls. The
guide's own wells are one of the draws (:func:`pool_map`), so ``(1 + #{draws >= mAP}) / (draws +
1)`` is a valid p-value in finite samples, and it reaches where the random-rank null's atom does
not (the smallest exact p on an arrayed layout of 8 plates of 16 controls: 1 / 17^8).

The draw is cheap because the ranking is read from a table: ``above[a, w]`` counts the wells of
``a``'s plate (``a`` excluded) more similar to ``a`` than ``w`` is, so a positive's rank is its
place among the positives plus ``above`` less the other chosen wells of the plate
(docs/hit-calling.md, *The mAP readout at genome depth*).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phenoica.utils import rng_for

#: Memory (bytes) one chunk of permutation draws may use; more draws are made in chunks.
CHUNK_BYTES = 2**27
#: A draw equal to the observed mAP counts as an exceedance, up to this much (the same sums in
#: another order).
TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class WellPool:
    """One guide's permutation pool: its plates' wells, plate by plate (contiguous), and which of
    them are the guide's.

    ``similarity`` (w x w) the cosine similarities of the pool's wells; ``plate_sizes`` the pool
    wells of each plate (guide + control); ``guide_wells`` how many of them play the guide on each
    plate; ``scored`` whether that plate's chosen wells get an average precision (the plate holds
    a well not chosen: a negative); ``observed`` the pool indices of the guide's own wells, plate
    by plate (``guide_wells`` of each)."""

    similarity: np.ndarray
    plate_sizes: np.ndarray
    guide_wells: np.ndarray
    scored: np.ndarray
    observed: np.ndarray


def well_pool(unit_rows: np.ndarray, plate_pools: list[np.ndarray], plate_guides: list[np.ndarray]) -> WellPool:
    """The :class:`WellPool` of one guide from unit-norm well profiles ``unit_rows`` (rows x
    features), each plate's pool rows (``plate_pools``: guide and control wells) and the guide's
    own rows among them (``plate_guides``)."""
    order = np.concatenate(plate_pools)
    sizes = np.array([len(p) for p in plate_pools], dtype=np.int64)
    k = np.array([len(g) for g in plate_guides], dtype=np.int64)
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    observed = np.concatenate(
        [s + np.flatnonzero(np.isin(p, g)) for s, p, g in zip(starts, plate_pools, plate_guides, strict=True)]
    )
    sim = unit_rows[order] @ unit_rows[order].T
    return WellPool(sim, sizes, k, sizes > k, observed.astype(np.int64))


def _above(pool: WellPool) -> np.ndarray:
    """``above[a, w]``: the wells of ``a``'s plate, ``a`` excluded, more similar to ``a`` than
    ``w`` is (int16)."""
    sim = pool.similarity
    out = np.zeros(sim.shape, dtype=np.int16)
    start = 0
    for size in pool.plate_sizes:
        rows = slice(start, start + size)
        block = sim[rows]  # size x w
        inside = block[:, rows]  # size x size, the plate's own wells (the diagonal: a itself)
        greater = (inside[:, None, :] > block[:, :, None]).sum(axis=2)
        self_greater = np.diagonal(inside)[:, None] > block
        out[rows] = greater - self_greater
        start += size
    return out


def _maps(pool: WellPool, above: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """The mAP of each draw ``chosen`` (draws x wells of the guide: pool indices, plate by plate)."""
    n, k = chosen.shape
    if k < 2:
        return np.full(n, np.nan)
    w = len(pool.similarity)
    slot_plate = np.repeat(np.arange(len(pool.plate_sizes)), pool.guide_wells)
    others = np.nonzero(~np.eye(k, dtype=bool))[1].reshape(k, k - 1)
    counts = above.ravel()[(chosen * w)[:, :, None] + chosen[:, others]].astype(np.int32)  # n x k x (k-1)
    for i in range(k):  # the other chosen wells of a plate are positives, not negatives
        for j in np.flatnonzero((slot_plate == slot_plate[i]) & (np.arange(k) != i)):
            s_ij = pool.similarity[chosen[:, i], chosen[:, j]]
            counts[:, i, :] -= s_ij[:, None] > pool.similarity[chosen[:, i][:, None], chosen[:, others[i]]]
    counts.sort(axis=-1)
    place = np.arange(1, k, dtype=np.float64)
    ap = (place / (place + counts)).mean(axis=-1)
    scored = pool.scored[slot_plate]
    return ap[:, scored].mean(axis=1) if scored.any() else np.full(n, np.nan)


def pool_map(pool: WellPool) -> float:
    """The guide's own mAP: the draw that picks its own wells (copairs' value)."""
    return float(_maps(pool, _above(pool), pool.observed[None, :])[0])


def _draw(pool: WellPool, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` random choices of the guide's wells (draws x wells: pool indices, plate by plate)."""
    parts, start = [], 0
    for size, k in zip(pool.plate_sizes, pool.guide_wells, strict=True):
        if k == 1:
            parts.append(start + rng.integers(0, size, (n, 1)))
        elif k:
            parts.append(start + np.argsort(rng.random((n, size)), axis=1)[:, :k])
        start += size
    return np.concatenate(parts, axis=1)


def permutation_exceedances(pool: WellPool, observed: float, draws: int, seed: int) -> int:
    """Permutation draws (``draws`` of them, chunk ``i`` seeded ``rng_for(seed, i)``) whose mAP
    is at or above ``observed`` (up to :data:`TIE_TOLERANCE`)."""
    above = _above(pool)
    k = int(pool.guide_wells.sum())
    chunk = int(max(1, min(draws, CHUNK_BYTES // (16 * max(k * k, 1) + 8 * int(pool.plate_sizes.max())))))
    exceed, done, i = 0, 0, 0
    while done < draws:
        n = min(chunk, draws - done)
        exceed += int((_maps(pool, above, _draw(pool, n, rng_for(seed, i))) >= observed - TIE_TOLERANCE).sum())
        done, i = done + n, i + 1
    return exceed
