"""The component sweep: how a screen's answers move with the number of whitened components.

For one model, at every count of a grid (``sweep.points`` counts spaced in log
scale from 2 to the embedding's width, plus the count the rule chose; 0 = no sweep), the whitened variants are refitted with that
count and the screen is scored again:

- guide and gene hits at ``q < q_threshold``: the same LightGBM classifiers, folds, null
  pseudo-guides and hit calls as the main run, without the concentration models (Table 4's two
  extra models per guide, which change no AUROC), so the chosen count reproduces the main run's
  calls;
- phenotypic activity: the share of guides whose copairs mAP has ``q < q_threshold``;
- batch-classifier accuracy on the controls (balanced accuracy of a logistic regression
  predicting the batch from control well profiles; chance is 1 / batches).

What is rerun per grid point: one fit of the variants (center-scale, eigendecomposition, ICA,
random rotation) and, per variant, one classification of every guide and pseudo-guide without
concentration models, one mAP and one batch classifier; the chosen point is read from the main
run instead (:class:`MainPoint`). Every point's null holds ``sweep.null_guides`` pseudo-guides
(the first of the main run's; all of them when unset): the chosen point's calls are made again
from the main run's scores with the same ones. A point whose fit fails in linear algebra (an SVD
or eigendecomposition that does not converge, as on some real-width per-well screens) is skipped
with a warning in the log naming the count and the error; the other points stand. Each row records its seconds. The report shows the sweep
through its section :mod:`phenoica.report.sweep`.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from phenoica.biomap.batch_metrics import batch_classifier
from phenoica.classify.engine import classify_guides
from phenoica.classify.map_readout import guide_map, well_profiles
from phenoica.classify.null import NULL_GENE, null_guide_design, null_guide_name, split_control_rows
from phenoica.contract.screen import BATCH, CONTROL, GENE, GUIDE, PERT_TYPE, WELL, feature_columns
from phenoica.hits.calls import screen_calls
from phenoica.sweep.options import SweepOptions
from phenoica.transforms.fit import fit_variants
from phenoica.transforms.variant_names import component_name

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
    "seconds",
)


def sweep_grid(
    n_features: int, n_rows: int, chosen: int, max_points: int, max_components: int | None = None
) -> list[int]:
    """Counts of the sweep: ``max_points`` counts spaced evenly in log scale from 2 to the
    largest count the data allow (the width, at most rows - 2) or ``max_components`` if that is
    smaller, plus ``chosen``; sorted, unique. ``max_points`` 0 is no sweep (an empty grid)."""
    if max_points < 1:
        return []
    top = max(2, min(n_features, n_rows - 2, max_components or n_features))
    grid = {int(round(v)) for v in np.geomspace(2, top, max_points)} if max_points > 1 else {top}
    return sorted(grid | {int(chosen)})


def _batch_accuracy(table: pd.DataFrame, features: list[str], seed: int) -> tuple[float, float]:
    wells = well_profiles(table[table[PERT_TYPE].astype(str) == CONTROL])
    X = wells[features].to_numpy(dtype=np.float64)
    return batch_classifier(X, wells[BATCH].astype(str).to_numpy(), wells[WELL].astype(str).to_numpy(), seed)


@dataclass(frozen=True)
class MainPoint:
    """What the main run already computed for one variant at the chosen count: the variant's
    table (``results/variants``), its guide-fold score rows (every classify shard, concentration
    models included: they change no AUROC) and its mAP table (None when the readout is off).
    The sweep's chosen point is read from these instead of being classified again."""

    table: pd.DataFrame
    rows: pd.DataFrame
    mAP: pd.DataFrame | None = None


def score_point(
    table: pd.DataFrame, folds: Sequence[Any], options: SweepOptions, variant: str, model: str
) -> tuple[dict[str, Any], pd.DataFrame]:
    """One variant at one count: (its sweep row without model/count, its guide calls)."""
    start = time.perf_counter()
    scoring = options.scoring()  # every guide and the null's pseudo-guides, as one shard; no control constructs
    nulls = null_guide_design(table, scoring.n_null_guides, scoring.seed)
    rows = classify_guides(table, None, folds, scoring, variant, model, nulls=nulls)
    return summarize_point(MainPoint(table, rows), options, variant, model, start)


def first_null_guides(rows: pd.DataFrame, n: int, n_full: int) -> pd.DataFrame:
    """Guide-fold score rows with the null cut to its first ``n`` pseudo-guides: the real guides'
    rows and those of pseudo-guides 0 .. n - 1 of a null of ``n_full`` (pseudo-guide ``j`` and its
    classifiers are the same whatever the count: ``classify.null.null_guide_design``)."""
    keep = {null_guide_name(j, n_full) for j in range(n)}
    is_null = rows[GENE].astype(str) == NULL_GENE
    return rows[~is_null | rows[GUIDE].astype(str).isin(keep)].reset_index(drop=True)


