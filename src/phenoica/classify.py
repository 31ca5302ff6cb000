"""Per-guide classification against the shared controls (Nelson et al. 2026, Tables 3, 4 and 6).

For every (guide, fold) a LightGBM binary classifier separates the guide's samples (label 1)
from the shared control set (label 0: every ``Metadata_PertType == "control"`` row). It trains on
the fold's training rows and is scored on the fold's held-out rows (held-out samples of the
guide + held-out controls): AUROC, sparsity of its split counts and, when ``classify.concentration``
is on, concentration (retrained on the top ``concentration_k`` fraction of features by split
count and on the rest: two more models per guide).

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

So the per-guide cost is training its models, not building their datasets; the result is
identical to building each guide's datasets from raw floats with the same bin boundaries
(tested).

A feature constant across a fold's training controls gets a single bin and is never split on
in that fold (bins come from the controls); for continuous embeddings this does not occur.

The empirical null (``null_guide_design``): pseudo-guides made of whole control wells, laid out
like real guides (wells per plate and batch copied from a randomly drawn real guide), scored by
the same classifier. A pseudo-guide's wells leave the control set only for its own classifier
(training and held-out negatives); every real guide trains against the full control set.
Pseudo-guides need only their AUROC (``phenoica.hits`` turns the null into p-values), so they
never train the concentration models. Pseudo-guide ``j`` is scored in shard ``j % n_shards``.

Bins are found on all training controls, a pseudo-guide's own wells included (a few wells of
the fold's control set); everything else a pseudo-guide sees is what a real guide sees.

Constant feature columns (one value over the whole table) are dropped with a logged warning
naming them; sparsity's D counts the remaining features. Non-finite feature values raise.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import lightgbm as lgb
import numpy as np
import pandas as pd

from phenoica import metrics
from phenoica.arrays import check_finite
from phenoica.config import resolve_section
from phenoica.contract import OK, SKIPPED
from phenoica.profiles import aggregate_wells
from phenoica.screen import (
    BATCH,
    CONTROL,
    GENE,
    GUIDE,
    PERT_TYPE,
    PERTURBATION,
    PLATE,
    WELL,
    ScreenError,
    feature_columns,
    validate_profile_metadata,
)
from phenoica.seeding import derive_seed, rng_for
from phenoica.stats import bh_qvalues

NULL_GENE = "null"

SCORE_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    GENE,
    GUIDE,
    "is_null_guide",
    "fold",
    "n_train_pos",
    "n_train_neg",
    "n_test_pos",
    "n_test_neg",
    "auroc",
    "sparsity",
    "concentration",
    "auroc_top",
    "auroc_rest",
    "status",
    "reason",
)
_INT_COLUMNS = ("n_train_pos", "n_train_neg", "n_test_pos", "n_test_neg")
_FLOAT_COLUMNS = ("auroc", "sparsity", "concentration", "auroc_top", "auroc_rest")
GUIDE_SUMMARY_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    GENE,
    GUIDE,
    "is_null_guide",
    "n_folds_ok",
    "auroc",
    "sparsity",
    "concentration",
)
GENE_SUMMARY_COLUMNS: tuple[str, ...] = ("model", "variant", GENE, "n_guides", "auroc", "sparsity", "concentration")
MAP_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    GENE,
    GUIDE,
    "n_wells",
    "mean_average_precision",
    "map_p_value",
    "map_q_value",
)

# LightGBM keys phenoica sets itself and a user may not override through classify.lightgbm.
_RESERVED = {
    "num_iterations": "set classify.num_boost_round instead",
    "seed": "every seed derives from the workflow seed",
}


# ----------------------------------------------------------------------------- configuration


def resolve_classify_config(cfg_classify: Mapping[str, Any] | None) -> dict[str, Any]:
    """``cfg_classify`` (config["classify"], possibly partial) with the schema's defaults filled in
    (:func:`phenoica.config.resolve_section`; a section resolved once is not validated again).

    Raises ValueError naming the key when a value breaks the schema.
    """
    return resolve_section("classify", cfg_classify)


#: Canonical names of the LightGBM parameters phenoica sets, defaults or checks itself, each with
#: a valid value. The parameter check sets them in its probe so that LightGBM names the
#: parameter behind any alias of them ("lambda_l1 is set=..., reg_alpha=... will be ignored").
_PROBE_CANONICAL: dict[str, Any] = {
    "objective": "binary",
    "num_iterations": 1,
    "seed": 0,
    "deterministic": False,
    "force_col_wise": False,
    "force_row_wise": False,
    "verbosity": 1,
    "num_threads": 1,
    "is_unbalance": False,
    "learning_rate": 0.1,
    "num_leaves": 31,
    "feature_fraction": 1.0,
    "lambda_l1": 0.0,
    "lambda_l2": 0.0,
}
#: A key LightGBM must call unknown, and an alias it must resolve, in every probe: if its
#: messages ever stop saying so, the check fails loudly instead of passing everything.
_PROBE_UNKNOWN = "phenoica_probe_unknown_key"
_PROBE_ALIAS = ("reg_alpha", "lambda_l1")
_LIGHTGBM_LOCK = threading.Lock()


class _LightGBMLog:
    """The logger phenoica registers with LightGBM (``lightgbm.register_logger``).

    Outside a parameter check it does what LightGBM's default logger does (info lines are
    printed, warnings become Python warnings); during a check it records the messages instead.
    LightGBM has no public way to read back a logger registered earlier, so one registered by
    the caller is replaced by this one (register it again after calling the check).
    """

    def __init__(self) -> None:
        self.record: list[str] | None = None

    def info(self, msg: str) -> None:
        if self.record is not None:
            self.record.append(msg)
        else:
            print(msg)

    def warning(self, msg: str) -> None:
        if self.record is not None:
            self.record.append(msg)
        else:
            warnings.warn(msg, stacklevel=3)


_LIGHTGBM_LOG = _LightGBMLog()


def _lightgbm_messages(params: Mapping[str, Any]) -> tuple[list[str], Exception | None]:
    """LightGBM's log while it reads ``params`` (a Dataset built on 20 x 2 rows), and the
    error it raised, if any."""
    X = np.column_stack([np.arange(20.0), np.arange(20.0) % 7])
    y = np.arange(20) % 2
    with _LIGHTGBM_LOCK:
        lgb.register_logger(_LIGHTGBM_LOG)
        _LIGHTGBM_LOG.record = []
        error: Exception | None = None
        try:
            lgb.Dataset(X, label=y, params=dict(params)).construct()
        except Exception as exc:  # LightGBM rejects a value: reported below, with its message
            error = exc
        finally:
            messages, _LIGHTGBM_LOG.record = _LIGHTGBM_LOG.record, None
    return messages, error


@functools.lru_cache(maxsize=32)
def _lightgbm_names(frozen: str) -> tuple[tuple[str, str | None], ...]:
    given = json.loads(frozen)
    probe = {**_PROBE_CANONICAL, **given, "verbosity": 1, _PROBE_UNKNOWN: 1}
    probe.setdefault(_PROBE_ALIAS[0], 0.0)
    messages, error = _lightgbm_messages(probe)
    unknown: set[str] = set()
    canonical: dict[str, str] = {}
    for msg in messages:
        found = re.search(r"Unknown parameter: (\S+)", msg)
        if found:
            unknown.add(found.group(1))
            continue
        found = re.search(r"(\w+) is set\b", msg)  # "C is set=..., K=... will be ignored", "C is set with K=..."
        if found:
            for key in probe:
                if re.search(rf"(?<![\w.]){re.escape(key)}=", msg[found.end() :]):
                    canonical[key] = found.group(1)
    if _PROBE_UNKNOWN not in unknown or canonical.get(_PROBE_ALIAS[0]) != _PROBE_ALIAS[1]:
        if error is not None:
            raise ValueError(
                f"config key classify.lightgbm: LightGBM {lgb.__version__} rejects these parameters: {error}"
            )
        raise RuntimeError(
            f"LightGBM {lgb.__version__} did not report unknown and aliased parameters as expected "
            f"(messages: {messages[:5]}); phenoica cannot check classify.lightgbm with this version"
        )
    return tuple((key, None if key in unknown else canonical.get(key, key)) for key in given)


def lightgbm_parameter_names(params: Mapping[str, Any]) -> dict[str, str | None]:
    """LightGBM's own reading of parameter keys: key -> the parameter it sets, None if unknown.

    LightGBM reads ``params`` (on a tiny Dataset) and its messages are recorded: "Unknown
    parameter: KEY", and "CANONICAL is set ... KEY=..." for every key of a parameter set
    twice. The probe sets every parameter phenoica itself sets, defaults or
    checks (``objective``, ``seed``, ``num_iterations``, ``lambda_l1``...) under its canonical
    name, so an alias of any of them is named; a key aliasing another parameter keeps its own
    name unless two keys set that parameter. A probe key that LightGBM must call unknown and
    an alias it must resolve guard the check: if LightGBM's messages change, this raises
    instead of passing every key. Values are LightGBM's to check when it trains (some, such as
    ``max_bin_by_feature``, depend on the data). Results are cached per set of params.
    """
    frozen = json.dumps(dict(params), sort_keys=True, default=repr)
    return dict(_lightgbm_names(frozen))


def lightgbm_params(cfg_classify: Mapping[str, Any] | None, seed: int) -> dict[str, Any]:
    """LightGBM parameters: Nelson et al. 2026 Table 6 (schema defaults) merged with classify.lightgbm.

    Keys are checked by LightGBM itself (:func:`lightgbm_parameter_names`): an unknown key is an
    error naming it, and keys are returned under their canonical names (``reg_alpha`` ->
    ``lambda_l1``) wherever LightGBM names them. Two keys naming the same parameter
    with different values are an error, unless one of them is a schema default left untouched
    (then the other, explicitly set, wins). Adds ``objective=binary``, ``seed``,
    ``deterministic=True`` and ``force_col_wise=True`` (unless row-wise was asked for), so a
    fixed seed gives identical models. ``num_iterations`` and ``seed`` may not be set here.
    """
    cfg = resolve_classify_config(cfg_classify)
    given = dict(cfg["lightgbm"])
    defaults = resolve_section("classify", {})["lightgbm"]
    canonical = lightgbm_parameter_names(given)
    groups: dict[str, list[str]] = {}
    for key in given:
        canon = canonical[key]
        if canon is None:
            raise ValueError(f"config key classify.lightgbm.{key}: not a LightGBM {lgb.__version__} parameter or alias")
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
    return derive_seed(seed, "classify", gene, guide, fold)


# ----------------------------------------------------------------------------- guides and the null


@dataclass(frozen=True, eq=False)
class GuideSamples:
    """One classification target: a real guide's perturbation rows, or a pseudo-guide's rows.

    ``rows`` are positional row indices of the table. A real guide's rows are never controls; a
    pseudo-guide's rows are control rows that leave the control set for its own classifier only.
    """

    gene: str
    guide: str
    rows: np.ndarray
    is_null: bool = False


def control_mask(table: pd.DataFrame) -> np.ndarray:
    """Rows of the shared control set: ``Metadata_PertType == "control"``."""
    return table[PERT_TYPE].astype(str).to_numpy() == CONTROL


def well_units(table: pd.DataFrame) -> np.ndarray:
    """An integer code per row naming its (plate, well); each row is its own unit without a
    ``Metadata_Well`` column (e.g. embeddings computed elsewhere without wells)."""
    if WELL not in table.columns:
        return np.arange(len(table), dtype=np.int64)
    keys = table[PLATE].astype(str) + "\x1f" + table[WELL].astype(str)
    return pd.factorize(keys, sort=True)[0].astype(np.int64)


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
    check_finite(X, source, names)
    if len(X):
        constant = X.max(axis=0) == X.min(axis=0)
        if constant.any():
            dropped = [names[j] for j in np.flatnonzero(constant)]
            log.warning(
                "%s: dropping %d constant feature column(s) %s%s (no classifier can use them)",
                source,
                len(dropped),
                dropped[:10],
                " ..." if len(dropped) > 10 else "",
            )
            keep = np.flatnonzero(~constant)
            X = np.ascontiguousarray(X[:, keep])
            names = [names[j] for j in keep]
    return X, names


def guides_of(table: pd.DataFrame, genes: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """Sorted (gene, guide) pairs of the table's perturbations (of ``genes`` if given)."""
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
    pairs = table.loc[pert, [GENE, GUIDE]].astype(str).drop_duplicates()
    if genes is not None:
        pairs = pairs[pairs[GENE].isin(list(genes))]
    return sorted(map(tuple, pairs.to_numpy().tolist()))  # type: ignore[arg-type]


