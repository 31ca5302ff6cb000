"""The mAP readout's p-values: a random-rank null drawn alike for every configuration of a
guide's wells, and drawn until the call it gives is settled.

**The null.** A well's average precision ranks its guide's other wells (positives) among the
negatives of its plate; under the null its rank list is random, and copairs
(``copairs.map.get_map_pvalue``) draws ``null_size`` random rank lists per (positives, total)
configuration and takes, for a guide, the mean over its wells of their configurations' draws.
Wells that share a configuration share each draw; wells of different configurations draw
independently. So a guide's null is the null of one well's AP when all its wells share one
configuration (every well of an arrayed layout, 16 controls on every plate), and a narrower one
as soon as one plate holds a control well fewer: removing any one control well of an arrayed
screen moved every guide's p-value (0.045 to 0.030 at the cut) and the active count from 26 to
31, a change of layout, not of data. :func:`coupled_null_counts` keeps copairs' null for a guide
whose wells share a configuration (the same distribution: one random ranking) and draws every
configuration on one shared random ranking, so that configurations that differ by a negative
give nearly the same draw and the null does not jump when a plate loses a well
(:func:`configuration_aps`). The wells of a guide are not independent (each is the others'
positive), which is why copairs shares the draw within a configuration; sharing it across
configurations keeps that choice, the conservative one, for every layout.

**Drawn by the negatives where the wells outnumber them.** Ranking every item of a configuration
costs each draw O(T log T) for T = positives + negatives, and a guide's positives grow with its
plates (319 among 335 at 40 times the arrayed layout's plates), so that a guide near the cut took
about a minute to 100,000 draws. What a configuration's average precision needs is only where its
negatives fall among its positives: :func:`_gap_draw` draws the negatives' uniform scores, then
how many positives fall into each gap between consecutive negatives (a multinomial of the gaps'
lengths, one binomial a gap), and sums a gap's positives' terms j / (j + c) in closed form with
harmonic numbers (:func:`gap_configuration_aps`). A configuration with fewer negatives reads the
same ranking without the later negatives, and one with fewer positives takes a multivariate
hypergeometric sample of the positives' gap counts (:func:`_thinned`: the first positives of the
shared ranking are a random subset of them), so the draw is the same law, coupling included, at a
cost that grows with the negatives and the configurations, not with the wells. Which draw is taken
depends on the layout only (:func:`gap_drawn`: positives at least :data:`GAP_DRAW_RATIO` times the
negatives), so a layout whose guides have fewer wells than their plates' controls (the arrayed
layout at 1x, the shipped plate) keeps the draws, and the p-values, it always had.

**Settled p-values.** A fixed number of draws leaves every p-value with a Monte Carlo error, and
where many p-values lie along the Benjamini-Hochberg line (the common case: a screen's p-values
bunch at the cut) that error moves the BH cut itself, so the active count changes with the seed.
The remedy is to draw more where it matters: the sequential multiple Monte Carlo tests of Gandy &
Hahn (2014, 2016) refine only the tests whose decision is still open.
:func:`settled_null_counts` does that:

1. a first pass at ``null_size`` draws for every guide (the configured null);
2. each guide's exceedance probability gets an exact (Clopper-Pearson) binomial interval at
   :data:`CONFIDENCE`; Benjamini-Hochberg is applied to all the lower ends and to all the upper
   ends. BH is monotone in every p-value, so a guide called at its upper end and every other
   guide at theirs is called whatever the true p-values are, and a guide not called at its lower
   end is not called: only the guides between the two calls are open;
3. the open guides get :data:`GROWTH` times more draws (fresh draws, pooled with the earlier
   ones), up to ``max_null_size`` in all, and step 2 repeats until no guide is open or the cap
   is reached.

The guides that decide nothing keep the first pass's draws, so the cost over a single pass is
the draws of the few guides near the cut. What stays seed-dependent is a call whose true p-value
lies within the Monte Carlo error of ``max_null_size`` draws of the cut.

**Beyond the random-rank null's atom.** One shared ranking makes a guide's null mAP one well's
average precision, whose atom at mAP 1 (1 / C(23, 7) on an arrayed layout) no genome-scale cut
lies above. :func:`permuted_null_counts` gives the guides whose random-rank p-value is at or
below the cut's q the within-plate permutation null of their own wells instead
(:mod:`~phenoica.classify._map_permutation`), settled the same way.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from phenoica.classify._map_permutation import WellPool, permutation_exceedances
from phenoica.utils import bh_qvalues, derive_seed, rng_for

#: Two-sided level of each guide's binomial interval. A guide outside the open set keeps its
#: call unless its true p-value lies outside this interval (at most 1 in 1,000 such guides per
#: round), and the intervals stay narrow enough that a round refines few guides.
CONFIDENCE = 0.999
#: How many times its draws so far an open guide gets in the next round (10: three rounds from
#: 10,000 to 10,000,000 draws).
GROWTH = 10
#: Memory (bytes) one chunk of draws may use for its random scores, rank lists and null means;
#: a round that needs more is drawn in chunks of independent seeds and pooled.
CHUNK_BYTES = 2**28
#: A null draw equal to the observed mAP counts as an exceedance (``null >= mAP``, so that the
#: p-value is valid where the null has atoms: a guide at mAP 1 lies on the atom of every ranking
#: that puts all positives first, probability 1 / C(total, positives) for one configuration;
#: copairs counts ``null > mAP``, which reports that atom's guides at 1 / (draws + 1) however
#: likely the atom is): equal up to this much, since the two means add the same average
#: precisions in another order.
TIE_TOLERANCE = 1e-9
#: Where a guide's positives number at least this many times the negatives of its wells'
#: configurations, the shared ranking is drawn by its negatives (:func:`gap_drawn`): measured to
#: cost as much as ranking every item at about twice (``benchmarks/map_null_cost.py``).
GAP_DRAW_RATIO = 2
#: Columns of :func:`settled_null_counts`' table beside the group columns.
COUNT_COLUMNS: tuple[str, ...] = ("mean_average_precision", "exceedances", "draws", "p_value", "open_call")


def configuration_aps(u: np.ndarray, n_pos: int, total: int, max_pos: int) -> np.ndarray:
    """Each draw's average precision of the configuration (``n_pos`` positives among ``total``)
    on the shared random scores ``u`` (draws x items: the first ``max_pos`` items are the
    positives, the rest the negatives): the configuration ranks its first ``n_pos`` positives and
    first ``total - n_pos`` negatives by score, as copairs' ``random_ap`` ranks a random list
    (AP = the mean over positives of j / their rank)."""
    scores = np.concatenate([u[:, :n_pos], u[:, max_pos : max_pos + total - n_pos]], axis=1)
    order = np.argsort(-scores, axis=1, kind="stable")
    ranks = np.nonzero(order < n_pos)[1].reshape(len(u), n_pos)  # 0-based, ascending per draw
    return (np.arange(1, n_pos + 1) / (ranks + 1.0)).mean(axis=1)


def _gap_counts(rng: np.random.Generator, n: int, n_pos: int, n_neg: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` shared random rankings of ``n_pos`` positives and ``n_neg`` negatives, told by the
    negatives alone: each draw's negatives in rank order (``order``: draws x n_neg, their indices)
    and how many positives lie in each gap (``counts``: draws x (n_neg + 1): above the first
    negative, between consecutive ones, below the last). The negatives' scores are uniform; given
    them, the positives (uniform scores too) fall into the gaps multinomially with the gaps'
    lengths as probabilities, drawn as one binomial a gap: the same law as ranking every item."""
    v = rng.random((n, n_neg))
    order = np.argsort(-v, axis=1, kind="stable")
    edges = np.concatenate([np.ones((n, 1)), np.take_along_axis(v, order, axis=1)], axis=1)
    counts = np.empty((n, n_neg + 1), dtype=np.int64)
    left = np.full(n, n_pos, dtype=np.int64)
    for i in range(n_neg):  # the positives above negative i, of those not above negative i - 1
        below = edges[:, i + 1] / np.maximum(edges[:, i], np.finfo(np.float64).tiny)
        counts[:, i] = rng.binomial(left, np.clip(1.0 - below, 0.0, 1.0))
        left -= counts[:, i]
    counts[:, n_neg] = left
    return order, counts


