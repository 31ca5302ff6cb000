"""Mutual information of continuous latents with discrete factors, for InfoMEC's NMI matrix
(:func:`phenoica.identifiability._metrics.nmi_matrix`): scikit-learn's ``mutual_info_classif``
estimate (Ross 2014's kNN estimator), computed for all latents at once by sorting, since in one
dimension a point's nearest neighbours are its neighbours in sorted order."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import digamma
from sklearn.preprocessing import scale
from sklearn.utils import check_random_state


def jittered_columns(latents: np.ndarray, seed: int) -> np.ndarray:
    """Latents as scikit-learn's ``mutual_info_classif`` prepares continuous features: each column
    scaled to unit SD (no centring) plus Gaussian jitter of ``1e-10 * max(1, mean |x|)`` drawn from
    ``RandomState(seed)``, which breaks ties between equal values."""
    x = scale(np.asarray(latents, dtype=np.float64), with_mean=False, copy=True)
    means = np.maximum(1, np.mean(np.abs(x), axis=0))
    return x + 1e-10 * means * check_random_state(seed).standard_normal(size=x.shape)


def _kth_gap(values: np.ndarray, k: int) -> np.ndarray:
    """For ``values`` (L, m) sorted along each row, each entry's distance to its ``k``-th nearest
    other entry of the same row (1-D: the neighbours are the ``k`` on either side in sorted order).

    The distances to the ``step``-th entry below and above both grow with ``step``, so the
    ``k``-th smallest of the two runs is ``min over a of max(below_a, above_(k - a))``: one of
    the distances themselves, without a ``(L, m, 2k)`` array to partition."""

    def gap(step: int, upward: bool) -> np.ndarray:
        """Each entry's distance to the ``step``-th entry above (or below) it; inf where none is."""
        out = np.full(values.shape, np.inf)
        diff = values[:, step:] - values[:, :-step]
        if upward:
            out[:, : max(0, values.shape[1] - step)] = diff
        else:
            out[:, step:] = diff
        return out

    kth = np.minimum(gap(k, upward=False), gap(k, upward=True))
    for below in range(1, k):
        np.minimum(kth, np.maximum(gap(below, upward=False), gap(k - below, upward=True)), out=kth)
    return kth


class SortedColumns(NamedTuple):
    """Columns laid out for the estimator: ``rows`` (L, n), one contiguous row per column;
    ``order`` (L, n), each row's stable ascending argsort; ``ordered``, each row sorted."""

    rows: np.ndarray
    order: np.ndarray
    ordered: np.ndarray


def sort_columns(columns: np.ndarray) -> SortedColumns:
    """The layout of :class:`SortedColumns` for ``columns`` (n, L), computed once for every
    set of labels scored on the same columns."""
    rows = np.ascontiguousarray(np.asarray(columns, dtype=np.float64).T)
    order = np.argsort(rows, axis=1, kind="stable")
    return SortedColumns(rows, order, np.take_along_axis(rows, order, axis=1))


def _search(ordered: np.ndarray, queries: np.ndarray, order: np.ndarray, side: str) -> np.ndarray:
    """``np.searchsorted(ordered, queries, side)``, asked in the near-ascending ``order`` of the
    queries (numpy's binary search starts from the previous answer when keys ascend)."""
    out = np.empty(queries.shape, dtype=np.int64)
    out[order] = np.searchsorted(ordered, queries[order], side=side)
    return out


