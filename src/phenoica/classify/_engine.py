"""The fold engine: one LightGBM classifier per (guide, fold) against the shared controls.

For every (guide, fold) a LightGBM binary classifier separates the guide's samples (label 1)
from the shared control set (label 0: every ``Metadata_PertType == "control"`` row). It trains on
the fold's training rows and is scored on the fold's held-out rows (held-out samples of the
guide + held-out controls): AUROC, sparsity of its split counts and, when ``classify.concentration``
is on, concentration (retrained on the top ``concentration_k`` fraction of features by split
count and on the rest: two more models per guide).

Training sets are built from the fold's shared bins (:mod:`phenoica.classify._bins`), so the
per-guide cost is training its models, not building their datasets; the result is identical to
building each guide's datasets from raw floats with the same bin boundaries (tested).

Constant feature columns (one value over the whole table) are dropped with a logged warning
naming them; sparsity's D counts the remaining features. Non-finite feature values raise.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from phenoica.classify._bins import GUIDES_PER_BLOCK, FoldBins, GuideBlock
from phenoica.classify._distance import ControlMoments, heldout_distance_se
from phenoica.classify._features import feature_matrix
from phenoica.classify._guide_model import guide_seed, score_guide_on
from phenoica.classify._null import (
    GuideSamples,
    control_constructs,
    control_mask,
    guide_samples,
    guides_of,
    null_guide_design,
)
from phenoica.classify._options import ClassifyOptions
from phenoica.classify._protocol import (
    ControlSample,
    Training,
    control_strata,
    plate_trainings,
    training_controls,
    trainings,
)
from phenoica.classify._skips import check_fold_controls, plate_control_reasons, skip_reasons
from phenoica.contract import (
    GENE,
    GUIDE,
    OK,
    PERT_TYPE,
    PERTURBATION,
    SCORE_COLUMNS,
    SCORE_FLOAT_COLUMNS,
    SCORE_INT_COLUMNS,
    SKIPPED,
    validate_profile_metadata,
)


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


def fold_masks(folds: Sequence[Any], n_rows: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, train mask, test mask) per fold; checks indices and disjointness."""
    out, seen = [], set()
    for i, fold in enumerate(folds):
        for attr in ("name", "train", "test"):
            if not hasattr(fold, attr):
                raise ValueError(f"fold {i}: has no attribute {attr!r}; expected a phenoica.classify.Fold")
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


# ----------------------------------------------------------------------------- classification


def _empty_scores() -> pd.DataFrame:
    return _typed_scores(pd.DataFrame({c: [] for c in SCORE_COLUMNS}))


def _typed_scores(df: pd.DataFrame) -> pd.DataFrame:
    df = df[list(SCORE_COLUMNS)].copy()
    for c in ("model", "variant", GENE, GUIDE, "fold", "status", "reason"):
        df[c] = df[c].astype(object).astype(str) if len(df) else pd.Series([], dtype=object)
    df["is_null_guide"] = df["is_null_guide"].astype(bool)
    for c in SCORE_INT_COLUMNS:
        df[c] = df[c].astype(np.int64)
    for c in SCORE_FLOAT_COLUMNS:
        df[c] = df[c].astype(np.float64)
    return df.reset_index(drop=True)


@dataclass(frozen=True)
class _Job:
    """What every training set of one :func:`classify_guides` call shares."""

    X: np.ndarray
    is_control: np.ndarray
    strata: np.ndarray
    options: ClassifyOptions
    params: Mapping[str, Any]  # LightGBM's parameters (options.booster_params()), built once
    model: str
    variant: str
    source: str
    log: logging.Logger


@dataclass(frozen=True, eq=False)
class _Plan:
    """One target in one training set: its training rows and negatives (``own_controls``: the
    training controls that are its own wells and leave its negatives, a pseudo-guide's), and per
    scored fold (the training's members) its held-out rows, held-out negatives and why it is skipped."""

    target: GuideSamples
    train: np.ndarray
    n_train_neg: int
    own_controls: np.ndarray
    tests: tuple[np.ndarray, ...]
    test_negs: tuple[np.ndarray, ...]
    reasons: tuple[list[str], ...]

    @property
    def trainable(self) -> bool:
        """Whether any of its folds can be scored (then its models are trained)."""
        return any(not r for r in self.reasons)


def _targets(
    table: pd.DataFrame, guides: list[tuple[str, str]] | None, nulls: Sequence[GuideSamples], source: str
) -> list[GuideSamples]:
    """The real guides (None = all of the table's), then the pseudo-guides; duplicates are an error."""
    if guides is None:
        guides = guides_of(table)
    guides = [(str(g), str(s)) for g, s in guides]
    if len(set(guides)) != len(guides):
        raise ValueError(f"{source}: the guide list has duplicates")
    try:
        return guide_samples(table, guides) + list(nulls)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None


