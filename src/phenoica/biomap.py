"""From profiles to a map of biology: guide and gene profiles, gene-gene similarity, nearest
neighbours, guide consistency and known-relationship recall (the EFAAR protocol).

- **Aggregation** (:func:`aggregate_profiles`): a guide's profile is the mean of its rows (the
  profile table's images or wells), a gene's the mean of its guides' profiles. Optionally each
  batch is first centred on the mean of its own control rows. Streamed in row batches.
- **The map** (:func:`map_genes`): the genes called active by the hit calls (gene q-value below
  the threshold, ``phenoica.hits``) by default, or all perturbed genes.
- **Similarity** is the cosine between unit-normalized profiles, computed in row blocks of
  ``block_rows`` genes against all genes, so memory holds one (block x genes) slab, never the
  (genes x genes) matrix: :func:`nearest_neighbors` (top k per gene, with the neighbour's
  q-value) and the null counts of :func:`relationship_recall` both stream over the blocks.
- **Recall** (:func:`relationship_recall`, EFAAR's ``known_relationship_benchmark``): the null
  is every pairwise cosine between the map's genes (upper triangle); an annotated pair is
  recalled at (lo, hi) when its cosine's rank in the null puts it at or below the lo quantile
  or at or above the hi one (EFAAR's ``compute_recall``, ranks counted exactly, block by
  block). A source sharing fewer than ``min_entities`` genes with the map is skipped with the
  counts recorded. Expected recall under no structure: ``lo + 1 - hi``.
- **Consistency** (:func:`guide_consistency`, EFAAR's perturbation consistency): the mean
  pairwise cosine between a gene's guide profiles, against a null of the same statistic over
  sets of as many guides drawn from different genes; ``p = (1 + #null >= x) / (1 + n_null)``.
  A gene with one guide gets no score, with the reason recorded.

Every random draw takes its seed from ``phenoica.seeding.derive_seed``.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from scipy import sparse

from phenoica.annotations import complex_pairs
from phenoica.arrays import check_matrix
from phenoica.profiles import DEFAULT_BATCH_ROWS, ProfileSource, batch_features, split_columns
from phenoica.screen import BATCH, CONTROL, GENE, GUIDE, PERT_TYPE, PERTURBATION, ScreenError, feature_columns
from phenoica.seeding import derive_seed
from phenoica.variants.rows import column_values

LOG = logging.getLogger(__name__)

BLOCK_ROWS = 1024
#: Cosines closer than this are ties when ranking a query in the null (float32 rounding).
TIE_TOLERANCE = 1e-6
#: EFAAR's recall thresholds (lower, upper quantile of the null).
RECALL_THRESHOLDS: tuple[tuple[float, float], ...] = ((0.05, 0.95), (0.1, 0.9))
GENE_SELECTIONS: tuple[str, ...] = ("active", "all")
RECALL_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    "source",
    "n_map_genes",
    "n_entities",
    "n_pairs",
    "n_null_pairs",
    "lower",
    "upper",
    "recall",
    "recall_lo",
    "recall_hi",
    "recall_expected",
    "status",
    "reason",
)
COVERAGE_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    "source",
    "n_source_pairs",
    "n_source_genes",
    "n_screen_genes",
    "n_screen_genes_known",
    "n_map_genes",
    "n_map_genes_known",
    "n_map_pairs",
)
NEIGHBOR_COLUMNS: tuple[str, ...] = ("model", "variant", GENE, "rank", "neighbor", "cosine", "neighbor_q_value")
CONSISTENCY_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    GENE,
    "n_guides",
    "consistency",
    "p_value",
    "n_null",
    "reason",
)


# --------------------------------------------------------------------------- aggregation


class _GroupSums:
    """Running per-key sums and row counts of feature rows (keys seen in any order); memory
    holds one (keys x features) float64 array, grown as keys appear."""

    def __init__(self, n_features: int) -> None:
        self.index: dict[tuple[str, ...], int] = {}
        self.sums = np.zeros((0, n_features))
        self.counts = np.zeros(0, dtype=np.int64)
        self.n_features = n_features

    def add(self, keys: Sequence[tuple[str, ...]], X: np.ndarray) -> None:
        codes = np.fromiter((self.index.setdefault(k, len(self.index)) for k in keys), dtype=np.int64, count=len(keys))
        n = len(self.index)
        if n > self.sums.shape[0]:
            grown = max(n, 2 * self.sums.shape[0])
            self.sums = np.vstack([self.sums, np.zeros((grown - self.sums.shape[0], self.n_features))])
            self.counts = np.concatenate([self.counts, np.zeros(grown - self.counts.size, dtype=np.int64)])
        present, local = np.unique(codes, return_inverse=True)  # only the keys of this block
        onehot = sparse.csr_matrix(
            (np.ones(len(codes)), (local, np.arange(len(codes)))), shape=(present.size, len(codes))
        )
        self.sums[present] += np.asarray(onehot @ X.astype(np.float64, copy=False))
        self.counts[present] += np.bincount(local, minlength=present.size)

    def result(self) -> tuple[list[tuple[str, ...]], np.ndarray, np.ndarray]:
        n = len(self.index)
        keys = sorted(self.index, key=self.index.__getitem__)
        return keys, self.sums[:n], self.counts[:n]


def _strings(batch: pa.RecordBatch, name: str) -> np.ndarray:
    return np.asarray(column_values(batch, name)).astype(str)


def control_means(src: ProfileSource, features: Sequence[str]) -> dict[str, np.ndarray]:
    """The mean profile of each batch's control rows (one pass); a batch without controls is an
    error naming it."""
    sums = _GroupSums(len(features))
    seen: set[str] = set()
    for batch in src.batches([*features, BATCH, PERT_TYPE]):
        b = _strings(batch, BATCH)
        seen.update(np.unique(b).tolist())
        ctrl = _strings(batch, PERT_TYPE) == CONTROL
        if ctrl.any():
            sums.add([(x,) for x in b[ctrl]], batch_features(batch, features)[ctrl])
    keys, total, counts = sums.result()
    means = {k[0]: total[i] / counts[i] for i, k in enumerate(keys)}
    missing = sorted(seen - set(means))
    if missing:
        raise ScreenError(
            f"{src.label}: batch(es) {missing[:5]} have no control rows ({PERT_TYPE} == {CONTROL!r}); "
            f"centring on controls needs them (or set biomap.center_on_controls: false)"
        )
    return means


def aggregate_profiles(
    profiles: pd.DataFrame | Path | str,
    center_on_controls: bool = True,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    log: logging.Logger | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(guide profiles, gene profiles) of a profile table, streamed in row batches.

    Guide rows: ``Metadata_Gene``, ``Metadata_Guide``, ``Metadata_PertType``,
    ``Metadata_NRows`` (rows averaged) and the float32 features (mean of the guide's rows, after
    subtracting each batch's control mean when ``center_on_controls``). Gene rows: the same
    without the guide, ``Metadata_NGuides`` and the mean of the gene's guide profiles.
    """
    log = log or LOG
    src = ProfileSource(profiles, batch_rows, label=None if not isinstance(profiles, pd.DataFrame) else "profiles")
    missing = [c for c in (GENE, GUIDE, PERT_TYPE, *((BATCH,) if center_on_controls else ())) if c not in src.columns]
    if missing:
        raise ScreenError(f"{src.label}: missing column(s) {missing}; expected the data contract's metadata")
    features = split_columns(src.columns)[1]
    if not features:
        raise ScreenError(f"{src.label}: no feature columns")
    centres = control_means(src, features) if center_on_controls else {}
    sums = _GroupSums(len(features))
    read = [*features, GENE, GUIDE, PERT_TYPE, *((BATCH,) if center_on_controls else ())]
    n_rows = 0
    for batch in src.batches(read):
        X = batch_features(batch, features).astype(np.float64)
        X = check_matrix(X, src.label, len(features), features)
        if center_on_controls:
            b = _strings(batch, BATCH)
            for name in np.unique(b):
                X[b == name] -= centres[name]
        keys = list(zip(_strings(batch, GENE), _strings(batch, GUIDE), _strings(batch, PERT_TYPE)))
        sums.add(keys, X)
        n_rows += batch.num_rows
        log.info("aggregate: %d of %d rows", n_rows, src.num_rows)
    keys, total, counts = sums.result()
    meta = pd.DataFrame(keys, columns=[GENE, GUIDE, PERT_TYPE])
    twice = meta[meta.duplicated([GENE, GUIDE], keep=False)]
    if len(twice):
        raise ScreenError(
            f"{src.label}: guide {twice[GUIDE].iloc[0]!r} of gene {twice[GENE].iloc[0]!r} is listed both "
            f"as {sorted(set(twice[PERT_TYPE]))}; a guide has one {PERT_TYPE}"
        )
    meta["Metadata_NRows"] = counts
    guide_values = (total / counts[:, None]).astype(np.float32)
    guides = pd.concat([meta, pd.DataFrame(guide_values, columns=features)], axis=1)
    guides = guides.sort_values([GENE, GUIDE], kind="stable").reset_index(drop=True)
    grouped = guides.groupby([GENE, PERT_TYPE], sort=True)
    gene_meta = grouped.agg(Metadata_NGuides=(GUIDE, "nunique"), Metadata_NRows=("Metadata_NRows", "sum")).reset_index()
    gene_values = grouped[features].mean().reset_index(drop=True).astype(np.float32)
    genes = pd.concat([gene_meta, gene_values], axis=1)
    return guides, genes