def _thinned(counts: np.ndarray, n_pos: int, rng: np.random.Generator) -> np.ndarray:
    """The gap counts of the first ``n_pos`` positives of a ranking whose positives' gap counts
    are ``counts`` (draws x gaps): a multivariate hypergeometric sample of them, one gap at a time
    (the positives are exchangeable, so the first ``n_pos`` are a random subset of them)."""
    out = np.empty_like(counts)
    total = counts.sum(axis=1)
    left = np.full(len(counts), n_pos, dtype=np.int64)
    for i in range(counts.shape[1] - 1):
        out[:, i] = rng.hypergeometric(counts[:, i], total - counts[:, i], left)
        total -= counts[:, i]
        left -= out[:, i]
    out[:, -1] = left
    return out


def gap_configuration_aps(order: np.ndarray, counts: np.ndarray, n_neg: int, harmonic: np.ndarray) -> np.ndarray:
    """Each draw's average precision of the configuration whose negatives are the first ``n_neg``
    of a shared ranking told by its negatives (:func:`_gap_counts`; ``counts`` the configuration's
    positives in each gap, ``harmonic[x]`` = 1 + 1/2 + ... + 1/x). The positives of a gap hold
    consecutive places j = a..b among the positives, each with the same c negatives of the
    configuration above it, so they add sum j / (j + c) = (b - a + 1) - c (H(b + c) - H(a - 1 + c)):
    the cost is the gaps', not the positives'."""
    above = np.zeros(counts.shape, dtype=np.int64)
    np.cumsum(order < n_neg, axis=1, out=above[:, 1:])
    before = np.cumsum(counts, axis=1) - counts
    terms = counts - above * (harmonic[before + counts + above] - harmonic[before + above])
    return terms.sum(axis=1) / counts.sum(axis=1)