def _plans(
    job: _Job,
    targets: Sequence[GuideSamples],
    training: Training,
    sample: ControlSample,
    test_ctrls: Sequence[np.ndarray],
    scoped: bool,
) -> list[_Plan]:
    """Each target's rows in one training set (``sample``: the controls it trains on;
    ``test_ctrls``: each member fold's held-out controls); ``scoped``: the training set is the
    part of one on its targets' plates, whose controls may be too few for a target
    (:func:`plate_control_reasons`: every training control on them, less a pseudo-guide's own
    wells, and its held-out negatives)."""
    plans = []
    train_ctrl = sample.rows
    for target in targets:
        r = target.rows
        tr = r[training.train[r]]
        # a pseudo-guide's own wells leave the controls, for its classifier only
        own = tr[job.is_control[tr]]
        n_own = len(own)
        own = own[np.isin(own, train_ctrl)] if len(own) else own
        n_train_neg = len(train_ctrl) - len(own)
        tests, negs, reasons = [], [], []
        for (_, test), ctrl in zip(training.members, test_ctrls):
            te = r[test[r]]
            tests.append(te)
            negs.append(ctrl[~np.isin(ctrl, te)] if target.is_null else ctrl)
            lacking = plate_control_reasons(sample.of - n_own, len(negs[-1]), job.options) if scoped else []
            reasons.append(skip_reasons(len(tr), len(te), job.options) + lacking)
        plans.append(_Plan(target, tr, n_train_neg, own, tuple(tests), tuple(negs), tuple(reasons)))
    return plans


def _skipped_row(job: _Job, plan: _Plan, m: int, fold_name: str) -> dict[str, Any]:
    """The score row of a (target, fold ``m`` of its training): skipped with its reasons until scored."""
    return {
        "model": job.model,
        "variant": job.variant,
        GENE: plan.target.gene,
        GUIDE: plan.target.guide,
        "is_null_guide": plan.target.is_null,
        "fold": fold_name,
        "n_train_pos": len(plan.train),
        "n_train_neg": plan.n_train_neg,
        "n_test_pos": len(plan.tests[m]),
        "n_test_neg": len(plan.test_negs[m]),
        **{c: math.nan for c in SCORE_FLOAT_COLUMNS},
        "status": SKIPPED,
        "reason": "; ".join(plan.reasons[m]),
    }


def _score_plan(
    job: _Job,
    plan: _Plan,
    training: Training,
    block: GuideBlock,
    X_test_ctrls: Sequence[np.ndarray],
    controls: ControlMoments,
    params: Mapping[str, Any],
) -> dict[int, dict[str, Any]]:
    """The scores of each scorable fold ``m`` of a trainable target (one set of models), or why
    its classifier could not be scored. ``controls``: the moments of the training's controls, of
    which a pseudo-guide's own training wells are taken out for its held-out distance;
    ``params``: the training set's LightGBM parameters (:meth:`ControlSample.params`)."""
    X, options, target = job.X, job.options, plan.target
    scored = [m for m, r in enumerate(plan.reasons) if not r]
    tests, distances = [], {}
    guide_controls = controls.without(X[plan.own_controls])
    for m in scored:
        neg = X_test_ctrls[m] if len(plan.test_negs[m]) == len(X_test_ctrls[m]) else X[plan.test_negs[m]]
        y = np.concatenate([np.zeros(len(plan.test_negs[m])), np.ones(len(plan.tests[m]))])
        tests.append((np.concatenate([neg, X[plan.tests[m]]]), y))
        distances[m] = heldout_distance_se(guide_controls, X[plan.train], X[plan.tests[m]], neg)
    guide_params = dict(params, seed=guide_seed(options.seed, target.gene, target.guide, training.name))
    try:
        scores = score_guide_on(
            functools.partial(block.guide_dataset, plan.train),
            tests,
            guide_params,
            options.num_boost_round,
            options.concentration_k if options.concentration and not target.is_null else None,
        )
    except ValueError as exc:
        return {m: {"reason": f"classifier could not be scored: {exc}"} for m in scored}
    return {
        m: {**vars(score), "distance_sd": distances[m][0], "distance_se": distances[m][1], "status": OK, "reason": ""}
        for m, score in zip(scored, scores)
    }