def guide_samples(table: pd.DataFrame, guides: Sequence[tuple[str, str]]) -> list[GuideSamples]:
    """The perturbation rows of each (gene, guide); an error names any pair the table lacks."""
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
    keys = table[GENE].astype(str) + "\x1f" + table[GUIDE].astype(str)
    positions = keys[pert].groupby(keys[pert], sort=False).indices
    index = np.flatnonzero(pert)
    missing = [g for g in guides if f"{g[0]}\x1f{g[1]}" not in positions]
    if missing:
        raise ValueError(f"requested guide(s) {missing[:5]} are not perturbation guides of the table")
    return [GuideSamples(g, s, index[positions[f"{g}\x1f{s}"]]) for g, s in guides]


def null_guide_name(j: int, n: int) -> str:
    """Name of pseudo-guide ``j`` (0-based) of ``n``: ``null_0001``..."""
    return f"null_{j + 1:0{max(4, len(str(n)))}d}"


def null_guide_design(table: pd.DataFrame, n: int, seed: int, log: logging.Logger | None = None) -> list[GuideSamples]:
    """``n`` pseudo-guides, each a set of whole control wells laid out like a real guide.

    Pseudo-guide ``j`` copies the layout of one real guide drawn at random (its template): for
    every plate where the template has ``k`` wells, ``k`` control wells of that plate, all their
    sites (rows). So pseudo-guides have the screen's own distribution of wells per plate and
    batch, and are spread over batches as real guides are. When a plate holds too few control
    wells (fewer than ``k + 1``: one must stay a control), the wells come from the controls of
    the template's batch on any plate. Draws are independent between pseudo-guides (two may
    share a well): each is scored by its own classifier, against every control except its own
    wells. Seeds: ``derive_seed(seed, "null_guide", j)``, so pseudo-guide ``j`` does not change
    when ``n`` grows.

    Raises ScreenError naming the batch and counts when a batch holds too few control wells to
    build even one pseudo-guide, or when the table has no perturbation guides to copy.
    """
    log = log or logging.getLogger(__name__)
    if n < 0:
        raise ValueError(f"classify.n_null_guides: must be >= 0, got {n}")
    if n == 0:
        return []
    for col in (GENE, GUIDE, PERT_TYPE, BATCH, PLATE):
        if col not in table.columns:
            raise ScreenError(f"null guides: missing required column {col}")
    if (table[GENE].astype(str) == NULL_GENE).any():
        raise ScreenError(f"null guides: column {GENE} already uses the name {NULL_GENE!r} reserved for pseudo-guides")
    units = well_units(table)
    is_control = control_mask(table)
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
    if not pert.any():
        raise ScreenError("null guides: the table has no perturbation guides whose layout pseudo-guides could copy")
    plate = table[PLATE].astype(str).to_numpy()
    batch = table[BATCH].astype(str).to_numpy()
    unit_plate = pd.Series(plate, index=units).groupby(level=0).first()
    unit_batch = pd.Series(batch, index=units).groupby(level=0).first()
    rows_of_unit = pd.Series(np.arange(len(table)), index=units).groupby(level=0).indices
    ctrl_units = np.unique(units[is_control])
    ctrl_by_plate = {p: u for p, u in pd.Series(ctrl_units, index=unit_plate[ctrl_units].to_numpy()).groupby(level=0)}
    ctrl_by_plate = {p: np.sort(u.to_numpy()) for p, u in ctrl_by_plate.items()}
    ctrl_by_batch = {
        b: np.sort(u.to_numpy())
        for b, u in pd.Series(ctrl_units, index=unit_batch[ctrl_units].to_numpy()).groupby(level=0)
    }
    # templates: each real guide's wells per plate
    layout = pd.DataFrame(
        {
            "guide": (table[GENE].astype(str) + "\x1f" + table[GUIDE].astype(str)).to_numpy()[pert],
            "plate": plate[pert],
            "batch": batch[pert],
            "unit": units[pert],
        }
    )
    per_plate = layout.drop_duplicates("unit").groupby(["guide", "plate", "batch"], sort=True).size()
    templates: list[list[tuple[str, str, int]]] = [
        [(p, b, int(k)) for (_, p, b), k in grp.items()] for _, grp in per_plate.groupby(level=0, sort=True)
    ]
    # a batch must hold enough control wells for the largest need any template has there
    need = per_plate.groupby(["guide", "batch"]).sum().groupby(level="batch").max()
    for b, k in need.items():
        have = len(ctrl_by_batch.get(b, ()))
        if have < int(k) + 1:
            raise ScreenError(
                f"null guides: batch {b!r} has {have} control well(s); a pseudo-guide laid out like the real guides "
                f"needs up to {int(k)} there, and at least one more must stay a control. Too few control wells to "
                "build the empirical null (add control wells, or set classify.n_null_guides: 0 to score without "
                "hit calls)"
            )
    fallback_plates: set[str] = set()
    out = []
    for j in range(n):
        rng = rng_for(seed, "null_guide", j)
        template = templates[int(rng.integers(len(templates)))]
        chosen: list[np.ndarray] = []
        used: set[int] = set()
        for p, b, k in template:
            pool = ctrl_by_plate.get(p, np.empty(0, dtype=np.int64))
            if len(pool) < k + 1:
                fallback_plates.add(p)
                pool = ctrl_by_batch[b]
            pool = np.asarray([u for u in pool if u not in used], dtype=np.int64)
            pick = rng.choice(pool, size=min(k, len(pool) - 1), replace=False)
            used.update(int(u) for u in pick)
            chosen.append(pick)
        units_j = np.sort(np.concatenate(chosen))
        rows = np.sort(np.concatenate([rows_of_unit[u] for u in units_j]))
        out.append(GuideSamples(NULL_GENE, null_guide_name(j, n), rows, True))
    if fallback_plates:
        log.info(
            "null guides: %d plate(s) hold too few control wells for a guide's layout (%s%s); their pseudo-guide "
            "wells come from the controls of the same batch",
            len(fallback_plates),
            sorted(fallback_plates)[:5],
            " ..." if len(fallback_plates) > 5 else "",
        )
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
        """Bin the training controls plus ``train_guide_rows`` (a block of guides) once.

        ``train_guide_rows`` may hold control rows (pseudo-guides): they are binned a second
        time with label 1, beside their label-0 copy among the controls.
        """
        guide_rows = np.asarray(train_guide_rows, dtype=np.int64)
        rows = np.concatenate([self.train_controls, guide_rows])
        label = np.concatenate([np.zeros(len(self.train_controls)), np.ones(len(guide_rows))])
        columns = [
            lgb.Dataset(
                self.X[rows, j : j + 1],
                label=label,
                reference=ref,
                feature_name=ref.feature_name,
                params=self.params,
            ).construct()
            for j, ref in enumerate(self.bins)
        ]
        n_ctrl = len(self.train_controls)
        control_local = np.full(len(self.X), -1, dtype=np.int64)
        control_local[self.train_controls] = np.arange(n_ctrl)
        guide_local = np.full(len(self.X), -1, dtype=np.int64)
        guide_local[guide_rows] = n_ctrl + np.arange(len(guide_rows))
        block = GuideBlock(columns, columns[0], n_ctrl, control_local, guide_local)
        block.dataset = block.merge(range(len(columns)))
        return block