def _gap_draw(
    rng: np.random.Generator, n: int, confs: np.ndarray, max_pos: int, max_neg: int, harmonic: np.ndarray
) -> np.ndarray:
    """``n`` draws of every configuration (configurations x draws), all on one shared ranking of
    ``max_pos`` positives and ``max_neg`` negatives drawn by its negatives (:func:`_gap_counts`);
    a configuration of fewer positives takes the first of them (:func:`_thinned`, from the next
    larger one's)."""
    order, counts = _gap_counts(rng, n, max_pos, max_neg)
    by_pos = {max_pos: counts}
    for k in sorted({int(c) for c in confs[:, 0]}, reverse=True):
        if k not in by_pos:
            by_pos[k] = _thinned(by_pos[min(by_pos)], k, rng)
    return np.stack([gap_configuration_aps(order, by_pos[int(k)], int(t - k), harmonic) for k, t in confs])


def coupled_null_counts(
    ap: pd.DataFrame, sameby: Sequence[str], draws: int, seed: int, gaps: bool | None = None
) -> pd.DataFrame:
    """mAP and null exceedance counts of each ``sameby`` group of ``ap`` (copairs'
    ``average_precision`` output): ``sameby``, ``mean_average_precision`` (the mean of the
    group's average precisions, as copairs' ``get_map_pvalue`` takes it), ``exceedances`` (null
    draws at or above it, up to rounding: :data:`TIE_TOLERANCE`) and ``draws``.

    The null of a group's mAP is, per draw, the mean over its wells of a random rank list's
    average precision in each well's (positives, total) configuration, with every configuration
    drawn on one shared random ranking (module doc): a configuration ranks the first positives
    and the first negatives of the same random scores, so configurations that differ by one
    negative give nearly the same draw. Draws are made in chunks that fit :data:`CHUNK_BYTES`,
    chunk ``i`` seeded ``derive_seed(seed, i)`` (``derive_seed(seed, "gaps", i)`` where the
    ranking is drawn by its negatives: ``gaps``, by default :func:`gap_drawn` of the layout)."""
    sameby = list(sameby)
    valid = ap[np.isfinite(ap["average_precision"].to_numpy(dtype=float)) & (ap["n_pos_pairs"] > 0)]
    valid = valid.reset_index(drop=True)
    confs, conf_of = np.unique(valid[["n_pos_pairs", "n_total_pairs"]].to_numpy(np.int64), axis=0, return_inverse=True)
    groups = valid.groupby(sameby, sort=False, observed=True)
    out = groups["average_precision"].mean().rename("mean_average_precision").reset_index()
    group_of = groups.ngroup().to_numpy()
    # weights: a group's null is its wells' configuration draws averaged (groups x configurations)
    weights = np.zeros((len(out), len(confs)))
    np.add.at(weights, (group_of, conf_of.ravel()), 1.0)
    weights /= weights.sum(axis=1, keepdims=True)
    max_pos = int(confs[:, 0].max()) if len(confs) else 1
    max_neg = int((confs[:, 1] - confs[:, 0]).max()) if len(confs) else 0
    gaps = gap_drawn(max_pos, max_neg) if gaps is None else gaps
    width = (max_neg + 1) * (3 + len(np.unique(confs[:, 0]))) if gaps else 3 * (max_pos + max_neg)
    chunk = int(max(1, min(draws, CHUNK_BYTES // (8 * (width + len(confs) + len(out))))))
    harmonic = np.r_[0.0, np.cumsum(1.0 / np.arange(1, max_pos + max_neg + 2))]
    observed = out["mean_average_precision"].to_numpy(np.float64)
    exceed = np.zeros(len(out), dtype=np.int64)
    done, i = 0, 0
    while done < draws:
        n = min(chunk, draws - done)
        if gaps:
            aps = _gap_draw(rng_for(seed, "gaps", i), n, confs, max_pos, max_neg, harmonic)
        else:
            u = rng_for(seed, i).random((n, max_pos + max_neg))
            aps = np.stack([configuration_aps(u, int(k), int(t), max_pos) for k, t in confs])
        null = weights @ aps
        exceed += (null >= observed[:, None] - TIE_TOLERANCE).sum(axis=1)
        done, i = done + n, i + 1
    return out.assign(exceedances=exceed, draws=draws)


def gap_drawn(max_pos: int, max_neg: int) -> bool:
    """Whether :func:`coupled_null_counts` draws its shared ranking by its negatives
    (:func:`_gap_draw`: a cost that grows with the negatives, not with a guide's wells) rather than
    by ranking every item (:func:`configuration_aps`): where the positives number at least
    :data:`GAP_DRAW_RATIO` times the negatives (module doc)."""
    return max_pos >= GAP_DRAW_RATIO * max(max_neg, 1)


def _pooled(counts: pd.DataFrame, extra: pd.DataFrame, sameby: list[str]) -> pd.DataFrame:
    """``counts`` with the exceedances and draws of ``extra`` (independent draws) added to the
    groups it holds."""
    more = counts[sameby].merge(extra[sameby + ["exceedances", "draws"]], on=sameby, how="left")
    out = counts.copy()
    out["exceedances"] = out["exceedances"].to_numpy() + more["exceedances"].fillna(0).to_numpy(dtype=np.int64)
    out["draws"] = out["draws"].to_numpy() + more["draws"].fillna(0).to_numpy(dtype=np.int64)
    return out


def p_value_bounds(
    exceedances: np.ndarray, draws: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Clopper-Pearson) two-sided ``confidence`` interval of each exceedance probability
    from ``exceedances`` of ``draws``, widened to hold the reported p-value ``(e + 1) / (n + 1)``
    (so that a call made on the reported value lies between the calls at the two ends)."""
    e = np.asarray(exceedances, dtype=np.float64)
    n = np.asarray(draws, dtype=np.float64)
    tail = (1.0 - confidence) / 2.0
    with np.errstate(invalid="ignore"):
        lo = np.where(e > 0, stats.beta.ppf(tail, e, n - e + 1), 0.0)
        hi = np.where(e < n, stats.beta.ppf(1.0 - tail, e + 1, n - e), 1.0)
    reported = (e + 1.0) / (n + 1.0)
    return np.minimum(lo, reported), np.maximum(hi, reported)


def open_calls(lower: np.ndarray, upper: np.ndarray, q_threshold: float) -> np.ndarray:
    """The tests whose Benjamini-Hochberg call (q < ``q_threshold``) is not settled by p-value
    intervals ``[lower, upper]``: called with every p-value at its lower end, not called with
    every p-value at its upper end (BH is monotone in each p-value, so every other test's call is
    the same for any p-values within the intervals)."""
    called_low = bh_qvalues(lower) < q_threshold
    called_high = bh_qvalues(upper) < q_threshold
    return called_low & ~called_high


Refine = Callable[[pd.DataFrame, np.ndarray, int, int, int], pd.DataFrame]


def _rounds(
    counts: pd.DataFrame,
    is_open: Callable[[pd.DataFrame], np.ndarray],
    refine: Refine,
    null_size: int,
    max_null_size: int,
    log: logging.Logger,
    what: str,
) -> pd.DataFrame:
    """Rounds of :data:`GROWTH` times more draws (``refine(counts, rows, more, round, before)``)
    for the rows ``is_open`` marks, ``max_null_size`` draws at most, until none is open."""
    round_ = 0
    while True:
        draws = counts["draws"].to_numpy()
        undecided = is_open(counts) & (draws < max_null_size)
        if not undecided.any():
            return counts
        round_ += 1
        target = min(max_null_size, null_size * GROWTH**round_)
        for before in np.unique(draws[undecided]):  # one call per number of draws so far
            if before < target:
                counts = refine(counts, undecided & (draws == before), int(target - before), round_, int(before))
        log.info("mAP null round %d: %d guide(s) %s drawn to %d draws each", round_, int(undecided.sum()), what, target)


def _bh_open(q_threshold: float, eligible: np.ndarray | None = None) -> Callable[[pd.DataFrame], np.ndarray]:
    """The rows whose BH call the 99.9% intervals leave open (of ``eligible`` rows only, if given)."""

    def is_open(counts: pd.DataFrame) -> np.ndarray:
        lower, upper = p_value_bounds(counts["exceedances"].to_numpy(), counts["draws"].to_numpy())
        out = open_calls(lower, upper, q_threshold)
        return out if eligible is None else out & eligible

    return is_open


def _random_rank_refine(ap: pd.DataFrame, sameby: list[str], seed: int) -> Refine:
    """Refines rows of the counts with fresh random-rank draws, pooled."""

    def refine(counts: pd.DataFrame, rows: np.ndarray, more: int, round_: int, before: int) -> pd.DataFrame:
        subset = ap.merge(counts.loc[rows, sameby], on=sameby, how="inner")
        return _pooled(counts, coupled_null_counts(subset, sameby, more, derive_seed(seed, round_, before)), sameby)

    return refine


def _finish(counts: pd.DataFrame, q_threshold: float, sameby: list[str]) -> pd.DataFrame:
    lower, upper = p_value_bounds(counts["exceedances"].to_numpy(), counts["draws"].to_numpy())
    counts["open_call"] = open_calls(lower, upper, q_threshold)
    counts["p_value"] = (counts["exceedances"] + 1.0) / (counts["draws"] + 1.0)
    return counts[sameby + list(COUNT_COLUMNS)].reset_index(drop=True)


def _check_sizes(null_size: int, max_null_size: int) -> None:
    if max_null_size < null_size:
        raise ValueError(
            f"mAP null: map_max_null_size ({max_null_size}) is below map_null_size ({null_size}); "
            "the refinement never draws fewer than the first pass"
        )


def settled_null_counts(
    ap: pd.DataFrame,
    sameby: Sequence[str],
    null_size: int,
    max_null_size: int,
    q_threshold: float,
    seed: int,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """mAP and p-value of each ``sameby`` group of ``ap`` (copairs' ``average_precision``
    output), the p-values drawn until their Benjamini-Hochberg calls at ``q_threshold`` are
    settled (module doc): ``null_size`` draws for every group, then rounds of :data:`GROWTH`
    times more for the open ones, ``max_null_size`` draws at most. The first pass is seeded
    ``derive_seed(seed, 0)``, round ``r`` ``derive_seed(seed, r, draws so far)``. Returns
    ``sameby`` and :data:`COUNT_COLUMNS`, one row per group; ``p_value = (exceedances + 1) / (draws + 1)`` as copairs reports it, and
    ``open_call`` marks the groups whose call ``max_null_size`` draws left open (a true p-value
    within their Monte Carlo error of the cut: a call that can change with the seed)."""
    _check_sizes(null_size, max_null_size)
    log = log or logging.getLogger(__name__)
    sameby = list(sameby)
    counts = coupled_null_counts(ap, sameby, null_size, derive_seed(seed, 0))
    refine = _random_rank_refine(ap, sameby, seed)
    counts = _rounds(counts, _bh_open(q_threshold), refine, null_size, max_null_size, log, "near the BH cut")
    return _finish(counts, q_threshold, sameby)


def permuted_null_counts(
    ap: pd.DataFrame,
    sameby: Sequence[str],
    pools: Callable[[tuple[Any, ...]], WellPool],
    null_size: int,
    max_null_size: int,
    q_threshold: float,
    seed: int,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """As :func:`settled_null_counts`, with the within-plate permutation null where the
    random-rank null cannot reach (docs/hit-calling.md, *The mAP readout at genome depth*):

    1. every group gets the random-rank null's first pass, and the groups whose 99.9% interval of
       its p-value holds ``q_threshold`` (tau) get 10x more random-rank draws a round until
       none does (or ``max_null_size``);
    2. a group whose random-rank p-value is above tau keeps it (it is not called); the others get
       the permutation null of their :class:`WellPool` (``pools(group key)``) instead: ``null_size``
       draws, then rounds of 10x more for those whose BH call (over all groups) is open, up to
       ``max_null_size``. Their draws are seeded ``derive_seed(seed, "within_plate", key, draws so far)``.

    Returns :func:`settled_null_counts`' columns and ``within_plate`` (the p-value is the
    permutation null's)."""
    _check_sizes(null_size, max_null_size)
    log = log or logging.getLogger(__name__)
    sameby = list(sameby)
    counts = coupled_null_counts(ap, sameby, null_size, derive_seed(seed, 0))

    def holds_tau(c: pd.DataFrame) -> np.ndarray:
        lower, upper = p_value_bounds(c["exceedances"].to_numpy(), c["draws"].to_numpy())
        return (lower <= q_threshold) & (upper > q_threshold)

    refine = _random_rank_refine(ap, sameby, seed)
    counts = _rounds(counts, holds_tau, refine, null_size, max_null_size, log, "near tau")
    below = ((counts["exceedances"] + 1.0) / (counts["draws"] + 1.0)).to_numpy() <= q_threshold
    keys = [tuple(row) for row in counts[sameby].itertuples(index=False, name=None)]
    cache: dict[int, tuple[WellPool, float]] = {}

    def permuted(c: pd.DataFrame, rows: np.ndarray, more: int, round_: int, before: int) -> pd.DataFrame:
        c = c.copy()
        for i in map(int, np.flatnonzero(rows)):
            if i not in cache:
                pool = pools(keys[i])
                cache[i] = (pool, float(c["mean_average_precision"].iat[i]))
            pool, observed = cache[i]
            extra = permutation_exceedances(
                pool, observed, more, derive_seed(seed, "within_plate", str(keys[i]), before)
            )
            c.iloc[i, c.columns.get_loc("exceedances")] = (0 if before == 0 else c["exceedances"].iat[i]) + extra
            c.iloc[i, c.columns.get_loc("draws")] = before + more
        return c

    counts = permuted(counts, below, null_size, 0, 0)
    counts = _rounds(
        counts, _bh_open(q_threshold, below), permuted, null_size, max_null_size, log, "(permutation) near the BH cut"
    )
    out = _finish(counts, q_threshold, sameby)
    return out.assign(within_plate=below)