# --------------------------------------------------------------------------- the map


def unit_rows(X: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32); a zero row stays zero (its cosines are 0)."""
    X = np.asarray(X, dtype=np.float32)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return np.divide(X, norms, out=np.zeros_like(X), where=norms > 0)


def map_genes(
    genes: pd.DataFrame, calls: pd.DataFrame | None, selection: str = "active"
) -> tuple[pd.DataFrame, np.ndarray, str]:
    """(the map's gene profiles, their gene q-values, a note on how they were chosen).

    ``selection`` ``active``: the perturbed genes whose gene call is a hit (``calls``: the
    (model, variant)'s rows of the gene calls, ``Metadata_Gene``, ``q_value``, ``hit``);
    ``all``: every perturbed gene. Without calls (no null pseudo-guides) ``active`` falls back
    to all genes, and the note says so.
    """
    if selection not in GENE_SELECTIONS:
        raise ValueError(f"biomap.genes: expected one of {list(GENE_SELECTIONS)}, got {selection!r}")
    perturbed = genes[genes[PERT_TYPE] == PERTURBATION].reset_index(drop=True)
    q = np.full(len(perturbed), np.nan)
    hit = np.zeros(len(perturbed), dtype=bool)
    have_calls = bool(
        calls is not None
        and len(calls)
        and "q_value" in calls.columns
        and np.isfinite(calls["q_value"].to_numpy(float)).any()
    )
    if have_calls:
        by_gene = calls.drop_duplicates(GENE).set_index(GENE)  # type: ignore[union-attr]
        q = perturbed[GENE].map(by_gene["q_value"]).astype(float).to_numpy()
        hit = perturbed[GENE].map(by_gene["hit"]).fillna(False).astype(bool).to_numpy()
    if selection == "all":
        return perturbed, q, f"all {len(perturbed)} perturbed genes"
    if not have_calls:
        return perturbed, q, f"no hit calls (classify.n_null_guides = 0?): all {len(perturbed)} perturbed genes"
    note = f"{int(hit.sum())} of {len(perturbed)} perturbed genes called active (gene q below the threshold)"
    return perturbed[hit].reset_index(drop=True), q[hit], note


def similarity_blocks(X: np.ndarray, block_rows: int = BLOCK_ROWS) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, cosine similarities of rows [first, first + block) against all rows) for
    unit-normalized ``X``, one (block x n) float32 slab at a time."""
    n = X.shape[0]
    for start in range(0, n, block_rows):
        yield start, X[start : start + block_rows] @ X.T


def similarity_matrix(X: np.ndarray) -> np.ndarray:
    """The full cosine matrix of the rows of ``X`` (for small maps: the heatmap)."""
    U = unit_rows(X)
    return np.clip(U @ U.T, -1.0, 1.0)


def nearest_neighbors(
    X: np.ndarray, names: Sequence[str], q_values: Sequence[float], k: int, block_rows: int = BLOCK_ROWS
) -> pd.DataFrame:
    """Top ``k`` genes by cosine for every gene (itself excluded): gene, rank (1 = nearest),
    neighbour, cosine, the neighbour's q-value. Blocked over rows."""
    names = np.asarray(names, dtype=object)
    q = np.asarray(q_values, dtype=float)
    n = len(names)
    k = min(int(k), n - 1)
    if k < 1:
        return pd.DataFrame({c: [] for c in NEIGHBOR_COLUMNS if c not in ("model", "variant")})
    U = unit_rows(X)
    parts = []
    for start, S in similarity_blocks(U, block_rows):
        rows = np.arange(start, start + S.shape[0])
        S[np.arange(S.shape[0]), rows] = -np.inf
        top = np.argpartition(-S, k - 1, axis=1)[:, :k]
        vals = np.take_along_axis(S, top, axis=1)
        order = np.argsort(-vals, axis=1, kind="stable")
        top, vals = np.take_along_axis(top, order, axis=1), np.take_along_axis(vals, order, axis=1)
        parts.append(
            pd.DataFrame(
                {
                    GENE: np.repeat(names[rows], k),
                    "rank": np.tile(np.arange(1, k + 1), len(rows)),
                    "neighbor": names[top.ravel()],
                    "cosine": np.clip(vals.ravel(), -1, 1).astype(np.float64),
                    "neighbor_q_value": q[top.ravel()],
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def guide_neighbors(guides: pd.DataFrame, genes: set[str], k: int, block_rows: int = BLOCK_ROWS) -> pd.DataFrame:
    """The guide-level map: top ``k`` guides by cosine for every guide of the map's ``genes``
    (among those guides), with each guide's and neighbour's gene and ``same_gene``."""
    sel = guides[(guides[PERT_TYPE] == PERTURBATION) & guides[GENE].astype(str).isin(genes)].reset_index(drop=True)
    cols = [GUIDE, GENE, "rank", "neighbor", "neighbor_gene", "cosine", "same_gene"]
    if len(sel) < 2:
        return pd.DataFrame({c: [] for c in cols})
    names = sel[GUIDE].astype(str).to_numpy()
    gene_of = dict(zip(names, sel[GENE].astype(str)))
    nn = (
        nearest_neighbors(
            sel[feature_columns(sel)].to_numpy(np.float32), names, np.full(len(sel), np.nan), k, block_rows
        )
        .rename(columns={GENE: GUIDE})
        .drop(columns="neighbor_q_value")
    )
    nn[GENE] = nn[GUIDE].map(gene_of)
    nn["neighbor_gene"] = nn["neighbor"].map(gene_of)
    nn["same_gene"] = nn[GENE] == nn["neighbor_gene"]
    return nn[cols]


# --------------------------------------------------------------------------- recall


def pair_cosines(U: np.ndarray, index: Mapping[str, int], pairs: pd.DataFrame) -> np.ndarray:
    """Cosines of annotated pairs (``entity1``, ``entity2``, both in ``index``) of unit rows ``U``."""
    i = pairs["entity1"].map(index).to_numpy(np.int64)
    j = pairs["entity2"].map(index).to_numpy(np.int64)
    return np.einsum("ij,ij->i", U[i], U[j]).astype(np.float64)


def null_rank_counts(
    U: np.ndarray, queries: np.ndarray, block_rows: int = BLOCK_ROWS, log: logging.Logger | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """For each query cosine: (#null <= x, #null < x, null size), where the null is every
    pairwise cosine of the rows of unit ``U`` (upper triangle); computed block by block (each
    block's values sorted and searched), never holding the null."""
    log = log or LOG
    n = U.shape[0]
    le = np.zeros(queries.size, dtype=np.int64)
    lt = np.zeros(queries.size, dtype=np.int64)
    size = 0
    # A query is itself one of the null's values, computed by another float32 product: values
    # within TIE_TOLERANCE of it count as equal to it (EFAAR takes both from one matrix).
    q_hi = (queries + TIE_TOLERANCE).astype(np.float32)
    q_lo = (queries - TIE_TOLERANCE).astype(np.float32)
    for start, S in similarity_blocks(U, block_rows):
        m = S.shape[0]
        upper = np.arange(n)[None, :] > np.arange(start, start + m)[:, None]
        values = np.sort(S[upper])
        size += values.size
        le += np.searchsorted(values, q_hi, side="right")
        lt += np.searchsorted(values, q_lo, side="left")
        if n > 4 * block_rows:
            log.info("recall null: rows %d-%d of %d", start, start + m, n)
    return le, lt, size


def _wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return math.nan, math.nan
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def relationship_recall(
    X: np.ndarray,
    names: Sequence[str],
    sources: Mapping[str, pd.DataFrame],
    *,
    screen_genes: Sequence[str] | None = None,
    thresholds: Sequence[Sequence[float]] = RECALL_THRESHOLDS,
    min_entities: int = 20,
    block_rows: int = BLOCK_ROWS,
    log: logging.Logger | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(recall, coverage) of every annotation source against the map ``X`` (genes ``names``).

    Recall rows (:data:`RECALL_COLUMNS` less model/variant): one per (source, threshold pair);
    ``status`` ``ok`` or ``skipped`` (``reason`` gives the counts: too few of the source's
    genes in the map, or no annotated pair in it). ``recall_lo``/``recall_hi``: a 95% Wilson
    interval over the annotated pairs (pairs share genes, so it is optimistic). Coverage rows:
    how many of the screen's (``screen_genes``) and the map's genes each source knows.
    """
    log = log or LOG
    names = [str(x) for x in names]
    index = {g: i for i, g in enumerate(names)}
    if len(index) != len(names):
        raise ScreenError("biomap: duplicate gene names in the map")
    screen = set(screen_genes) if screen_genes is not None else set(names)
    U = unit_rows(X)
    in_map: dict[str, pd.DataFrame] = {}
    coverage = []
    for source, pairs in sources.items():
        known = set(pairs["entity1"]) | set(pairs["entity2"])
        mine = pairs[pairs["entity1"].isin(index) & pairs["entity2"].isin(index)]
        in_map[source] = mine
        coverage.append(
            {
                "source": source,
                "n_source_pairs": len(pairs),
                "n_source_genes": len(known),
                "n_screen_genes": len(screen),
                "n_screen_genes_known": len(screen & known),
                "n_map_genes": len(names),
                "n_map_genes_known": len(set(names) & known),
                "n_map_pairs": len(mine),
            }
        )
    runnable = {}
    skipped = {}
    for row in coverage:
        source = row["source"]
        if row["n_map_genes_known"] < min_entities:
            skipped[source] = (
                f"{row['n_map_genes_known']} of the map's {len(names)} genes are in {source} "
                f"(fewer than biomap.min_entities = {min_entities})"
            )
        elif row["n_map_pairs"] == 0:
            skipped[source] = f"no pair of {source} has both genes in the map ({row['n_map_genes_known']} genes known)"
        else:
            runnable[source] = pair_cosines(U, index, in_map[source])
    for source, why in skipped.items():
        log.warning("recall: %s skipped: %s", source, why)
    counts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    n_null = len(names) * (len(names) - 1) // 2
    if runnable:
        allq = np.concatenate(list(runnable.values()))
        le, lt, n_null = null_rank_counts(U, allq, block_rows, log)
        at = 0
        for source, qv in runnable.items():
            counts[source] = (le[at : at + qv.size], lt[at : at + qv.size])
            at += qv.size
    rows = []
    for cov in coverage:
        source = cov["source"]
        n_entities = len(set(in_map[source]["entity1"]) | set(in_map[source]["entity2"]))
        for pair in thresholds:
            lo, hi = float(min(pair)), float(max(pair))
            row: dict[str, Any] = {
                "source": source,
                "n_map_genes": len(names),
                "n_entities": n_entities,
                "n_pairs": cov["n_map_pairs"],
                "n_null_pairs": n_null,
                "lower": lo,
                "upper": hi,
                "recall": math.nan,
                "recall_lo": math.nan,
                "recall_hi": math.nan,
                "recall_expected": lo + 1.0 - hi,
                "status": "skipped",
                "reason": skipped.get(source, ""),
            }
            if source in counts:
                c_le, c_lt = counts[source]
                hit = (c_le / n_null <= lo) | (c_lt / n_null >= hi)
                k = int(hit.sum())
                row.update(recall=k / hit.size, status="ok", reason="")
                row["recall_lo"], row["recall_hi"] = _wilson(k, hit.size)
            rows.append(row)
    recall = pd.DataFrame(rows, columns=[c for c in RECALL_COLUMNS if c not in ("model", "variant")])
    coverage_df = pd.DataFrame(coverage, columns=[c for c in COVERAGE_COLUMNS if c not in ("model", "variant")])
    return recall, coverage_df


# --------------------------------------------------------------------------- consistency


def _mean_pairwise(U: np.ndarray) -> np.ndarray:
    """Mean pairwise cosine within each set: U is (sets, k, features) of unit rows."""
    k = U.shape[1]
    total = np.einsum("skf,slf->s", U, U)  # sum over all ordered pairs incl. self (= |sum|^2)
    return (total - k) / (k * (k - 1))


def guide_consistency(
    guides: pd.DataFrame,
    *,
    seed: int,
    model: str = "",
    variant: str = "",
    null_size: int = 5000,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """Do a gene's guides agree? Per perturbed gene: the mean pairwise cosine of its guide
    profiles, and its p-value against ``null_size`` sets of as many guides, each from a
    different gene (seeded ``derive_seed(seed, "consistency", model, variant, k)``). A gene
    with one guide gets NaN and the reason; so does every gene when fewer genes than guides
    per set exist to draw a null from."""
    log = log or LOG
    pert = guides[guides[PERT_TYPE] == PERTURBATION].reset_index(drop=True)
    features = feature_columns(pert)
    U = unit_rows(pert[features].to_numpy(np.float32))
    gene_codes, gene_names = pd.factorize(pert[GENE].astype(str), sort=True)
    members = [np.flatnonzero(gene_codes == g) for g in range(len(gene_names))]
    rng_cache: dict[int, np.ndarray] = {}

    def null_for(k: int) -> np.ndarray:
        if k not in rng_cache:
            rng = np.random.default_rng(derive_seed(seed, "consistency", model, variant, k))
            n_genes = len(members)
            picks = np.empty((null_size, k), dtype=np.int64)
            for s in range(null_size):
                genes = rng.choice(n_genes, k, replace=False)
                picks[s] = [members[g][rng.integers(members[g].size)] for g in genes]
            rng_cache[k] = np.sort(_mean_pairwise(U[picks]))
        return rng_cache[k]

    rows = []
    for g, name in enumerate(gene_names):
        idx = members[g]
        row: dict[str, Any] = {
            "model": model,
            "variant": variant,
            GENE: name,
            "n_guides": int(idx.size),
            "consistency": math.nan,
            "p_value": math.nan,
            "n_null": 0,
            "reason": "",
        }
        if idx.size < 2:
            row["reason"] = "one guide: no pair of guides to compare"
        elif len(members) < idx.size:
            row["reason"] = f"the null draws {idx.size} guides from different genes; only {len(members)} genes"
        else:
            value = float(_mean_pairwise(U[idx][None])[0])
            null = null_for(int(idx.size))
            row.update(
                consistency=value,
                n_null=null.size,
                p_value=(1 + null.size - np.searchsorted(null, value, side="left")) / (null.size + 1),
            )
        rows.append(row)
    out = pd.DataFrame(rows, columns=list(CONSISTENCY_COLUMNS))
    n_single = int((out["n_guides"] < 2).sum())
    if n_single:
        log.warning("consistency %s/%s: %d gene(s) with one guide get no score", model, variant, n_single)
    return out


# --------------------------------------------------------------------------- one (model, variant)


TRUTH_SOURCE = "simulated_complexes"


def truth_complexes(truth: pd.DataFrame) -> dict[str, list[str]]:
    """The demo's simulated complexes (complex -> genes) from its truth table's ``complex`` column."""
    if "complex" not in truth.columns:
        raise ScreenError("truth table: no 'complex' column (written by phenoica.simulate.gene_truth since issue 15)")
    named = truth[truth["complex"].fillna("").astype(str) != ""]
    return {str(c): sorted(set(g[GENE].astype(str))) for c, g in named.groupby("complex")}


def gene_map(
    guides: pd.DataFrame,
    genes: pd.DataFrame,
    calls: pd.DataFrame | None,
    sources: Mapping[str, pd.DataFrame],
    cfg: Mapping[str, Any],
    *,
    seed: int,
    model: str,
    variant: str,
    truth: pd.DataFrame | None = None,
    log: logging.Logger | None = None,
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame, np.ndarray, str]:
    """Everything of one (model, variant)'s map: tables ``neighbors``, ``guide_neighbors``,
    ``consistency``, ``recall``, ``coverage`` (each with model and variant columns), and the map's gene profiles,
    their q-values and the note on how its genes were chosen.

    ``calls``: the gene calls of this (model, variant); ``sources``: annotation pairs by name
    (``phenoica.annotations.load_sources``); ``truth`` (the demo's): its simulated complexes are
    one more source, :data:`TRUTH_SOURCE`. ``cfg`` is ``config["biomap"]``.
    """
    log = log or LOG
    chosen, q, note = map_genes(genes, calls, cfg["genes"])
    log.info("map %s/%s: %s", model, variant, note)
    features = feature_columns(chosen)
    X = chosen[features].to_numpy(np.float32)
    names = chosen[GENE].astype(str).tolist()
    all_sources = dict(sources)
    if truth is not None:
        all_sources[TRUTH_SOURCE] = complex_pairs(truth_complexes(truth))
    screen = genes.loc[genes[PERT_TYPE] == PERTURBATION, GENE].astype(str).tolist()
    block = int(cfg.get("block_rows", BLOCK_ROWS))
    tables: dict[str, pd.DataFrame] = {}
    if len(names) >= 2:
        tables["neighbors"] = nearest_neighbors(X, names, q, int(cfg["n_neighbors"]), block)
    else:
        log.warning("map %s/%s: %d gene(s) in the map; no neighbours", model, variant, len(names))
        tables["neighbors"] = pd.DataFrame({c: [] for c in NEIGHBOR_COLUMNS if c not in ("model", "variant")})
    recall, coverage = relationship_recall(
        X,
        names,
        all_sources,
        screen_genes=screen,
        thresholds=[tuple(t) for t in cfg["recall_thresholds"]],
        min_entities=int(cfg["min_entities"]),
        block_rows=block,
        log=log,
    )
    tables["recall"], tables["coverage"] = recall, coverage
    tables["guide_neighbors"] = guide_neighbors(guides, set(names), int(cfg["n_neighbors"]), block)
    tables["consistency"] = guide_consistency(
        guides, seed=seed, model=model, variant=variant, null_size=int(cfg["consistency_null_size"]), log=log
    )
    for name in ("neighbors", "guide_neighbors", "recall", "coverage"):
        df = tables[name]
        df.insert(0, "variant", variant)
        df.insert(0, "model", model)
    for row in recall.itertuples():
        if row.status == "ok":
            log.info(
                "recall %s/%s %s at %.2f/%.2f: %.3f of %d pairs (expected %.2f)",
                model,
                variant,
                row.source,
                row.lower,
                row.upper,
                row.recall,
                row.n_pairs,
                row.recall_expected,
            )
    return tables, chosen, q, note
