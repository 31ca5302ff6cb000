"""Per-guide classification against the shared controls (PAPER.md, Tables 3, 4 and 6).

For every (guide, fold) a LightGBM binary classifier separates the guide's samples (label 1)
from the shared control set (label 0: every ``Metadata_PertType == "control"`` row that is not
an empirical-null pseudo-guide). It trains on the fold's training rows and is scored on the
fold's held-out rows (held-out samples of the guide + held-out controls): AUROC, sparsity of
its split counts, and concentration (retrained on the top ``concentration_k`` fraction of
features by split count and on the rest).

Shared work. The controls dominate every training set (tens of thousands of rows against a
guide's handful), so everything about them is done once per fold or block, not per guide:

1. bin boundaries are found once per fold and feature, on the fold's training controls
   (``FoldBins``); a guide's score therefore does not depend on which other guides share its
   table or shard;
2. the training controls and the training rows of a block of guides (``GUIDES_PER_BLOCK``) are
   binned once (``GuideBlock``), one LightGBM Dataset per feature column, and merged into one
   all-feature Dataset;
3. a guide's training set is a row subset of that (``Dataset.subset``: a copy of binned rows,
   no re-binning); the concentration models' column subsets are merged from the per-feature
   Datasets (``Dataset.add_features_from``: a copy of binned columns) and then row-subset.

So the per-guide cost is training the three models, not building their datasets; the result
is identical to building each guide's datasets from raw floats with the same bin boundaries
(tested).

A feature constant across a fold's training controls gets a single bin and is never split on
in that fold (bins come from the controls); for continuous embeddings this does not occur.

Empirical null (PAPER.md, practical notes): ``null_guides`` relabels seeded draws of control
samples as pseudo-guides (gene ``"null"``, guides ``null_01``...; flagged in the
``Metadata_NullGuide`` column). They leave the control set and are scored exactly like real
guides. ``classify_shard`` applies it itself (deterministic, so every shard removes the same
control rows) and scores the pseudo-guides in shard 0 only; calling ``null_guides`` once
before sharding is equivalent (it is idempotent for the same ``n``).

Constant feature columns (one value over the whole table) are dropped with a logged warning
naming them; sparsity's D counts the remaining features. Non-finite feature values raise.
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import tempfile
import time
import warnings
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import jsonschema
import lightgbm as lgb
import numpy as np
import pandas as pd

from phenoica import metrics
from phenoica.config import deep_merge, load_schema
from phenoica.profiles import nonfinite_columns
from phenoica.screen import (
    BATCH,
    CONTROL,
    GENE,
    GUIDE,
    PERT_TYPE,
    PERTURBATION,
    ScreenError,
    feature_columns,
    metadata_columns,
    validate_profile_metadata,
)

NULL_FLAG = "Metadata_NullGuide"
NULL_GENE = "null"
OK = "ok"
SKIPPED = "skipped"

SCORE_COLUMNS: tuple[str, ...] = (
    "model", "variant", GENE, GUIDE, "is_null_guide", "fold",
    "n_train_pos", "n_train_neg", "n_test_pos", "n_test_neg",
    "auroc", "sparsity", "concentration", "auroc_top", "auroc_rest",
    "status", "reason",
)
_INT_COLUMNS = ("n_train_pos", "n_train_neg", "n_test_pos", "n_test_neg")
_FLOAT_COLUMNS = ("auroc", "sparsity", "concentration", "auroc_top", "auroc_rest")
GUIDE_SUMMARY_COLUMNS: tuple[str, ...] = (
    "model", "variant", GENE, GUIDE, "is_null_guide", "n_folds_ok", "auroc", "sparsity", "concentration",
)
GENE_SUMMARY_COLUMNS: tuple[str, ...] = ("model", "variant", GENE, "n_guides", "auroc", "sparsity", "concentration")
MAP_COLUMNS: tuple[str, ...] = (
    "model", "variant", GENE, GUIDE, "is_null_guide", "mean_average_precision", "p_value", "below_p",
)

# LightGBM keys phenoica sets itself and a user may not override through classify.lightgbm.
_RESERVED = {
    "num_iterations": "set classify.num_boost_round instead",
    "seed": "every seed derives from the workflow seed",
}


# ----------------------------------------------------------------------------- configuration


@functools.lru_cache(maxsize=1)
def _schema_defaults() -> dict[str, Any]:
    props = load_schema()["properties"]["classify"]["properties"]
    out = {k: v["default"] for k, v in props.items() if "default" in v and k != "lightgbm"}
    out["lightgbm"] = {k: v["default"] for k, v in props["lightgbm"]["properties"].items() if "default" in v}
    return out


@functools.lru_cache(maxsize=1)
def _classify_schema() -> dict[str, Any]:
    return load_schema()["properties"]["classify"]


def resolve_classify_config(cfg_classify: Mapping[str, Any] | None) -> dict[str, Any]:
    """``cfg_classify`` (config["classify"], possibly partial) with the schema's defaults filled in.

    Raises ValueError naming the key when a value breaks the schema.
    """
    merged = deep_merge(copy.deepcopy(_schema_defaults()), dict(cfg_classify or {}))
    errors = sorted(jsonschema.Draft202012Validator(_classify_schema()).iter_errors(merged), key=lambda e: list(e.path))
    if errors:
        err = errors[0]
        where = ".".join(str(p) for p in err.absolute_path) or "(section)"
        raise ValueError(f"config key classify.{where}: {err.message}")
    return merged


@functools.lru_cache(maxsize=1)
def _lightgbm_aliases() -> dict[str, str] | None:
    """alias -> canonical name of every LightGBM parameter, or None if LightGBM does not say.

    LightGBM publishes the table through its C API (``LGBM_DumpParamAliases``); the Python
    package reads it in ``lightgbm.basic._ConfigAliases``. Without it no key is checked.
    """
    try:
        from lightgbm.basic import _ConfigAliases

        table = _ConfigAliases._get_all_param_aliases()
    except (ImportError, AttributeError):  # pragma: no cover - depends on the LightGBM build
        return None
    return {alias: canon for canon, names in table.items() for alias in names}


def lightgbm_params(cfg_classify: Mapping[str, Any] | None, seed: int) -> dict[str, Any]:
    """LightGBM parameters: PAPER.md Table 6 (schema defaults) merged with classify.lightgbm.

    Keys are checked against LightGBM's own parameter names and aliases and returned under
    their canonical names (``reg_alpha`` -> ``lambda_l1``). Two keys naming the same parameter
    with different values are an error, unless one of them is a schema default left untouched
    (then the other, explicitly set, wins). Adds ``objective=binary``, ``seed``,
    ``deterministic=True`` and ``force_col_wise=True`` (unless row-wise was asked for), so a
    fixed seed gives identical models. ``num_iterations`` and ``seed`` may not be set here.
    """
    cfg = resolve_classify_config(cfg_classify)
    given = dict(cfg["lightgbm"])
    defaults = _schema_defaults()["lightgbm"]
    aliases = _lightgbm_aliases()
    groups: dict[str, list[str]] = {}
    for key in given:
        if aliases is None:
            canon = key
        elif key in aliases:
            canon = aliases[key]
        else:
            raise ValueError(
                f"config key classify.lightgbm.{key}: not a LightGBM {lgb.__version__} parameter or alias"
            )
        if canon in _RESERVED:
            raise ValueError(f"config key classify.lightgbm.{key}: may not be set here; {_RESERVED[canon]}")
        groups.setdefault(canon, []).append(key)
    params: dict[str, Any] = {}
    for canon, keys in groups.items():
        values = {k: given[k] for k in keys}
        if len(set(map(repr, values.values()))) > 1:
            explicit = [k for k in keys if not (k in defaults and given[k] == defaults[k])]
            if len(explicit) != 1:
                raise ValueError(
                    f"config keys classify.lightgbm.{' and '.join(keys)} all set LightGBM parameter "
                    f"{canon} with different values {values}; keep one"
                )
            params[canon] = given[explicit[0]]
        else:
            params[canon] = given[keys[0]]
    objective = params.get("objective", "binary")
    if objective not in ("binary", "cross_entropy", "xentropy"):
        raise ValueError(f"config key classify.lightgbm.objective: must be a binary objective, got {objective!r}")
    params["objective"] = objective
    params["seed"] = int(seed)
    params.setdefault("deterministic", True)
    if not params.get("force_row_wise"):
        params.setdefault("force_col_wise", True)
    params.setdefault("verbosity", -1)
    return params


def _guide_seed(seed: int, gene: str, guide: str, fold: str) -> int:
    """A seed for one (guide, fold) model: independent of order, shard and the other guides."""
    key = zlib.crc32(f"{gene}\x1f{guide}\x1f{fold}".encode())
    return int(np.random.SeedSequence([int(seed), key]).generate_state(1)[0] & 0x7FFFFFFF)


# ----------------------------------------------------------------------------- table helpers


def _null_flag(table: pd.DataFrame) -> np.ndarray:
    if NULL_FLAG not in table.columns:
        return np.zeros(len(table), dtype=bool)
    return table[NULL_FLAG].fillna(False).astype(bool).to_numpy()


def control_mask(table: pd.DataFrame) -> np.ndarray:
    """Rows of the shared control set: PertType control, not an empirical-null pseudo-guide."""
    return (table[PERT_TYPE].astype(str).to_numpy() == CONTROL) & ~_null_flag(table)


def feature_matrix(
    table: pd.DataFrame, source: str = "table", log: logging.Logger | None = None
) -> tuple[np.ndarray, list[str]]:
    """The table's feature columns as a float array, constant columns dropped (logged).

    Raises ValueError naming the columns that are non-numeric or hold non-finite values.
    """
    log = log or logging.getLogger(__name__)
    names = feature_columns(table)
    if not names:
        raise ScreenError(f"{source}: no feature columns (every column is Metadata_*)")
    bad = [c for c in names if not pd.api.types.is_numeric_dtype(table[c]) or pd.api.types.is_bool_dtype(table[c])]
    if bad:
        raise ValueError(f"{source}: feature column(s) {bad[:10]} are not numeric")
    dtype = np.float32 if all(table[c].dtype == np.float32 for c in names) else np.float64
    X = table[names].to_numpy(dtype=dtype)
    cols = nonfinite_columns(X, names)
    if cols:
        row = int(np.flatnonzero(~np.isfinite(X).all(axis=1))[0])
        raise ValueError(
            f"{source}: non-finite values (NaN/inf) in feature column(s) {cols[:10]}"
            f"{' ...' if len(cols) > 10 else ''} ({len(cols)} in all; first at row {row})"
        )
    if len(X):
        constant = (X.max(axis=0) == X.min(axis=0))
        if constant.any():
            dropped = [names[j] for j in np.flatnonzero(constant)]
            log.warning(
                "%s: dropping %d constant feature column(s) %s%s (no classifier can use them)",
                source, len(dropped), dropped[:10], " ..." if len(dropped) > 10 else "",
            )
            keep = np.flatnonzero(~constant)
            X = np.ascontiguousarray(X[:, keep])
            names = [names[j] for j in keep]
    return X, names


def guides_of(
    table: pd.DataFrame, genes: Iterable[str] | None = None, include_null: bool = True
) -> list[tuple[str, str]]:
    """(gene, guide) pairs of the table's perturbations (of ``genes`` if given), then its null
    pseudo-guides (if ``include_null``), each group sorted."""
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
    pairs = table.loc[pert, [GENE, GUIDE]].astype(str).drop_duplicates()
    if genes is not None:
        pairs = pairs[pairs[GENE].isin(list(genes))]
    out = sorted(map(tuple, pairs.to_numpy().tolist()))
    if include_null:
        flag = _null_flag(table)
        nulls = table.loc[flag, [GENE, GUIDE]].astype(str).drop_duplicates()
        out += sorted(map(tuple, nulls.to_numpy().tolist()))
    return out  # type: ignore[return-value]


def null_guides(table: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """The table with ``n`` empirical-null pseudo-guides carved out of its controls.

    In each batch that holds perturbations, ``n`` disjoint sets of control rows are drawn
    (seeded) of the median size of a guide in that batch, so every held-out batch has samples of
    every pseudo-guide. Chosen rows get gene ``"null"``, guide ``null_01``... and
    ``Metadata_NullGuide = True`` (a new column, False elsewhere); their PertType stays
    ``control``, but they leave the shared control set (``control_mask``). At most half of a
    batch's controls are used. Idempotent: a table that already holds exactly ``n`` pseudo-guides
    is returned unchanged. ``n = 0`` returns the table unchanged.
    """
    if n < 0:
        raise ValueError(f"null_guides: n must be >= 0, got {n}")
    if NULL_FLAG in table.columns and _null_flag(table).any():
        have = table.loc[_null_flag(table), GUIDE].nunique()
        if have != n:
            raise ValueError(f"null_guides: table already holds {have} null pseudo-guides, asked for {n}")
        return table
    if n == 0:
        return table
    for col in (GENE, GUIDE, PERT_TYPE, BATCH):
        if col not in table.columns:
            raise ScreenError(f"null_guides: missing required column {col}")
    if (table[GENE].astype(str) == NULL_GENE).any():
        raise ScreenError(f"null_guides: column {GENE} already uses the name {NULL_GENE!r} reserved for pseudo-guides")
    ptype = table[PERT_TYPE].astype(str).to_numpy()
    batch = table[BATCH].astype(str).to_numpy()
    pert = ptype == PERTURBATION
    if not pert.any():
        raise ValueError("null_guides: the table has no perturbations to size pseudo-guides on")
    counts = (
        table.loc[pert, [BATCH, GENE, GUIDE]].astype(str).value_counts().rename("n").reset_index()
    )
    sizes = counts.groupby(BATCH)["n"].median()
    rng = np.random.default_rng(seed)
    width = max(2, len(str(n)))
    gene = table[GENE].astype(str).to_numpy(dtype=object).copy()
    guide = table[GUIDE].astype(str).to_numpy(dtype=object).copy()
    flag = np.zeros(len(table), dtype=bool)
    for b in sorted(sizes.index):
        size = max(1, int(round(float(sizes[b]))))
        pool = np.flatnonzero((batch == b) & (ptype == CONTROL))
        if n * size > len(pool) // 2:
            raise ValueError(
                f"null_guides: batch {b!r} has {len(pool)} controls; {n} pseudo-guides of {size} samples "
                f"would take more than half of them (lower classify.n_null_guides)"
            )
        chosen = rng.permutation(pool)[: n * size].reshape(n, size)
        for j in range(n):
            gene[chosen[j]] = NULL_GENE
            guide[chosen[j]] = f"null_{j + 1:0{width}d}"
            flag[chosen[j]] = True
    out = table.copy()
    out[GENE] = gene
    out[GUIDE] = guide
    out[NULL_FLAG] = flag
    return out


def shard_genes(genes: Sequence[str], n_shards: int) -> list[list[str]]:
    """Deterministic balanced partition of genes: sorted unique genes dealt round-robin.

    Every gene lands in exactly one of ``n_shards`` lists (sizes differ by at most one; some
    are empty when there are fewer genes than shards).
    """
    if n_shards < 1:
        raise ValueError(f"shard_genes: n_shards must be >= 1, got {n_shards}")
    shards: list[list[str]] = [[] for _ in range(n_shards)]
    for i, gene in enumerate(sorted(set(map(str, genes)))):
        shards[i % n_shards].append(gene)
    return shards


# ----------------------------------------------------------------------------- folds


def _fold_arrays(folds: Sequence[Any], n_rows: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, train mask, test mask) per fold; checks indices and disjointness."""
    out, seen = [], set()
    for i, fold in enumerate(folds):
        for attr in ("name", "train", "test"):
            if not hasattr(fold, attr):
                raise ValueError(f"fold {i}: has no attribute {attr!r}; expected a phenoica.splits.Fold")
        name = str(fold.name)
        if name in seen:
            raise ValueError(f"fold {name!r} appears twice")
        seen.add(name)
        masks = []
        for part in ("train", "test"):
            idx = np.asarray(getattr(fold, part))
            if idx.size and idx.dtype.kind not in "iu":
                raise ValueError(f"fold {name!r}: {part} indices must be integers, got dtype {idx.dtype}")
            idx = idx.astype(np.int64).ravel()
            if idx.size and (idx.min() < 0 or idx.max() >= n_rows):
                raise ValueError(f"fold {name!r}: {part} indices out of range for a table of {n_rows} rows")
            mask = np.zeros(n_rows, dtype=bool)
            mask[idx] = True
            masks.append(mask)
        overlap = masks[0] & masks[1]
        if overlap.any():
            raise ValueError(
                f"fold {name!r}: {int(overlap.sum())} row(s) in both train and test "
                f"(first: row {int(np.flatnonzero(overlap)[0])})"
            )
        out.append((name, masks[0], masks[1]))
    return out