def _training_setup(job: _Job, training: Training) -> tuple[ControlSample, list[np.ndarray]]:
    """The controls a training set trains on (:func:`training_controls`) and each member fold's
    held-out controls (a whole fold's are checked first, :func:`_score_scoped`; a part of one on
    some plates skips the targets they cannot score, :func:`_plans`)."""
    options = job.options
    train_all = np.flatnonzero(training.train & job.is_control)
    train_ctrl = training_controls(train_all, job.strata, options.max_train_controls, options.seed, training.name)
    sample = ControlSample(train_ctrl, len(train_all), options.scale_leaf)
    test_ctrls = [np.flatnonzero(test & job.is_control) for _, test in training.members]
    if sample.weight is not None:
        job.log.info(
            "training %s: %d of %d training controls (classify.fast_train_controls, stratified by plate), "
            "every training row weighted %.3g, min_data_in_leaf %d (classify.fast_leaf %s)",
            training.name,
            len(train_ctrl),
            len(train_all),
            sample.weight,
            sample.params(job.params).get("min_data_in_leaf"),
            options.fast_leaf,
        )
    return sample, test_ctrls


def _score_training(
    job: _Job, targets: Sequence[GuideSamples], training: Training, f_i: int, n_trainings: int, scoped: bool = False
) -> list[dict[str, Any]]:
    """The score rows of every target in training set ``f_i`` (of ``n_trainings``): per target,
    one row per member fold, in the targets' order. ``scoped``: the training set is the part of
    one on its targets' plates (:func:`_score_scoped`).

    The training's bins are found once on its training controls; consecutive blocks of
    ``GUIDES_PER_BLOCK`` trainable targets share one binned block of training rows.
    """
    log, size, name = job.log, GUIDES_PER_BLOCK, training.name
    t0, done = time.perf_counter(), 0
    sample, test_ctrls = _training_setup(job, training)
    train_ctrl, params = sample.rows, sample.params(job.params)
    plans = _plans(job, targets, training, sample, test_ctrls, scoped)
    to_train = [p for p in plans if p.trainable]
    fold_bins = None
    if to_train:
        fold_bins = FoldBins.build(job.X, train_ctrl, params, sample.weight)
        log.info(
            "fold %s (%d/%d): bins of %d features on %d training controls in %.1fs; %d guide(s) to score "
            "(%d pseudo-guides)",
            name,
            f_i + 1,
            n_trainings,
            job.X.shape[1],
            len(train_ctrl),
            time.perf_counter() - t0,
            len(to_train),
            sum(p.target.is_null for p in to_train),
        )
    X_test_ctrls = [job.X[c] for c in test_ctrls]
    controls = ControlMoments.of(job.X[train_ctrl]) if to_train else ControlMoments.of(job.X[:0])
    every = max(1, min(50, len(to_train) // 10))
    block, block_of = None, {}
    for start in range(0, len(to_train), size):
        for p in to_train[start : start + size]:
            block_of[id(p.target)] = start
    current = -1
    rows: list[dict[str, Any]] = []
    for plan in plans:
        plan_rows = [_skipped_row(job, plan, m, fold) for m, (fold, _) in enumerate(training.members)]
        if plan.trainable:
            assert fold_bins is not None
            start = block_of[id(plan.target)]
            if start != current:
                block = fold_bins.block(np.concatenate([p.train for p in to_train[start : start + size]]))
                current = start
            assert block is not None
            for m, update in _score_plan(job, plan, training, block, X_test_ctrls, controls, params).items():
                plan_rows[m].update(update)
            done += 1
            if done % every == 0 or done == len(to_train):
                log.info(
                    "fold %s (%d/%d): %d/%d guides scored, %.2f guides/s",
                    name,
                    f_i + 1,
                    n_trainings,
                    done,
                    len(to_train),
                    done / max(time.perf_counter() - t0, 1e-9),
                )
        rows.extend(plan_rows)
    n_skip = sum(r["status"] == SKIPPED for r in rows)
    if n_skip:
        log.info("fold %s: %d (guide, fold) pair(s) skipped (reasons in the score table)", name, n_skip)
    return rows


def _score_scoped(
    job: _Job, targets: Sequence[GuideSamples], training: Training, f_i: int, n_trainings: int
) -> list[dict[str, Any]]:
    """The score rows of training set ``f_i`` under ``classify.control_scope``: the whole
    training set (``fold``), or each part of it on one set of its targets' plates
    (:func:`phenoica.classify._protocol.plate_trainings`), each trained and scored as a training
    set of its own (``plates``). A fold without enough controls (its training controls as its
    models train on them, at most the fast protocol's cap, and its held-out ones) is an error
    either way."""
    options = job.options
    n_train = int((training.train & job.is_control).sum())
    if options.max_train_controls is not None:
        n_train = min(n_train, options.max_train_controls)  # what training_controls keeps
    for fold_name, test in training.members:
        check_fold_controls(fold_name, n_train, int((test & job.is_control).sum()), options, job.source)
    if options.control_scope == "fold":
        return _score_training(job, targets, training, f_i, n_trainings)
    parts = plate_trainings(job.strata, training, targets)
    job.log.info(
        "training %s: classify.control_scope plates: its %d target(s) on %d set(s) of plates, each trained "
        "against the controls of its own",
        training.name,
        len(targets),
        len(parts),
    )
    rows: list[dict[str, Any]] = []
    for part, indices in parts:
        rows.extend(_score_training(job, [targets[i] for i in indices], part, f_i, n_trainings, scoped=True))
    return rows


def _sorted_scores(
    rows: list[dict[str, Any]], targets: Sequence[GuideSamples], fold_arrays: Sequence[tuple[str, Any, Any]]
) -> pd.DataFrame:
    """The score table, ordered by target, then fold."""
    out = _typed_scores(pd.DataFrame(rows))
    order = {(t.gene, t.guide): i for i, t in enumerate(targets)}
    fold_order = {name: i for i, (name, _, _) in enumerate(fold_arrays)}
    sort_key = [order[(g, s)] * len(fold_order) + fold_order[f] for g, s, f in zip(out[GENE], out[GUIDE], out["fold"])]
    return out.iloc[np.argsort(sort_key, kind="stable")].reset_index(drop=True)


def classify_guides(
    table: pd.DataFrame,
    guides: list[tuple[str, str]] | None,
    folds: Sequence[Any],
    options: ClassifyOptions,
    variant: str,
    model: str = "",
    log: logging.Logger | None = None,
    *,
    nulls: Sequence[GuideSamples] = (),
) -> pd.DataFrame:
    """Score each (guide, fold): one row per pair with exactly ``SCORE_COLUMNS``.

    ``guides`` are (gene, guide) pairs of the table's perturbations (None = all of them);
    ``nulls`` are pseudo-guides (``null_guide_design``), scored after them the same way but
    without the concentration models. ``folds`` carry positional ``train``/``test`` row
    indices. ``options`` (:class:`ClassifyOptions`) carries the settings and the
    seed. Pairs that cannot be scored get status ``skipped`` with the reason and NaN scores;
    nothing is dropped silently. Results are deterministic for a fixed seed and independent
    of which other guides are scored alongside, and of the block size (``GUIDES_PER_BLOCK``).
    """
    log = log or logging.getLogger(__name__)
    source = f"classification table ({model or 'model'}/{variant})"
    validate_profile_metadata(table, source=source)
    X, _names = feature_matrix(table, source, log)
    targets = _targets(table, guides, nulls, source)
    fold_arrays = fold_masks(folds, len(table))
    if not targets or not fold_arrays:
        return _empty_scores()
    if X.shape[1] < 2:
        raise ValueError(f"{source}: needs at least 2 non-constant feature columns, has {X.shape[1]}")
    job = _Job(
        X, control_mask(table), control_strata(table), options, options.booster_params(), model, variant, source, log
    )
    sets = trainings(folds, fold_arrays, options.max_fold_groups)
    if len(sets) < len(fold_arrays):
        log.info(
            "classify.protocol fast: %d folds trained in %d groups (classify.fast_fold_groups): %s",
            len(fold_arrays),
            len(sets),
            "; ".join(t.name for t in sets),
        )
    rows: list[dict[str, Any]] = []
    for f_i, training in enumerate(sets):
        rows.extend(_score_scoped(job, targets, training, f_i, len(sets)))
    return _sorted_scores(rows, targets, fold_arrays)


def classify_shard(
    table: pd.DataFrame,
    shard: int,
    folds: Sequence[Any],
    options: ClassifyOptions,
    variant: str,
    model: str = "",
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """Classify every guide of shard ``shard`` (of ``options.n_shards``) of the table's perturbed genes,
    the pseudo-guides ``j`` with ``j % n_shards == shard`` of the null
    (``null_guide_design(table, classify.n_null_guides, seed)``: the same draw in every shard),
    and, where the controls hold several constructs, the control constructs ``i`` with
    ``i % n_shards == shard`` (:func:`phenoica.classify.control_constructs`: scored against
    the remaining controls as a pseudo-guide is; their rows carry ``is_null_guide`` and the
    controls' gene, and the gather step moves them to the control table)."""
    n_shards = options.n_shards
    if not 0 <= shard < n_shards:
        raise ValueError(f"classify_shard: shard {shard} is not in 0..{n_shards - 1}")
    log = log or logging.getLogger(__name__)
    design = null_guide_design(table, options.n_null_guides, options.seed, log, options.null_layout)
    nulls = design[shard::n_shards] + control_constructs(table)[shard::n_shards]
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
    return classify_guides(table, guides, folds, options, variant, model, log, nulls=nulls)
