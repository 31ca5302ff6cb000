"""The component sweep: how a screen's answers move with the number of whitened components.

For one model, at every count of a grid (``sweep.points`` counts spaced in log scale from 2 to
the embedding's width, plus the count the rule chose; 0 = no sweep), each swept variant is
refitted with that count and the screen is scored again:

- guide and gene hits at ``q < q_threshold``: the same LightGBM classifiers, folds, null
  pseudo-guides and hit calls as the main run, without the concentration models (Table 4's two
  extra models per guide, which change no AUROC), so the chosen count reproduces the main run's
  calls;
- phenotypic activity: the share of guides whose copairs mAP has ``q < q_threshold``;
- batch-classifier accuracy on the controls (balanced accuracy of a logistic regression
  predicting the batch from control well profiles; chance is 1 / batches). A screen of one
  batch has no batch to predict: the accuracy is NaN and the chance 1 (:func:`batch_accuracy`);
- replicate retrieval across batches (or plates), the field's batch-correction measure: the mean
  over guides of :func:`phenoica.classify.guide_retrieval` (NaN where nothing is retrieved across).

The sweep is split in independent parts so that it spreads over cores and cluster nodes:

- :func:`sweep_point`: one spaced count (``point`` i of :func:`spaced_counts`) of one variant,
  fitted and scored on its own (one fit of the variant: center-scale, eigendecomposition, and
  its ICA or random rotation; one classification of every guide and pseudo-guide without
  concentration models, one mAP and one batch classifier). It reads the profiles and the folds
  only, not the count the rule chose, so a change of that count reruns none of them;
- :func:`chosen_point`: the chosen count of one variant, read from what the main run computed
  (:class:`MainPoint`: its scores, mAP and replicate retrieval) instead of being computed again;
- :func:`gather_sweep`: every point's rows and the chosen rows in one table, ordered by count and
  variant. A spaced count equal to the chosen one is represented by the chosen rows (the main
  run's answers).

:func:`sweep_model` runs the same parts in one process (a notebook, the tests). Every point's
null holds ``sweep.null_guides`` pseudo-guides (the first of the main run's; all of them when
unset): the chosen point's calls are made again from the main run's scores with the same ones.
With ``sweep.max_genes`` every point scores the guides of the same seeded sample of genes
(:func:`sweep_genes`), the chosen point included (its rows of those genes in the main run's
scores): the hits and the mAP share are then of the sampled guides; the batch accuracy and the
replicate retrieval are computed on every well either way.
A point whose fit fails in linear algebra (an SVD or eigendecomposition that does not converge,
as on some real-width per-well screens) is skipped with a warning in the log naming the count
and the error; the other points stand. Each row records its seconds. The report shows the sweep
through its section :mod:`phenoica.report._sweep_section`.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from phenoica.biomap import batch_classifier
from phenoica.classify import (
    NULL_GENE,
    classify_guides,
    guide_map,
    guide_retrieval,
    guides_of,
    null_guide_count,
    null_guide_design,
    null_guide_name,
    null_layout_choice,
    split_control_rows,
    well_profiles,
)
from phenoica.contract import BATCH, CONTROL, GENE, GUIDE, PERT_TYPE, PERTURBATION, WELL, feature_columns
from phenoica.hits import screen_calls
from phenoica.sweep._options import SweepOptions
from phenoica.transforms import component_name, fit_variants
from phenoica.utils import rng_for

LOG = logging.getLogger(__name__)

#: Columns of a sweep table.
SWEEP_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    "n_components",
    "chosen",
    "guide_hits",
    "gene_hits",
    "n_guides",
    "map_active_share",
    "batch_accuracy",
    "batch_chance",
    "replicate_retrieval",
    "seconds",
)


def spaced_counts(n_features: int, n_rows: int, max_points: int, max_components: int | None = None) -> list[int]:
    """The grid's counts but the chosen one: ``max_points`` counts spaced evenly in log scale from
    2 to the largest count the data allow (the width, at most rows - 2) or ``max_components`` if
    that is smaller; sorted, unique (so at most ``max_points``: close counts round to one).
    ``max_points`` 0 is no sweep (none)."""
    if max_points < 1:
        return []
    top = max(2, min(n_features, n_rows - 2, max_components or n_features))
    return sorted({int(round(v)) for v in np.geomspace(2, top, max_points)} if max_points > 1 else {top})


def sweep_grid(
    n_features: int, n_rows: int, chosen: int, max_points: int, max_components: int | None = None
) -> list[int]:
    """Counts of the sweep: :func:`spaced_counts` plus ``chosen``; sorted, unique. ``max_points``
    0 is no sweep (an empty grid)."""
    if max_points < 1:
        return []
    return sorted(set(spaced_counts(n_features, n_rows, max_points, max_components)) | {int(chosen)})


def sweep_genes(table: pd.DataFrame, max_genes: int | None, seed: int) -> list[str] | None:
    """The perturbed genes every sweep point scores: None (every gene) when ``max_genes`` is None
    or not below the table's genes, else ``max_genes`` of them drawn with ``rng_for(seed,
    "sweep_genes")`` from the sorted genes, sorted. The same draw at every point of every variant
    (it depends on the genes and the seed only)."""
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
    genes: list[str] = sorted(table.loc[pert, GENE].astype(str).unique().tolist())
    if max_genes is None or len(genes) <= max_genes:
        return None
    picked = rng_for(seed, "sweep_genes").choice(len(genes), size=max_genes, replace=False)
    return sorted(genes[int(i)] for i in picked)


def _of_genes(table: pd.DataFrame, genes: Sequence[str]) -> pd.DataFrame:
    """The rows of ``table`` but the perturbations of genes not in ``genes`` (controls kept)."""
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
    keep = ~pert | table[GENE].astype(str).isin(list(genes)).to_numpy()
    return table[keep].reset_index(drop=True)


def batch_accuracy(table: pd.DataFrame, features: list[str], seed: int) -> tuple[float, float]:
    """(balanced accuracy of a batch classifier on the control wells' profiles, chance = 1 /
    batches). Fewer than two batches among the control wells: (NaN, 1 / batches): there is no
    batch to tell apart, and no classifier is fitted."""
    wells = well_profiles(table[table[PERT_TYPE].astype(str) == CONTROL])
    batches = wells[BATCH].astype(str).to_numpy()
    n_batches = len(np.unique(batches))
    if n_batches < 2:
        return math.nan, 1.0 / n_batches if n_batches else math.nan
    X = wells[features].to_numpy(dtype=np.float64)
    return batch_classifier(X, batches, wells[WELL].astype(str).to_numpy(), seed)


@dataclass(frozen=True)
class MainPoint:
    """What the main run already computed for one variant at the chosen count: the variant's
    table (``results/variants``), its guide-fold score rows (every classify shard, concentration
    models included: they change no AUROC), its mAP table and its replicate retrieval table
    (:func:`phenoica.classify.guide_retrieval` with the sweep's settings, written beside the mAP
    table; each None when the readout is off). The sweep's chosen point is read from these
    instead of being classified, ranked and retrieved again."""

    table: pd.DataFrame
    rows: pd.DataFrame
    mAP: pd.DataFrame | None = None
    retrieval: pd.DataFrame | None = None


def point_null_layout(table: pd.DataFrame, options: SweepOptions) -> str:
    """The layout of a point's null: the one the main run's null takes on ``table``, decided at the
    main run's ``classify.n_null_guides``, not at the point's fewer pseudo-guides, so that every
    point's null is the first of the main run's pseudo-guides, as the chosen point's is."""
    return null_layout_choice(table, options.classify.null_layout, options.classify.n_null_guides).layout