GUIDES_PER_BLOCK = 64


@dataclass
class FoldBins:
    """What every guide of one fold shares: bin boundaries and the held-out controls.

    ``bins[j]`` is a constructed one-feature ``lightgbm.Dataset`` of the fold's training
    controls: it fixes feature ``j``'s bin boundaries for every guide of the fold.
    ``X_test_controls`` are the held-out controls' raw features.
    """

    bins: list[lgb.Dataset]
    X: np.ndarray
    train_controls: np.ndarray
    X_test_controls: np.ndarray
    params: dict[str, Any]

    @classmethod
    def build(
        cls, X: np.ndarray, train_controls: np.ndarray, test_controls: np.ndarray, params: Mapping[str, Any]
    ) -> "FoldBins":
        """Find each feature's bin boundaries on ``X[train_controls]``."""
        params = dict(params)
        bins = [
            lgb.Dataset(X[train_controls, j : j + 1], feature_name=[f"f{j:04d}"], params=params).construct()
            for j in range(X.shape[1])
        ]
        return cls(bins, X, np.asarray(train_controls, dtype=np.int64), X[test_controls], params)

    def block(self, train_guide_rows: np.ndarray) -> "GuideBlock":
        """Bin the training controls plus ``train_guide_rows`` (a block of guides) once."""
        rows = np.concatenate([self.train_controls, np.asarray(train_guide_rows, dtype=np.int64)])
        label = np.concatenate([np.zeros(len(self.train_controls)), np.ones(len(train_guide_rows))])
        columns = [
            lgb.Dataset(
                self.X[rows, j : j + 1], label=label, reference=ref, feature_name=ref.feature_name,
                params=self.params,
            ).construct()
            for j, ref in enumerate(self.bins)
        ]
        local = np.full(len(self.X), -1, dtype=np.int64)
        local[rows] = np.arange(len(rows))
        block = GuideBlock(columns, columns[0], len(self.train_controls), local)
        block.dataset = block.merge(range(len(columns)))
        return block