def summarize_point(
    point: MainPoint, options: SweepOptions, variant: str, model: str, start: float
) -> tuple[dict[str, Any], pd.DataFrame]:
    """The sweep row (without model/count) and the guide calls of one variant's scored point;
    ``start`` is when its work began (``time.perf_counter``). A point without a mAP table
    (``point.mAP`` None) computes it here. The control constructs' rows that the classify shards
    hold (:func:`phenoica.classify.null.split_control_rows`) are left out."""
    with_null = options.n_null_guides > 0
    rows, _controls = split_control_rows(point.rows)  # the control constructs are not guides, nor the null
    calls = screen_calls(rows, None, options.null_model, options.q_threshold, with_null=with_null)
    guides, genes = calls["guides"], calls["genes"]
    real = guides[~guides["is_null_guide"].astype(bool)]
    mAP = point.mAP
    if mAP is None:
        mAP = guide_map(point.table, variant=variant, model=model, seed=options.seed, null_size=options.map_null_size)
    acc, chance = _batch_accuracy(point.table, feature_columns(point.table), options.seed)
    row = {
        "guide_hits": int((real["q_value"] < options.q_threshold).sum()),
        "gene_hits": int((genes["q_value"] < options.q_threshold).sum()),
        "n_guides": int(len(real)),
        "map_active_share": float((mAP["map_q_value"] < options.q_threshold).mean()) if len(mAP) else math.nan,
        "batch_accuracy": acc,
        "batch_chance": chance,
        "seconds": time.perf_counter() - start,
    }
    return row, guides


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
    """The sweep of one model's profiles (``folds`` index its rows): (the sweep table,
    ``SWEEP_COLUMNS``; every grid point's guide calls with ``n_components``). ``chosen`` is the
    count the configured rule kept (marked); ``grid`` defaults to :func:`sweep_grid`.

    ``main`` (variant -> :class:`MainPoint`) holds what the main run computed at the chosen
    count: those variants' chosen points are summarized from it, not refitted and classified
    again (the same numbers: the main run's classifiers are the sweep's, tested)."""
    log = log or LOG
    features = feature_columns(profiles)
    meta = profiles[[c for c in profiles.columns if c not in features]].reset_index(drop=True)
    X = profiles[features].to_numpy(dtype=np.float64)
    batches = profiles[BATCH].astype(str).to_numpy()
    is_control = (profiles[PERT_TYPE].astype(str) == CONTROL).to_numpy()
    counts = (
        list(grid)
        if grid is not None
        else sweep_grid(len(features), len(X), chosen, options.points, options.max_components)
    )
    records, all_calls = [], []
    main = main or {}
    for k in counts:
        start = time.perf_counter()
        todo = [v for v in options.variants if not (k == chosen and v in main)]
        try:
            fitted = {} if not todo else fit_variants(todo, X, batches, is_control, options.transforms_at(k), features)
        except np.linalg.LinAlgError as err:  # scipy's LinAlgError too: e.g. "SVD did not converge"
            log.warning(
                "sweep %s at %d components: point skipped, the variants' fit failed (%s: %s) on %d rows x %d "
                "features; the other points stand",
                model,
                k,
                type(err).__name__,
                err,
                len(X),
                len(features),
            )
            continue
        fit_seconds = time.perf_counter() - start
        for variant in options.variants:
            if variant not in todo:
                point = main[variant]
                full = int(options.n_null_guides)
                if options.point_null_guides < full:
                    point = MainPoint(
                        point.table, first_null_guides(point.rows, options.point_null_guides, full), point.mAP
                    )
                row, calls = summarize_point(point, options, variant, model, time.perf_counter())
            else:
                Z = fitted[variant].transform(X, batches, is_control).astype(np.float32)
                columns = [component_name(i) for i in range(Z.shape[1])]
                table = pd.concat([meta, pd.DataFrame(Z, columns=columns)], axis=1)
                row, calls = score_point(table, folds, options, variant, model)
                row["seconds"] += fit_seconds / len(todo)
            records.append({"model": model, "variant": variant, "n_components": int(k), "chosen": k == chosen, **row})
            all_calls.append(calls.assign(n_components=int(k)))
            log.info(
                "sweep %s/%s at %d components: %d guide hits, %d gene hits (q < %g), %.1f s",
                model,
                variant,
                k,
                row["guide_hits"],
                row["gene_hits"],
                options.q_threshold,
                row["seconds"],
            )
    return pd.DataFrame.from_records(records, columns=list(SWEEP_COLUMNS)), pd.concat(all_calls, ignore_index=True)


def chosen_count(fit_report: Mapping[str, Any]) -> int:
    """The count the configured rule kept, from a model's ``fit_report.json``."""
    for variant in ("pca", "pca_ica", "pca_rand"):
        if variant in fit_report:
            return int(fit_report[variant]["n_components"])
    raise ValueError("fit report: no whitened variant (pca, pca_ica, pca_rand) to read the component count from")