def first_null_guides(rows: pd.DataFrame, n: int, n_full: int) -> pd.DataFrame:
    """Guide-fold score rows with the null cut to its first ``n`` pseudo-guides: the real guides'
    rows and those of pseudo-guides 0 .. n - 1 of a null of ``n_full`` (pseudo-guide ``j`` and its
    classifiers are the same whatever the count: ``classify.null.null_guide_design``)."""
    keep = {null_guide_name(j, n_full) for j in range(n)}
    is_null = rows[GENE].astype(str) == NULL_GENE
    return rows[~is_null | rows[GUIDE].astype(str).isin(keep)].reset_index(drop=True)


def summarize_point(
    point: MainPoint,
    options: SweepOptions,
    variant: str,
    model: str,
    start: float,
    genes: Sequence[str] | None = None,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """The sweep row (without model/count) and the guide calls of one variant's scored point;
    ``start`` is when its work began (``time.perf_counter``). A point without a mAP table
    (``point.mAP`` None) or a retrieval table (``point.retrieval`` None) computes it here. The control constructs' rows that the classify shards
    hold (:func:`phenoica.classify.split_control_rows`) are left out. ``genes`` (None = every
    gene): the hits and the mAP of those genes' guides only (:func:`sweep_genes`); the batch
    accuracy and the replicate retrieval are of every well."""
    hits = options.hits
    rows, _controls = split_control_rows(point.rows)  # the control constructs are not guides, nor the null
    if genes is not None:
        real = ~rows["is_null_guide"].astype(bool)
        rows = rows[~real | rows[GENE].astype(str).isin(list(genes))].reset_index(drop=True)
    calls = screen_calls(rows, None, hits.null_model, hits.q_threshold, with_null=hits.with_null, seed=hits.seed)
    guides, gene_calls = calls["guides"], calls["genes"]
    real = guides[~guides["is_null_guide"].astype(bool)]
    mAP = point.mAP
    if mAP is not None and genes is not None:
        mAP = mAP[mAP[GENE].astype(str).isin(list(genes))]
    if mAP is None:
        readout = options.point_map()
        mAP = guide_map(
            point.table if genes is None else _of_genes(point.table, genes),
            variant=variant,
            model=model,
            seed=readout.seed,
            null_size=readout.map_null_size,
            max_null_size=readout.map_max_null_size,
            q_threshold=readout.q_threshold,
        )
    acc, chance = batch_accuracy(point.table, feature_columns(point.table), options.seed)
    retrieval = point.retrieval
    if retrieval is None:
        retrieval = guide_retrieval(
            point.table,
            max_guides=options.map.retrieval_max_guides,
            max_wells=options.map.retrieval_max_wells,
            seed=options.map.seed,
        )
    row = {
        "guide_hits": int((real["q_value"] < options.q_threshold).sum()),
        "gene_hits": int((gene_calls["q_value"] < options.q_threshold).sum()),
        "n_guides": int(len(real)),
        "map_active_share": float((mAP["map_q_value"] < options.q_threshold).mean()) if len(mAP) else math.nan,
        "batch_accuracy": acc,
        "batch_chance": chance,
        "replicate_retrieval": float(retrieval["retrieval"].mean()),
        "seconds": time.perf_counter() - start,
    }
    return row, guides


def _record(model: str, variant: str, count: int, chosen: bool, row: Mapping[str, Any]) -> dict[str, Any]:
    return {"model": model, "variant": variant, "n_components": int(count), "chosen": bool(chosen), **row}


def _log_row(log: logging.Logger, record: Mapping[str, Any], q_threshold: float) -> None:
    log.info(
        "sweep %s/%s at %d components: %d guide hits, %d gene hits (q < %g), %.1f s",
        record["model"],
        record["variant"],
        record["n_components"],
        record["guide_hits"],
        record["gene_hits"],
        q_threshold,
        record["seconds"],
    )
    if not np.isfinite(record["batch_accuracy"]):
        log.info(
            "sweep %s/%s at %d components: no batch accuracy (batch chance %s: %s)",
            record["model"],
            record["variant"],
            record["n_components"],
            record["batch_chance"],
            "one batch, nothing to tell apart" if record["batch_chance"] == 1 else "too few control wells per batch",
        )


def sweep_table(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Sweep rows as a table of :data:`SWEEP_COLUMNS` (none: an empty table of those columns)."""
    return pd.DataFrame.from_records(list(records), columns=list(SWEEP_COLUMNS))


def _score_count(
    profiles: pd.DataFrame,
    folds: Sequence[Any],
    model: str,
    variant: str,
    count: int,
    options: SweepOptions,
    log: logging.Logger,
    chosen: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One variant refitted on ``profiles`` at ``count`` components and the screen scored again:
    (its one-row sweep table, its guide calls with ``n_components``); both empty when the fit
    fails in linear algebra (a warning names the count and the error)."""
    start = time.perf_counter()
    features = feature_columns(profiles)
    X = profiles[features].to_numpy(dtype=np.float64)
    batches = profiles[BATCH].astype(str).to_numpy()
    is_control = (profiles[PERT_TYPE].astype(str) == CONTROL).to_numpy()
    try:
        fitted = fit_variants([variant], X, batches, is_control, options.transforms_at(count, variant), features)[
            variant
        ]
    except np.linalg.LinAlgError as err:  # scipy's LinAlgError too: e.g. "SVD did not converge"
        log.warning(
            "sweep %s/%s at %d components: point skipped, the variant's fit failed (%s: %s) on %d rows x %d "
            "features; the other points stand",
            model,
            variant,
            count,
            type(err).__name__,
            err,
            len(X),
            len(features),
        )
        return sweep_table([]), pd.DataFrame()
    Z = fitted.transform(X, batches, is_control).astype(np.float32)
    del X
    meta = profiles[[c for c in profiles.columns if c not in features]].reset_index(drop=True)
    table = pd.concat([meta, pd.DataFrame(Z, columns=[component_name(i) for i in range(Z.shape[1])])], axis=1)
    scoring = options.scoring(table)  # every guide and the null's pseudo-guides, as one shard; no control constructs
    nulls = null_guide_design(table, scoring.n_null_guides, scoring.seed, layout=point_null_layout(table, options))
    genes = sweep_genes(table, options.max_genes, options.seed)
    guides = None if genes is None else guides_of(table, genes)
    rows = classify_guides(table, guides, folds, scoring, variant, model, nulls=nulls)
    row, calls = summarize_point(MainPoint(table, rows), options, variant, model, start, genes)
    record = _record(model, variant, count, chosen, row)
    _log_row(log, record, options.q_threshold)
    return sweep_table([record]), calls.assign(n_components=int(count))


def sweep_point(
    profiles: pd.DataFrame,
    folds: Sequence[Any],
    model: str,
    variant: str,
    point: int,
    options: SweepOptions,
    log: logging.Logger | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Grid point ``point`` (an index of :func:`spaced_counts` of the profiles) of one variant:
    (its sweep row, a one-row table of :data:`SWEEP_COLUMNS` with ``chosen`` False; its guide
    calls with ``n_components``). The variant is refitted on ``profiles`` at the point's count
    and the screen scored again (``folds`` index the profiles' rows).

    Both are empty when the grid has fewer counts than ``point`` + 1 (close counts round to one)
    or when the fit fails in linear algebra (a warning names the count and the error)."""
    log = log or LOG
    counts = spaced_counts(len(feature_columns(profiles)), len(profiles), options.points, options.max_components)
    if point >= len(counts):
        log.info("sweep %s/%s: point %d is beyond the grid %s; no row", model, variant, point, counts)
        return sweep_table([]), pd.DataFrame()
    return _score_count(profiles, folds, model, variant, counts[point], options, log)


def chosen_point(
    main: MainPoint, model: str, variant: str, chosen: int, options: SweepOptions, log: logging.Logger | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The chosen count's point of one variant from what the main run computed: (its sweep row,
    ``chosen`` True; its guide calls with ``n_components``). With ``sweep.null_guides`` below the
    main run's null, the calls use the main run's first that many pseudo-guides; with
    ``sweep.max_genes``, the guides of the points' sample of genes (:func:`sweep_genes`)."""
    full, point = null_guide_count(options.classify.n_null_guides, main.table), options.point_null_guides(main.table)
    if point < full:
        main = MainPoint(main.table, first_null_guides(main.rows, point, full), main.mAP, main.retrieval)
    genes = sweep_genes(main.table, options.max_genes, options.seed)
    row, calls = summarize_point(main, options, variant, model, time.perf_counter(), genes)
    record = _record(model, variant, chosen, True, row)
    _log_row(log or LOG, record, options.q_threshold)
    return sweep_table([record]), calls.assign(n_components=int(chosen))


def gather_sweep(tables: Sequence[pd.DataFrame], variants: Sequence[str]) -> pd.DataFrame:
    """One model's sweep table from its points' rows (:func:`sweep_point`) and its chosen rows
    (:func:`chosen_point`): rows by count, then in the order of ``variants``. A point of a
    variant at its chosen count is left out: the chosen row (the main run's answers) stands for it."""
    records = [r for t in tables if len(t) for r in t.to_dict("records")]
    chosen = {(r["variant"], int(r["n_components"])) for r in records if r["chosen"]}
    records = [r for r in records if r["chosen"] or (r["variant"], int(r["n_components"])) not in chosen]
    order = {v: i for i, v in enumerate(variants)}
    records.sort(key=lambda r: (int(r["n_components"]), order[r["variant"]]))
    return sweep_table(records)


def sweep_model(
    profiles: pd.DataFrame,
    folds: Sequence[Any],
    model: str,
    chosen: int,
    options: SweepOptions,
    grid: Sequence[int] | None = None,
    log: logging.Logger | None = None,
    main: Mapping[str, MainPoint] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sweep of one model's profiles in one process (``folds`` index its rows): (the sweep
    table, :data:`SWEEP_COLUMNS`; every point's guide calls with ``n_components``), from the
    parts the workflow runs as jobs (a point per count and variant, :func:`chosen_point`,
    :func:`gather_sweep`). ``chosen`` is the count the configured rule kept (marked); ``grid``
    defaults to :func:`sweep_grid`.

    ``main`` (variant -> :class:`MainPoint`) holds what the main run computed at the chosen
    count: those variants' chosen points are summarized from it, not refitted and classified
    again (the same numbers: the main run's classifiers are the sweep's, tested)."""
    log = log or LOG
    main = main or {}
    features = feature_columns(profiles)
    counts = (
        list(grid)
        if grid is not None
        else sweep_grid(len(features), len(profiles), chosen, options.points, options.max_components)
    )
    tables, calls = [], []
    for variant in options.variants:
        for k in counts:
            if k == chosen and variant in main:
                table, point_calls = chosen_point(main[variant], model, variant, k, options, log)
            else:
                table, point_calls = _score_count(profiles, folds, model, variant, k, options, log, chosen=k == chosen)
            tables.append(table)
            calls.append(point_calls)
    found = [c for c in calls if len(c)]
    return gather_sweep(tables, options.variants), pd.concat(found, ignore_index=True) if found else pd.DataFrame()


def chosen_count(fit_report: Mapping[str, Any]) -> int:
    """The count the configured rule kept, from a model's ``fit_report.json``."""
    for variant in ("pca", "pca_ica", "pca_rand"):
        if variant in fit_report:
            return int(fit_report[variant]["n_components"])
    raise ValueError("fit report: no whitened variant (pca, pca_ica, pca_rand) to read the component count from")
