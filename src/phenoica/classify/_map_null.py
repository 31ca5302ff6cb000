"""The mAP readout's p-values, drawn until the call they give is settled (copairs' random-rank null).

copairs (``copairs.map.get_map_pvalue``) estimates a guide's mAP p-value by Monte Carlo: for each
(positives, total) configuration of its wells it draws ``null_size`` random rank lists, and the
p-value is ``(exceedances + 1) / (draws + 1)``. A fixed number of draws leaves every p-value with
a Monte Carlo error, and where many p-values lie along the Benjamini-Hochberg line (the common
case: a screen's p-values bunch at the cut) that error moves the BH cut itself, so the active
count changes with the seed. The remedy is to draw more where it matters: the sequential
multiple Monte Carlo tests of Gandy & Hahn (2014, 2016) refine only the tests whose decision is
still open. :func:`settled_null_counts` does that with copairs' own null:

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
the draws of the few guides near the cut (and copairs draws once per configuration, which guides
of an arrayed layout share). What stays seed-dependent is a call whose true p-value lies within
the Monte Carlo error of ``max_null_size`` draws of the cut.
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from phenoica.utils import bh_qvalues, derive_seed

#: Two-sided level of each guide's binomial interval. A guide outside the open set keeps its
#: call unless its true p-value lies outside this interval (at most 1 in 1,000 such guides per
#: round), and the intervals stay narrow enough that a round refines few guides.
CONFIDENCE = 0.999
#: How many times its draws so far an open guide gets in the next round (10: two rounds from
#: 10,000 to 1,000,000 draws).
GROWTH = 10
#: Memory (bytes) one copairs call may use for its random rank lists and null distributions;
#: a round that needs more is drawn in chunks of independent seeds and pooled.
CHUNK_BYTES = 2**28
#: Columns of :func:`settled_null_counts`' table beside the group columns.
COUNT_COLUMNS: tuple[str, ...] = ("mean_average_precision", "exceedances", "draws", "p_value", "open_call")


def copairs_null_counts(
    ap: pd.DataFrame,
    sameby: Sequence[str],
    draws: int,
    seed: int,
) -> pd.DataFrame:
    """mAP and copairs' null exceedance counts of each ``sameby`` group of ``ap`` (copairs'
    ``average_precision`` output): ``sameby``, ``mean_average_precision``, ``exceedances`` (null
    draws above the group's mAP) and ``draws``. The draws are made by ``copairs.map.get_map_pvalue``
    in chunks that fit :data:`CHUNK_BYTES`, chunk ``i`` seeded ``derive_seed(seed, i)``; its
    p-value ``(e + 1) / (n + 1)`` gives back the exact count ``e``. copairs' disk cache of null
    distributions goes to a temporary folder removed after: its key (seed, draws, configuration)
    leaves out the configuration's own seed, which copairs derives from its place in the list of
    configurations, so a cache shared between calls could hand one call's draws to another.
    copairs also draws each configuration's seed among 8,096 values: two calls (chunks, rounds)
    repeat a configuration's draws with probability 1/8,096, which leaves the pooled p-value
    unbiased, with the error of fewer draws."""
    from copairs.map import get_map_pvalue

    sameby = list(sameby)
    valid = ap[np.isfinite(ap["average_precision"].to_numpy(dtype=float)) & (ap["n_pos_pairs"] > 0)]
    confs = valid[["n_pos_pairs", "n_total_pairs"]].drop_duplicates()
    # per draw: copairs' float32 null per configuration and per well of a group, and the uint16
    # rank lists its threads (one per configuration, up to the CPUs) build at once
    threads = max(1, min(len(confs), os.cpu_count() or 1))
    widest = int(confs["n_total_pairs"].max()) if len(confs) else 1
    largest_group = int(valid.groupby(sameby).size().max()) if len(valid) else 1
    per_draw = 4 * (len(confs) + largest_group) + 2 * threads * widest
    chunk = int(max(1, min(draws, CHUNK_BYTES // per_draw)))
    total: pd.DataFrame | None = None
    done, i = 0, 0
    with tempfile.TemporaryDirectory(prefix="phenoica-copairs-") as tmp:
        while done < draws:
            n = min(chunk, draws - done)
            part = get_map_pvalue(
                ap,
                sameby=sameby,
                null_size=n,
                seed=derive_seed(seed, i),
                progress_bar=False,
                max_workers=1,
                cache_dir=tmp,
            )
            exceed = np.rint(part["p_value"].to_numpy(dtype=np.float64) * (n + 1)).astype(np.int64) - 1
            part = part[sameby + ["mean_average_precision"]].assign(exceedances=exceed, draws=n)
            total = part if total is None else _pooled(total, part, sameby)
            done, i = done + n, i + 1
    assert total is not None
    return total.reset_index(drop=True)


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
    if max_null_size < null_size:
        raise ValueError(
            f"mAP null: map_max_null_size ({max_null_size}) is below map_null_size ({null_size}); "
            "the refinement never draws fewer than the first pass"
        )
    log = log or logging.getLogger(__name__)
    sameby = list(sameby)
    counts = copairs_null_counts(ap, sameby, null_size, derive_seed(seed, 0))
    round_ = 0
    while True:
        draws = counts["draws"].to_numpy()
        lower, upper = p_value_bounds(counts["exceedances"].to_numpy(), draws)
        undecided = open_calls(lower, upper, q_threshold) & (draws < max_null_size)
        if not undecided.any():
            break
        round_ += 1
        target = min(max_null_size, null_size * GROWTH**round_)
        for before in np.unique(draws[undecided]):  # one copairs call per number of draws so far
            rows = undecided & (draws == before)
            if before >= target:
                continue
            subset = ap.merge(counts.loc[rows, sameby], on=sameby, how="inner")
            extra = copairs_null_counts(subset, sameby, int(target - before), derive_seed(seed, round_, int(before)))
            counts = _pooled(counts, extra, sameby)
        log.info(
            "mAP null round %d: %d guide(s) near the BH cut drawn to %d draws each",
            round_,
            int(undecided.sum()),
            target,
        )
    lower, upper = p_value_bounds(counts["exceedances"].to_numpy(), counts["draws"].to_numpy())
    counts["open_call"] = open_calls(lower, upper, q_threshold)
    counts["p_value"] = (counts["exceedances"] + 1.0) / (counts["draws"] + 1.0)
    return counts[sameby + list(COUNT_COLUMNS)].reset_index(drop=True)