@dataclass
class GuideBlock:
    """Binned training rows of one fold for a block of guides.

    ``columns[j]`` is feature ``j`` as a one-feature Dataset over the fold's training controls
    (first ``n_controls`` rows, label 0) and the block's guides' training rows (label 1),
    binned with the fold's ``FoldBins``; ``dataset`` is all features merged; ``local`` maps a
    table row to its row in them (-1 when absent). Blocks keep the per-guide copying
    proportional to the controls, however many guides a shard holds.
    """

    columns: list[lgb.Dataset]
    dataset: lgb.Dataset
    n_controls: int
    local: np.ndarray

    def merge(self, features: Iterable[int]) -> lgb.Dataset:
        """The given feature columns as one Dataset over all block rows (bins copied, not redone)."""
        features = [int(f) for f in features]
        merged = self.columns[features[0]].subset(list(range(self.columns[0].num_data()))).construct()
        with warnings.catch_warnings():
            # LightGBM warns that raw data was freed and categorical features reset: both intended
            warnings.simplefilter("ignore", UserWarning)
            for f in features[1:]:
                merged.add_features_from(self.columns[f])
        return merged

    def guide_dataset(self, train_positions: np.ndarray, features: np.ndarray | None = None) -> lgb.Dataset:
        """The training set of one guide: all training controls + its rows, already binned.

        ``features`` (sorted column indices) restricts it to those columns; None = all.
        """
        loc = self.local[train_positions]
        if (loc < 0).any():
            raise ValueError("GuideBlock.guide_dataset: some rows were not binned in this block")
        source = self.dataset if features is None else self.merge(features)
        return source.subset(np.concatenate([np.arange(self.n_controls), loc]).astype(np.int32))


