"""Replicate retrieval across batches: the field's measure of batch correction.

Arevalo et al. (2024, Nature Communications 15:6516) judge a batch correction on JUMP by how well
a perturbation's profiles find each other *across* batches: each profile ranks the profiles of
the other batches by similarity, and the average precision of its own perturbation's profiles in
that ranking is high when the correction has brought replicates together and low when the
profiles still sort by batch. phenoica computes it on the mAP readout's well profiles and centre
(:func:`phenoica.classify.well_profiles`, each plate taken from its control wells' centre,
:func:`phenoica.classify.centered_on_plate_controls`), with copairs:

- queries and candidates are the non-control wells (control wells are the centre, not a
  construct to retrieve);
- a well's positives are the wells of its own guide in another batch; its negatives are the
  wells of other guides in another batch (copairs ``pos_diffby`` / ``neg_diffby`` on the batch);
  similarity is cosine;
- a guide's retrieval is the mean average precision of its wells; the screen's is the mean over
  guides, with a seeded percentile bootstrap interval over guides.

Where a screen has one batch, the same measure is taken across its plates (replicate plates, or
the image sets of one plate map); where it has one plate too, there is nothing to retrieve
across and the table says why (:func:`retrieval_axis`).
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np
import pandas as pd

from phenoica.classify._map_readout import centered_on_plate_controls, well_profiles
from phenoica.contract import BATCH, CONTROL, GENE, GUIDE, PERT_TYPE, PLATE, feature_columns
from phenoica.utils import derive_seed, keyed_uniforms, name_hashes

LOG = logging.getLogger(__name__)

#: Columns of a per-guide retrieval table.
RETRIEVAL_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    GENE,
    GUIDE,
    "across",
    "n_wells",
    "n_queries",
    "retrieval",
)

#: Bootstrap resamples of the guides for a retrieval interval.
BOOTSTRAP = 2000
#: Most wells of one construct ranked: an arrayed screen's 4-5 replicate plates in 2-4 batches
#: hold 4 to 20 wells a construct; a screen of many more replicate plates is sampled to this many,
#: spread over its batches, so that the pairs (the square of the wells) do not grow with the plates.
WELLS_PER_GUIDE = 16

_KEY, _GROUP = "Metadata_RetrievalKey", "Metadata_RetrievalGroup"


def retrieval_axis(wells: pd.DataFrame) -> tuple[str | None, str]:
    """What replicates are retrieved across: ``(column, reason)``. The batch where the wells span
    two or more, else the plate where they span two or more (one batch's replicate plates or
    image sets), else ``(None, why not)``."""
    for column in (BATCH, PLATE):
        if column in wells.columns and wells[column].astype(str).nunique() >= 2:
            return column, ""
    return None, "one batch and one plate: no replicate lies in another batch or plate to retrieve"


def sampled_guides(keys: np.ndarray, max_guides: int, seed: int) -> np.ndarray:
    """Which rows' guides (``keys``: one name per row) are ranked: all where there are at most
    ``max_guides``, else the ``max_guides`` whose names get the smallest keyed numbers
    (:func:`phenoica.utils.keyed_uniforms`): the same guides for every variant, and a guide removed
    from the screen changes only its own place in the sample."""
    names = np.unique(keys)
    if names.size <= max_guides:
        return np.ones(keys.size, dtype=bool)
    kept = names[_guide_order(names, seed)[:max_guides]]
    return np.isin(keys, kept)


def _guide_order(names: np.ndarray, seed: int) -> np.ndarray:
    """The guides' names in the order a consistent sample takes them (smallest keyed number first)."""
    return np.argsort(keyed_uniforms(name_hashes(names.tolist()), seed, "retrieval"), kind="stable")


def sampled_wells(keys: np.ndarray, groups: np.ndarray, wells: np.ndarray, max_wells: int, seed: int) -> np.ndarray:
    """Which rows (one well each: its guide ``keys``, its batch or plate ``groups`` and a name
    ``wells`` unique within the guide) are ranked, so that at most ``max_wells`` are: each guide
    keeps at most :data:`WELLS_PER_GUIDE` of its wells (by keyed numbers of their names, taken in
    turn from each of its groups, so they stay spread over the batches), and guides are taken in
    their consistent order (:func:`sampled_guides`) while their wells fit; all where they do.
    The same wells for every variant."""
    take = np.ones(keys.size, dtype=bool)
    frame = pd.DataFrame(
        {"key": keys, "group": groups, "draw": keyed_uniforms(name_hashes(wells.tolist()), seed, "wells")}
    )
    many = frame.groupby("key")["key"].transform("size").to_numpy() > WELLS_PER_GUIDE
    if many.any():
        turn = frame.sort_values("draw", kind="stable").groupby(["key", "group"]).cumcount()
        order = frame.assign(turn=turn.reindex(frame.index)).sort_values(["key", "turn", "draw"], kind="stable")
        first = order.groupby("key").cumcount() < WELLS_PER_GUIDE
        take = first.reindex(frame.index).to_numpy() | ~many
    if take.sum() <= max_wells:
        return take
    names = np.unique(keys)
    counts = pd.Series(keys[take]).value_counts().reindex(names).to_numpy()
    ordered = _guide_order(names, seed)
    fits = np.cumsum(counts[ordered]) <= max_wells
    return take & np.isin(keys, names[ordered[fits]])