@dataclass
class GuideBlock:
    """Binned training rows of one fold for a block of guides.

    ``columns[j]`` is feature ``j`` as a one-feature Dataset over the fold's training controls
    (first ``n_controls`` rows, label 0) and the block's guides' training rows (label 1),
    binned with the fold's ``FoldBins``; ``dataset`` is all features merged. ``control_local``
    and ``guide_local`` map a table row to its label-0 and label-1 row in them (-1 when
    absent). Blocks keep the per-guide copying proportional to the controls, however many
    guides a shard holds.
    """

    columns: list[lgb.Dataset]
    dataset: lgb.Dataset
    n_controls: int
    control_local: np.ndarray
    guide_local: np.ndarray

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
        """The training set of one guide: the training controls except its own rows (which only
        a pseudo-guide has among them) + its rows as positives, already binned.

        ``features`` (sorted column indices) restricts it to those columns; None = all.
        """
        loc = self.guide_local[train_positions]
        if (loc < 0).any():
            raise ValueError("GuideBlock.guide_dataset: some rows were not binned in this block")
        keep = np.ones(self.n_controls, dtype=bool)
        own = self.control_local[train_positions]
        keep[own[own >= 0]] = False
        source = self.dataset if features is None else self.merge(features)
        return source.subset(np.concatenate([np.flatnonzero(keep), np.sort(loc)]).astype(np.int32))