@dataclass(frozen=True)
class GuideScore:
    """Held-out scores of one (guide, fold)."""

    auroc: float
    sparsity: float
    concentration: float
    auroc_top: float
    auroc_rest: float


def score_guide(
    dataset_for: Callable[[np.ndarray | None], lgb.Dataset], X_test: np.ndarray, y_test: np.ndarray,
    params: Mapping[str, Any], num_boost_round: int, concentration_k: float,
) -> GuideScore:
    """Train the full model and the top-/rest-feature models; score each on the test rows.

    ``dataset_for(features)`` returns the guide's training Dataset restricted to the sorted
    column indices ``features`` (None = all columns); ``X_test`` holds all columns. Sparsity
    comes from the full model's split fractions; the top features are the top
    ``concentration_k`` fraction by its split counts, the rest are the others; both are
    retrained from scratch with the same parameters and rounds. Raises ValueError when the full
    model makes no split (fractions undefined).
    """
    full = lgb.train(dict(params), dataset_for(None), num_boost_round=num_boost_round)
    counts = full.feature_importance(importance_type="split")
    auc = metrics.auroc(y_test, full.predict(X_test))
    c = metrics.split_fractions(counts, full.num_feature())
    top, rest = metrics.top_features(counts, concentration_k)
    aucs = []
    for subset in (top, rest):
        booster = lgb.train(dict(params), dataset_for(subset), num_boost_round=num_boost_round)
        aucs.append(metrics.auroc(y_test, booster.predict(X_test[:, subset])))
    return GuideScore(auc, metrics.sparsity(c), metrics.concentration(aucs[0], aucs[1]), aucs[0], aucs[1])