def _count_within(columns: SortedColumns, radius: np.ndarray) -> np.ndarray:
    """Per row and entry of ``columns.rows``, how many entries of the same row lie at distance
    strictly below the entry's ``radius`` (L, n), distances taken as ``|a - b|``."""
    centre, ordered = columns.rows, columns.ordered
    n = ordered.shape[1]
    low, high = centre - radius, centre + radius
    lo = np.empty(centre.shape, dtype=np.int64)
    hi = np.empty(centre.shape, dtype=np.int64)
    for j in range(ordered.shape[0]):
        lo[j] = _search(ordered[j], low[j], columns.order[j], "left")
        hi[j] = _search(ordered[j], high[j], columns.order[j], "right")

    def near(index: np.ndarray) -> np.ndarray:
        """Whether the entry at ``index`` (per row, clipped into range) lies strictly within the radius."""
        return np.abs(np.take_along_axis(ordered, np.clip(index, 0, n - 1), axis=1) - centre) < radius

    # c - r and c + r are rounded: move each bound onto the exact test |s - c| < r (all rows at once)
    for _ in range(3):
        lo_before, hi_before = lo, hi
        lo = lo + ((lo < n) & ~near(lo) & (lo < hi))
        lo = lo - ((lo > 0) & near(lo - 1))
        hi = hi - ((hi > lo) & ~near(hi - 1))
        hi = hi + ((hi < n) & near(hi))
        if np.array_equal(lo, lo_before) and np.array_equal(hi, hi_before):
            break  # a fixed point: the remaining passes would change nothing
    return hi - lo


def _estimate(columns: SortedColumns, labels: np.ndarray, n_neighbors: int) -> np.ndarray:
    """The estimator of :func:`mutual_info_columns` on sorted columns whose every label is held by
    at least two rows. Each row's sorted entries are grouped by label with a stable sort, so a
    label's block is that row's entries of the label sorted, ties in row order as a sort of the
    label's rows alone would leave them."""
    n = columns.rows.shape[1]
    by_label = np.argsort(labels[columns.order], axis=1, kind="stable")  # (L, n): blocks of one label each
    grouped = np.take_along_axis(columns.ordered, by_label, axis=1)
    where = np.take_along_axis(columns.order, by_label, axis=1)
    radius = np.empty_like(columns.rows)
    k_all = np.empty(n)
    label_counts = np.empty(n)
    start = 0
    for label, count in zip(*np.unique(labels, return_counts=True)):
        k = min(n_neighbors, int(count) - 1)
        block = slice(start, start + int(count))
        np.put_along_axis(radius, where[:, block], _kth_gap(grouped[:, block], k), axis=1)
        rows = labels == label
        k_all[rows] = k
        label_counts[rows] = count
        start += int(count)
    m_all = np.ascontiguousarray(_count_within(columns, radius).T)  # (n, L): the mean below sums as before
    mi = digamma(n) + np.mean(digamma(k_all)) - np.mean(digamma(label_counts)) - np.mean(digamma(m_all), axis=0)
    return np.maximum(0.0, mi)


def mutual_info_columns(
    columns: np.ndarray, labels: np.ndarray, n_neighbors: int = 3, *, sorted_columns: SortedColumns | None = None
) -> np.ndarray:
    """Mutual information (nats) of each continuous column with discrete ``labels``: the kNN
    estimator of Ross (2014), as scikit-learn's ``mutual_info_classif`` computes it per feature
    (its ``_compute_mi_cd``: within each label the distance to the ``min(n_neighbors, count - 1)``-th
    neighbour; the count of all points strictly closer; digamma terms; clipped at 0; labels
    held by one point left out), on columns already prepared (:func:`jittered_columns`).

    All columns at once: in one dimension a point's neighbours are its sorted neighbours, so
    one sort per column replaces scikit-learn's KD-tree per column and label, whose set-up
    dominates at a few thousand rows (the same numbers, tested against scikit-learn).
    ``sorted_columns`` (:func:`sort_columns` of ``columns``) saves the sort when several label
    sets are scored on the same columns; it is used when no label is left out.
    """
    x = np.asarray(columns, dtype=np.float64)
    y = np.asarray(labels).ravel()
    keep_labels, counts = np.unique(y, return_counts=True)
    keep = np.isin(y, keep_labels[counts > 1])
    if sorted_columns is None or not keep.all():
        sorted_columns = sort_columns(x[keep])
    return _estimate(sorted_columns, y[keep], n_neighbors)