@dataclass(frozen=True)
class GuideScore:
    """Held-out scores of one (guide, fold)."""

    auroc: float
    sparsity: float
    concentration: float
    auroc_top: float
    auroc_rest: float


def score_guide(
    dataset_for: Callable[[np.ndarray | None], lgb.Dataset],
    X_test: np.ndarray,
    y_test: np.ndarray,
    params: Mapping[str, Any],
    num_boost_round: int,
    concentration_k: float | None,
) -> GuideScore:
    """Train the full model (and, unless ``concentration_k`` is None, the top-/rest-feature
    models); score each on the test rows.

    ``dataset_for(features)`` returns the guide's training Dataset restricted to the sorted
    column indices ``features`` (None = all columns); ``X_test`` holds all columns. Sparsity
    comes from the full model's split fractions; the top features are the top
    ``concentration_k`` fraction by its split counts, the rest are the others; both are
    retrained from scratch with the same parameters and rounds. Without them concentration,
    ``auroc_top`` and ``auroc_rest`` are NaN.

    A full model that makes no split at all (nothing in the guide's training rows beats
    LightGBM's regularization) predicts one value for every sample: its AUROC is 0.5, as
    measured, and sparsity and concentration are undefined (NaN). Such a guide is scored, not
    skipped: dropping it would remove the low end of the real guides and of the null alike.
    """
    full = lgb.train(dict(params), dataset_for(None), num_boost_round=num_boost_round)
    counts = full.feature_importance(importance_type="split")
    auc = metrics.auroc(y_test, full.predict(X_test))
    if counts.sum() == 0:
        return GuideScore(auc, math.nan, math.nan, math.nan, math.nan)
    c = metrics.split_fractions(counts, full.num_feature())
    if concentration_k is None:
        return GuideScore(auc, metrics.sparsity(c), math.nan, math.nan, math.nan)
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