def guide_retrieval(
    table: pd.DataFrame, *, max_guides: int, max_wells: int, model: str = "", variant: str = "", seed: int = 0
) -> pd.DataFrame:
    """Per guide, the mean average precision with which its wells find each other across batches
    (or plates: :func:`retrieval_axis`); :data:`RETRIEVAL_COLUMNS`. A guide whose wells all sit
    in one batch gets no query (it is left out). At most ``max_guides`` guides and ``max_wells``
    wells are ranked, among each other (:func:`sampled_guides`, :func:`sampled_wells`, seeded by
    ``seed``): the pairs grow with the square of the wells. An empty table when nothing can be
    retrieved."""
    from copairs.map import average_precision

    wells = well_profiles(table).reset_index(drop=True)
    across, _ = retrieval_axis(wells)
    empty = pd.DataFrame({c: [] for c in RETRIEVAL_COLUMNS})
    if across is None:
        return empty
    features = feature_columns(wells)
    is_control = (wells[PERT_TYPE].astype(str) == CONTROL).to_numpy()
    X = centered_on_plate_controls(
        wells[features].to_numpy(np.float64), wells[PLATE].astype(str).to_numpy(), is_control
    )[~is_control]
    columns = list(dict.fromkeys([GENE, GUIDE, across, PLATE]))  # across may be the plate
    guides = wells.loc[~is_control, columns].astype(str).reset_index(drop=True)
    meta = pd.DataFrame(
        {_KEY: guides[GENE] + "\x1f" + guides[GUIDE], _GROUP: guides[across], GENE: guides[GENE], GUIDE: guides[GUIDE]}
    )
    keys = meta[_KEY].to_numpy()
    names = guides[PLATE] + "\x1f" + meta.groupby([_KEY, guides[PLATE]]).cumcount().astype(str)  # a well's name
    ranked = sampled_guides(keys, max_guides, seed)
    ranked[ranked] = sampled_wells(
        keys[ranked], meta[_GROUP].to_numpy()[ranked], (meta[_KEY] + "\x1f" + names).to_numpy()[ranked], max_wells, seed
    )
    meta, X = meta[ranked].reset_index(drop=True), X[ranked]
    if meta.empty:
        return empty
    ap = average_precision(meta, X, [_KEY], [_GROUP], [], [_KEY, _GROUP], distance="cosine", progress_bar=False)
    ap = ap[np.isfinite(ap["average_precision"].to_numpy(dtype=float)) & (ap["n_pos_pairs"] > 0)]
    n_wells = meta.groupby([GENE, GUIDE]).size().rename("n_wells")
    out = (
        ap.groupby([GENE, GUIDE])["average_precision"]
        .agg(["mean", "size"])
        .rename(columns={"mean": "retrieval", "size": "n_queries"})
        .join(n_wells)
        .reset_index()
    )
    out["model"], out["variant"], out["across"] = model, variant, across
    out["n_wells"] = out["n_wells"].astype(np.int64)
    out["n_queries"] = out["n_queries"].astype(np.int64)
    return out[list(RETRIEVAL_COLUMNS)].sort_values([GENE, GUIDE]).reset_index(drop=True)


class Retrieval(NamedTuple):
    """A screen's replicate retrieval: the mean over guides and its bootstrap interval."""

    mean: float
    low: float
    high: float
    n_guides: int


def mean_retrieval(per_guide: pd.DataFrame, seed: int, level: float = 0.95) -> Retrieval:
    """The mean of ``per_guide``'s ``retrieval`` over guides, with a percentile bootstrap interval
    over guides (:data:`BOOTSTRAP` resamples, seeded); NaNs without guides."""
    values = per_guide["retrieval"].to_numpy(np.float64)
    if values.size == 0:
        return Retrieval(float("nan"), float("nan"), float("nan"), 0)
    rng = np.random.default_rng(derive_seed(seed, "retrieval_bootstrap"))
    means = values[rng.integers(0, values.size, (BOOTSTRAP, values.size))].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return Retrieval(float(values.mean()), float(low), float(high), int(values.size))


def retrieval_difference(
    first: pd.DataFrame, second: pd.DataFrame, seed: int, level: float = 0.95
) -> tuple[float, float, float, int]:
    """``first`` minus ``second`` (two per-guide tables): the mean paired difference over the
    guides both score, with a percentile bootstrap interval over those guides."""
    both = first.merge(second, on=[GENE, GUIDE], suffixes=("_a", "_b"))
    diff = (both["retrieval_a"] - both["retrieval_b"]).to_numpy(np.float64)
    r = mean_retrieval(pd.DataFrame({"retrieval": diff}), seed, level)
    return r.mean, r.low, r.high, r.n_guides