# ----------------------------------------------------------------------------- classification


def _empty_scores() -> pd.DataFrame:
    return _typed_scores(pd.DataFrame({c: [] for c in SCORE_COLUMNS}))


def _typed_scores(df: pd.DataFrame) -> pd.DataFrame:
    df = df[list(SCORE_COLUMNS)].copy()
    for c in ("model", "variant", GENE, GUIDE, "fold", "status", "reason"):
        df[c] = df[c].astype(object).astype(str) if len(df) else pd.Series([], dtype=object)
    df["is_null_guide"] = df["is_null_guide"].astype(bool)
    for c in _INT_COLUMNS:
        df[c] = df[c].astype(np.int64)
    for c in _FLOAT_COLUMNS:
        df[c] = df[c].astype(np.float64)
    return df.reset_index(drop=True)


def _skip_reasons(
    n_train_pos: int, n_train_neg: int, n_test_pos: int, n_test_neg: int, cfg: Mapping[str, Any]
) -> list[str]:
    """Why a (guide, fold) cannot be scored; empty when it can."""
    reasons = []
    lo_train, lo_test = int(cfg["min_train_samples"]), int(cfg["min_test_samples"])
    if n_train_pos < lo_train:
        reasons.append(f"too few training samples ({n_train_pos} < {lo_train})")
    if n_train_neg == 0:
        reasons.append("training rows have no controls")
    elif n_train_neg < lo_train:
        reasons.append(f"too few training controls ({n_train_neg} < {lo_train})")
    if n_test_pos == 0:
        reasons.append("held-out fold has no samples of this guide")
    elif n_test_pos < lo_test:
        reasons.append(f"too few held-out samples ({n_test_pos} < {lo_test})")
    if n_test_neg == 0:
        reasons.append("held-out fold has no controls")
    return reasons