def _skip_reasons(n_train_pos: int, n_test_pos: int, cfg: Mapping[str, Any]) -> list[str]:
    """Why a (guide, fold) cannot be scored; empty when it can."""
    reasons = []
    lo_train, lo_test = int(cfg["min_train_samples"]), int(cfg["min_test_samples"])
    if n_train_pos < lo_train:
        reasons.append(f"too few training samples ({n_train_pos} < {lo_train})")
    if n_test_pos == 0:
        reasons.append("held-out fold has no samples of this guide")
    elif n_test_pos < lo_test:
        reasons.append(f"too few held-out samples ({n_test_pos} < {lo_test})")
    return reasons


def _check_fold_controls(fold: str, n_train: int, n_test: int, cfg: Mapping[str, Any], source: str) -> None:
    """A fold without enough controls to train or score any classifier is an error, with counts."""
    lo = int(cfg["min_train_samples"])
    if n_train < lo or n_test < 1:
        raise ScreenError(
            f"{source}: fold {fold!r} has {n_train} training control sample(s) and {n_test} held-out control "
            f"sample(s); every guide needs at least classify.min_train_samples = {lo} training controls and one "
            "held-out control. Each batch must hold control wells"
        )


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
    nulls: Sequence[GuideSamples] = (),
    block_size: int = GUIDES_PER_BLOCK,
) -> pd.DataFrame:
    """Score each (guide, fold): one row per pair with exactly ``SCORE_COLUMNS``.

    ``guides`` are (gene, guide) pairs of the table's perturbations (None = all of them);
    ``nulls`` are pseudo-guides (``null_guide_design``), scored after them the same way but
    without the concentration models. ``folds`` carry positional ``train``/``test`` row
    indices. Pairs that cannot be scored get status ``skipped`` with the reason and NaN scores;
    nothing is dropped silently. Results are deterministic for a fixed ``seed`` and independent
    of which other guides are scored alongside. ``block_size`` guides share one binned block of
    training rows (a memory/speed trade-off only; results do not depend on it).
    """
    log = log or logging.getLogger(__name__)
    if block_size < 1:
        raise ValueError(f"classify_guides: block_size must be >= 1, got {block_size}")
    cfg = resolve_classify_config(cfg_classify)
    source = f"classification table ({model or 'model'}/{variant})"
    validate_profile_metadata(table, source=source)
    X, _names = feature_matrix(table, source, log)
    if guides is None:
        guides = guides_of(table)
    guides = [(str(g), str(s)) for g, s in guides]
    if len(set(guides)) != len(guides):
        raise ValueError(f"{source}: the guide list has duplicates")
    try:
        targets = guide_samples(table, guides) + list(nulls)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None
    fold_arrays = _fold_arrays(folds, len(table))
    if not targets or not fold_arrays:
        return _empty_scores()
    if X.shape[1] < 2:
        raise ValueError(f"{source}: needs at least 2 non-constant feature columns, has {X.shape[1]}")

    params = lightgbm_params(cfg, seed)
    rounds, k = int(cfg["num_boost_round"]), float(cfg["concentration_k"])
    with_concentration = bool(cfg["concentration"])
    is_control = control_mask(table)

    rows: list[dict[str, Any]] = []
    for f_i, (fold_name, train, test) in enumerate(fold_arrays):
        t0, done = time.perf_counter(), 0
        train_ctrl = np.flatnonzero(train & is_control)
        test_ctrl = np.flatnonzero(test & is_control)
        _check_fold_controls(fold_name, len(train_ctrl), len(test_ctrl), cfg, source)
        plans = []
        for target in targets:
            r = target.rows
            tr, te = r[train[r]], r[test[r]]
            # a pseudo-guide's own wells leave the controls, for its classifier only
            n_train_neg = len(train_ctrl) - int(is_control[tr].sum())
            test_neg = test_ctrl[~np.isin(test_ctrl, te)] if target.is_null else test_ctrl
            plans.append((target, tr, te, n_train_neg, test_neg, _skip_reasons(len(tr), len(te), cfg)))
        to_train = [p for p in plans if not p[5]]
        fold_bins = None
        if to_train:
            fold_bins = FoldBins.build(X, train_ctrl, test_ctrl, params)
            log.info(
                "fold %s (%d/%d): bins of %d features on %d training controls in %.1fs; %d guide(s) to score "
                "(%d pseudo-guides)",
                fold_name,
                f_i + 1,
                len(fold_arrays),
                X.shape[1],
                len(train_ctrl),
                time.perf_counter() - t0,
                len(to_train),
                sum(p[0].is_null for p in to_train),
            )
        every = max(1, min(50, len(to_train) // 10))
        block, block_of = None, {}
        for start in range(0, len(to_train), block_size):
            for p in to_train[start : start + block_size]:
                block_of[id(p[0])] = start
        current = -1
        for target, tr, te, n_train_neg, test_neg, reasons in plans:
            row: dict[str, Any] = {
                "model": model,
                "variant": variant,
                GENE: target.gene,
                GUIDE: target.guide,
                "is_null_guide": target.is_null,
                "fold": fold_name,
                "n_train_pos": len(tr),
                "n_train_neg": n_train_neg,
                "n_test_pos": len(te),
                "n_test_neg": len(test_neg),
                **{c: math.nan for c in _FLOAT_COLUMNS},
                "status": SKIPPED,
                "reason": "; ".join(reasons),
            }
            if not reasons:
                assert fold_bins is not None
                start = block_of[id(target)]
                if start != current:
                    members = to_train[start : start + block_size]
                    block = fold_bins.block(np.concatenate([p[1] for p in members]))
                    current = start
                assert block is not None
                X_test_neg = fold_bins.X_test_controls if len(test_neg) == len(test_ctrl) else X[test_neg]
                X_test = np.concatenate([X_test_neg, X[te]])
                y_test = np.concatenate([np.zeros(len(test_neg)), np.ones(len(te))])
                guide_params = dict(params, seed=_guide_seed(seed, target.gene, target.guide, fold_name))
                try:
                    score = score_guide(
                        functools.partial(block.guide_dataset, tr),
                        X_test,
                        y_test,
                        guide_params,
                        rounds,
                        k if with_concentration and not target.is_null else None,
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
                        fold_name,
                        f_i + 1,
                        len(fold_arrays),
                        done,
                        len(to_train),
                        done / max(dt, 1e-9),
                    )
            rows.append(row)
        n_skip = len(plans) - len(to_train)
        if n_skip:
            log.info("fold %s: %d guide(s) skipped (reasons in the score table)", fold_name, n_skip)
        del fold_bins, block
    out = _typed_scores(pd.DataFrame(rows))
    order = {(t.gene, t.guide): i for i, t in enumerate(targets)}
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
    """Classify every guide of shard ``shard`` (of ``n_shards``) of the table's perturbed genes,
    and the pseudo-guides ``j`` with ``j % n_shards == shard`` of the null
    (``null_guide_design(table, classify.n_null_guides, seed)``: the same draw in every shard)."""
    if not 0 <= shard < n_shards:
        raise ValueError(f"classify_shard: shard {shard} is not in 0..{n_shards - 1}")
    cfg = resolve_classify_config(cfg_classify)
    log = log or logging.getLogger(__name__)
    design = null_guide_design(table, int(cfg["n_null_guides"]), seed, log)
    nulls = design[shard::n_shards]
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
    genes = shard_genes(table.loc[pert, GENE].astype(str).unique().tolist(), n_shards)[shard]
    guides = guides_of(table, genes)
    log.info(
        "shard %d/%d of %s/%s: %d gene(s), %d guide(s), %d of %d pseudo-guides",
        shard + 1,
        n_shards,
        model or "model",
        variant,
        len(genes),
        len(guides),
        len(nulls),
        len(design),
    )
    return classify_guides(table, guides, folds, cfg, seed, variant, model, log, nulls=nulls)


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
    guide = (
        rows.groupby(keys, sort=True, dropna=False)
        .agg(n_folds_ok=("_ok", "sum"), **{v: (v, "mean") for v in vals})
        .reset_index()
    )
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


def well_profiles(table: pd.DataFrame) -> pd.DataFrame:
    """Mean profile per (plate, well) (``profiles.aggregate_wells``); a table that is already
    one row per well, or has no ``Metadata_Well`` column, is returned as it is."""
    if WELL not in table.columns or not table.duplicated([PLATE, WELL]).any():
        return table
    return aggregate_wells(table)


def guide_map(
    table: pd.DataFrame,
    variant: str,
    model: str,
    seed: int,
    null_size: int = 10000,
    cache_dir: str | None = None,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """Phenotypic activity per guide: copairs mean average precision of its wells vs controls.

    As the field's recipes do it (jump-profiling-recipe, Kalinin et al. 2025): on well-level
    profiles (sites averaged), each well of a guide ranks the guide's other wells (positives)
    among the control wells of its own plate (negatives) by cosine similarity; the guide's
    mAP averages its wells' average precision. Controls are never positives of each other.
    p-values come from copairs' null of random rank lists (``null_size`` draws per
    configuration, seeded by ``derive_seed(seed, "map", model, variant)``); ``map_q_value`` is
    the Benjamini-Hochberg correction over the guides of this (model, variant). A guide with a
    single well has no positive pair: NaN (logged). copairs caches null distributions on disk:
    in ``cache_dir`` if given, else in a temporary folder removed after. Returns
    ``MAP_COLUMNS``.
    """
    from copairs.map import average_precision, mean_average_precision

    log = log or logging.getLogger(__name__)
    source = f"mAP table ({model or 'model'}/{variant})"
    validate_profile_metadata(table, source=source)
    wells = well_profiles(table).reset_index(drop=True)
    X, _ = feature_matrix(wells, source, log)
    is_control = control_mask(wells)
    if not is_control.any():
        raise ScreenError(f"{source}: no control rows ({PERT_TYPE} == {CONTROL!r}) to compare guides against")
    group_col, ctrl_col = "Metadata_MapGroup", "Metadata_MapIsControl"
    gene = wells[GENE].astype(str).to_numpy()
    guide = wells[GUIDE].astype(str).to_numpy()
    key = np.char.add(np.char.add(gene.astype(str), "\x1f"), guide.astype(str))
    meta = pd.DataFrame(
        {
            # every control well is its own group, so controls never pair up as positives
            group_col: np.where(is_control, np.char.add("\x1econtrol", np.arange(len(wells)).astype(str)), key),
            PLATE: wells[PLATE].astype(str).to_numpy(),
            ctrl_col: is_control,
        }
    )
    pairs = pd.DataFrame({GENE: gene[~is_control], GUIDE: guide[~is_control], group_col: key[~is_control]})
    n_wells = pairs.groupby(group_col).size().rename("n_wells")
    pairs = pairs.drop_duplicates(group_col).merge(n_wells.reset_index(), on=group_col)
    pairs = pairs.sort_values([GENE, GUIDE]).reset_index(drop=True)
    if pairs.empty:
        return pd.DataFrame({c: [] for c in MAP_COLUMNS})
    ap = average_precision(
        meta,
        X.astype(np.float64, copy=False),
        pos_sameby=[group_col],
        pos_diffby=[],
        neg_sameby=[PLATE],
        neg_diffby=[ctrl_col],
        distance="cosine",
        progress_bar=False,
    )
    ap = ap[~ap[ctrl_col].astype(bool)]
    ap = ap[np.isfinite(ap["average_precision"].to_numpy(dtype=float))]
    result = pd.DataFrame({group_col: [], "mean_average_precision": [], "p_value": []})
    if len(ap):
        with tempfile.TemporaryDirectory(prefix="phenoica-copairs-") as tmp:
            result = mean_average_precision(
                ap,
                sameby=[group_col],
                null_size=null_size,
                threshold=0.05,
                seed=derive_seed(seed, "map", model, variant),
                progress_bar=False,
                max_workers=1,
                cache_dir=cache_dir or tmp,
            )[[group_col, "mean_average_precision", "p_value"]]
    out = pairs.merge(result, on=group_col, how="left")
    unscored = out["mean_average_precision"].isna()
    if unscored.any():
        log.warning(
            "%s: %d guide(s) have no positive pair (a single well, or no control well on their plates) and get "
            "no mAP: %s",
            source,
            int(unscored.sum()),
            out.loc[unscored, GUIDE].tolist()[:10],
        )
    out = out.rename(columns={"p_value": "map_p_value"})
    out["map_p_value"] = out["map_p_value"].astype(np.float64)
    out["map_q_value"] = bh_qvalues(out["map_p_value"].to_numpy())
    out["mean_average_precision"] = out["mean_average_precision"].astype(np.float64)
    out["n_wells"] = out["n_wells"].astype(np.int64)
    out["model"], out["variant"] = model, variant
    return out[list(MAP_COLUMNS)].reset_index(drop=True)