def classify_guides(
    table: pd.DataFrame,
    guides: list[tuple[str, str]] | None,
    folds: Sequence[Any],
    cfg_classify: Mapping[str, Any] | None,
    seed: int,
    variant: str,
    model: str = "",
    log: logging.Logger | None = None,
    *,
    block_size: int = GUIDES_PER_BLOCK,
) -> pd.DataFrame:
    """Score each (guide, fold): one row per pair with exactly ``SCORE_COLUMNS``.

    ``guides`` are (gene, guide) pairs (None = every perturbation guide, then every null
    pseudo-guide in the table). ``folds`` carry positional ``train``/``test`` row indices.
    Pairs that cannot be scored get status ``skipped`` with the reason and NaN scores; nothing
    is dropped silently. Results are deterministic for a fixed ``seed`` and independent of
    which other guides are scored alongside. ``block_size`` guides share one binned block of
    training rows (a memory/speed trade-off only; results do not depend on it).
    """
    log = log or logging.getLogger(__name__)
    if block_size < 1:
        raise ValueError(f"classify_guides: block_size must be >= 1, got {block_size}")
    cfg = resolve_classify_config(cfg_classify)
    source = f"classification table ({model or 'model'}/{variant})"
    validate_profile_metadata(table, source=source)
    X, _names = feature_matrix(table, source, log)
    table_guides = guides_of(table)
    if guides is None:
        guides = table_guides
    guides = [(str(g), str(s)) for g, s in guides]
    known = set(table_guides)
    missing = [g for g in guides if g not in known]
    if missing:
        raise ValueError(f"{source}: requested guide(s) {missing[:5]} are not perturbation or null guides of the table")
    if len(set(guides)) != len(guides):
        raise ValueError(f"{source}: the guide list has duplicates")
    fold_arrays = _fold_arrays(folds, len(table))
    if not guides or not fold_arrays:
        return _empty_scores()
    if X.shape[1] < 2:
        raise ValueError(f"{source}: needs at least 2 non-constant feature columns, has {X.shape[1]}")

    params = lightgbm_params(cfg, seed)
    rounds, k = int(cfg["num_boost_round"]), float(cfg["concentration_k"])
    is_control = control_mask(table)
    null_flag = _null_flag(table)
    keys = table[GENE].astype(str) + "\x1f" + table[GUIDE].astype(str)
    positions = {key: np.asarray(idx, dtype=np.int64) for key, idx in keys.groupby(keys, sort=False).indices.items()}
    guide_rows = [positions[f"{g}\x1f{s}"] for g, s in guides]
    # a guide's rows: its perturbation rows, or its pseudo-guide rows; never shared controls
    guide_rows = [r[~is_control[r]] for r in guide_rows]
    guide_null = [bool(null_flag[r].any()) for r in guide_rows]

    rows: list[dict[str, Any]] = []
    for f_i, (fold_name, train, test) in enumerate(fold_arrays):
        t0, done = time.perf_counter(), 0
        train_ctrl = np.flatnonzero(train & is_control)
        test_ctrl = np.flatnonzero(test & is_control)
        plans = []
        for (gene, guide), r, is_null in zip(guides, guide_rows, guide_null):
            tr, te = r[train[r]], r[test[r]]
            reasons = _skip_reasons(len(tr), len(train_ctrl), len(te), len(test_ctrl), cfg)
            plans.append((gene, guide, is_null, tr, te, reasons))
        to_train = [p for p in plans if not p[5]]
        fold_bins = None
        if to_train:
            fold_bins = FoldBins.build(X, train_ctrl, test_ctrl, params)
            log.info(
                "fold %s (%d/%d): bins of %d features on %d training controls in %.1fs; %d guide(s) to score",
                fold_name, f_i + 1, len(fold_arrays), X.shape[1], len(train_ctrl), time.perf_counter() - t0,
                len(to_train),
            )
        every = max(1, min(50, len(to_train) // 10))
        block, block_of = None, {}
        for start in range(0, len(to_train), block_size):
            for p in to_train[start : start + block_size]:
                block_of[(p[0], p[1])] = start
        current = -1
        for gene, guide, is_null, tr, te, reasons in plans:
            row: dict[str, Any] = {
                "model": model, "variant": variant, GENE: gene, GUIDE: guide, "is_null_guide": is_null,
                "fold": fold_name, "n_train_pos": len(tr), "n_train_neg": len(train_ctrl),
                "n_test_pos": len(te), "n_test_neg": len(test_ctrl),
                **{c: math.nan for c in _FLOAT_COLUMNS}, "status": SKIPPED, "reason": "; ".join(reasons),
            }
            if not reasons:
                assert fold_bins is not None
                start = block_of[(gene, guide)]
                if start != current:
                    members = to_train[start : start + block_size]
                    block = fold_bins.block(np.concatenate([p[3] for p in members]))
                    current = start
                assert block is not None
                X_test = np.concatenate([fold_bins.X_test_controls, X[te]])
                y_test = np.concatenate([np.zeros(len(test_ctrl)), np.ones(len(te))])
                guide_params = dict(params, seed=_guide_seed(seed, gene, guide, fold_name))
                try:
                    score = score_guide(
                        functools.partial(block.guide_dataset, tr), X_test, y_test, guide_params, rounds, k
                    )
                except ValueError as exc:
                    row["reason"] = f"classifier could not be scored: {exc}"
                else:
                    row.update(vars(score), status=OK, reason="")
                done += 1
                if done % every == 0 or done == len(to_train):
                    dt = time.perf_counter() - t0
                    log.info(
                        "fold %s (%d/%d): %d/%d guides scored, %.2f guides/s",
                        fold_name, f_i + 1, len(fold_arrays), done, len(to_train), done / max(dt, 1e-9),
                    )
            rows.append(row)
        n_skip = len(plans) - len(to_train)
        if n_skip:
            log.info("fold %s: %d guide(s) skipped (reasons in the score table)", fold_name, n_skip)
        del fold_bins, block
    out = _typed_scores(pd.DataFrame(rows))
    order = {g: i for i, g in enumerate(guides)}
    fold_order = {name: i for i, (name, _, _) in enumerate(fold_arrays)}
    sort_key = [order[(g, s)] * len(fold_order) + fold_order[f] for g, s, f in zip(out[GENE], out[GUIDE], out["fold"])]
    return out.iloc[np.argsort(sort_key, kind="stable")].reset_index(drop=True)


def classify_shard(
    table: pd.DataFrame,
    shard: int,
    n_shards: int,
    folds: Sequence[Any],
    cfg_classify: Mapping[str, Any] | None,
    seed: int,
    variant: str,
    model: str = "",
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """Classify every guide of shard ``shard`` (of ``n_shards``) of the table's perturbed genes.

    Applies ``null_guides(table, classify.n_null_guides, seed)`` first (the same draw in every
    shard, so all shards share one control set); shard 0 also scores the pseudo-guides.
    Folds index the table's rows, which ``null_guides`` leaves in place.
    """
    if not 0 <= shard < n_shards:
        raise ValueError(f"classify_shard: shard {shard} is not in 0..{n_shards - 1}")
    cfg = resolve_classify_config(cfg_classify)
    table = null_guides(table, int(cfg["n_null_guides"]), seed)
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
    genes = shard_genes(table.loc[pert, GENE].astype(str).unique().tolist(), n_shards)[shard]
    guides = guides_of(table, genes, include_null=(shard == 0))
    (log or logging.getLogger(__name__)).info(
        "shard %d/%d of %s/%s: %d gene(s), %d guide(s)", shard + 1, n_shards, model or "model", variant,
        len(genes), len(guides),
    )
    return classify_guides(table, guides, folds, cfg, seed, variant, model, log)


# ----------------------------------------------------------------------------- summaries


def summarize_scores(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Guide-level and gene-level means of the ``ok`` (guide, fold) rows.

    Guide level: ``GUIDE_SUMMARY_COLUMNS``; n_folds_ok and the mean of auroc, sparsity and
    concentration over the guide's ok folds (NaN when none). Gene level (real guides only,
    null pseudo-guides excluded): ``GENE_SUMMARY_COLUMNS``; n_guides = guides with at least one
    ok fold, and means pooled over all ok (guide, fold) rows of the gene.
    """
    missing = [c for c in SCORE_COLUMNS if c not in rows.columns]
    if missing:
        raise ValueError(f"summarize_scores: score table lacks column(s) {missing}")
    keys = ["model", "variant", GENE, GUIDE, "is_null_guide"]
    vals = ["auroc", "sparsity", "concentration"]
    rows = rows.copy()
    ok = rows["status"] == OK
    rows["_ok"] = ok.astype(np.int64)
    for v in vals:
        rows[v] = rows[v].where(ok)
    guide = rows.groupby(keys, sort=True, dropna=False).agg(
        n_folds_ok=("_ok", "sum"), **{v: (v, "mean") for v in vals}
    ).reset_index()
    guide["n_folds_ok"] = guide["n_folds_ok"].astype(np.int64)
    guide = guide[list(GUIDE_SUMMARY_COLUMNS)]
    real = rows[~rows["is_null_guide"].astype(bool)]
    gkeys = ["model", "variant", GENE]
    gene = real.groupby(gkeys, sort=True, dropna=False).agg(**{v: (v, "mean") for v in vals}).reset_index()
    scored = real[real["_ok"] == 1].groupby(gkeys)[GUIDE].nunique().rename("n_guides")
    gene = gene.merge(scored.reset_index(), on=gkeys, how="left")
    gene["n_guides"] = gene["n_guides"].fillna(0).astype(np.int64)
    return guide.reset_index(drop=True), gene[list(GENE_SUMMARY_COLUMNS)].reset_index(drop=True)


# ----------------------------------------------------------------------------- mAP readout


def guide_map(
    table: pd.DataFrame,
    variant: str,
    model: str,
    seed: int,
    null_size: int = 1000,
    threshold: float = 0.05,
    cache_dir: str | None = None,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """Phenotypic activity per guide: copairs mean average precision of the guide vs controls.

    Each guide sample ranks all other samples of its guide (positives) among the shared control
    samples (negatives) by cosine similarity; mAP averages its samples' AP. p-values come from
    copairs' permutation null (``null_size`` draws, ``seed``), Benjamini-Hochberg corrected
    over the guides: ``p_value`` is the corrected one and ``below_p`` is ``p_value < threshold``.
    Null pseudo-guides (if the table holds them) are scored like guides. A guide with a single
    sample has no positive pair: it gets NaN and below_p False (logged). copairs caches null
    distributions on disk: in ``cache_dir`` if given, else in a temporary folder removed after.
    Cost grows as (guide samples) x (controls); run it per shard for genome-wide screens.
    """
    from copairs.map import average_precision, mean_average_precision

    log = log or logging.getLogger(__name__)
    source = f"mAP table ({model or 'model'}/{variant})"
    validate_profile_metadata(table, source=source)
    X, _ = feature_matrix(table, source, log)
    is_control = control_mask(table)
    if not is_control.any():
        raise ScreenError(f"{source}: no control rows ({PERT_TYPE} == {CONTROL!r}) to compare guides against")
    null_flag = _null_flag(table)
    group_col, ref_col = "Metadata_MapGroup", "Metadata_MapReference"
    gene = table[GENE].astype(str).to_numpy()
    guide = table[GUIDE].astype(str).to_numpy()
    group = np.where(is_control, "\x1econtrols", np.char.add(np.char.add(gene.astype(str), "\x1f"), guide.astype(str)))
    meta = pd.DataFrame({
        group_col: group,
        ref_col: np.where(is_control, np.arange(len(table)), -1),
    })
    pairs = pd.DataFrame({GENE: gene[~is_control], GUIDE: guide[~is_control],
                          "is_null_guide": null_flag[~is_control], group_col: group[~is_control]})
    pairs = pairs.drop_duplicates(group_col).sort_values([ "is_null_guide", GENE, GUIDE]).reset_index(drop=True)
    if pairs.empty:
        return pd.DataFrame({c: [] for c in MAP_COLUMNS})
    # Positives: same guide (controls each get their own reference, so none pair up).
    # Negatives: a guide sample vs a control (guides share reference -1, controls share a group).
    ap = average_precision(
        meta, X.astype(np.float64, copy=False), pos_sameby=[group_col, ref_col], pos_diffby=[],
        neg_sameby=[], neg_diffby=[group_col, ref_col], distance="cosine", progress_bar=False,
    )
    ap = ap[ap[group_col] != "\x1econtrols"]
    with tempfile.TemporaryDirectory(prefix="phenoica-copairs-") as tmp:
        result = mean_average_precision(
            ap, sameby=[group_col], null_size=null_size, threshold=threshold, seed=seed,
            progress_bar=False, max_workers=1, cache_dir=cache_dir or tmp,
        )
    result = result[[group_col, "mean_average_precision", "corrected_p_value"]]
    out = pairs.merge(result, on=group_col, how="left")
    unscored = out["mean_average_precision"].isna()
    if unscored.any():
        log.warning(
            "%s: %d guide(s) have no positive pair (single sample) and get no mAP: %s",
            source, int(unscored.sum()), out.loc[unscored, GUIDE].tolist()[:10],
        )
    out = out.rename(columns={"corrected_p_value": "p_value"})
    out["p_value"] = out["p_value"].astype(np.float64)
    out["mean_average_precision"] = out["mean_average_precision"].astype(np.float64)
    out["below_p"] = (out["p_value"] < threshold).fillna(False).astype(bool)
    out["model"], out["variant"] = model, variant
    out["is_null_guide"] = out["is_null_guide"].astype(bool)
    return out[list(MAP_COLUMNS)].reset_index(drop=True)
