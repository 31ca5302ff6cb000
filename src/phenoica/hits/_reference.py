"""A reference other than the controls: each construct against its declared reference construct.

Variant-effect and ORF screens ask whether an allele differs from its own wild type, not from the
controls; CRISPR screens ask the same of a guide against its gene's other guides. ``screen.reference``
declares the reference of each construct (:func:`reference_pairs`): a column of the export naming
it (``{column: Metadata_Reference}``), or the rule ``named_like_gene`` (a construct's reference is
the construct of its gene named as the gene: ``ALK_Arg1275Gln`` against ``ALK``).

Each (construct, reference) pair is compared by both readouts (:func:`reference_scores`):

- **the classifier**: per fold of the run's splits (held out by batch under leave-one-batch-out),
  LightGBM with the classify settings separates the construct's rows (1) from the reference's (0)
  on the training rows, and is scored by AUROC on the held-out rows; a fold is skipped when either
  side has fewer than ``classify.min_train_samples`` training or ``classify.min_test_samples``
  held-out rows (the guides' rule, applied to both sides). ``auroc`` is the mean over scored folds;
- **the mAP** (:func:`phenoica.classify.reference_map`): copairs' mean average
  precision of the construct's wells against the reference's wells as negatives.

The null is built like the real contrast (:func:`null_contrasts`): control wells at other
positions, set against each other with the real pairs' layout. Where a control construct holds
positions enough for both sides, a contrast is one control construct against itself at other
positions (alike by construction, as an allele and its wild type are under the null hypothesis:
VarChAMP's null); otherwise one control construct against another, at their positions. Each
readout's p-value is the construct's rank among the null contrasts, ``(1 + #{null >= x}) / (n +
1)``, and its q-value Benjamini-Hochberg over the pairs of one (model, variant). Beside each pair,
the features whose means differ most between construct and reference (in SDs of the control
wells, each plate's control centre taken out first).
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from phenoica.classify import (
    AUTO_NULL_MIN,
    LIGHTGBM_MIN_DATA_IN_LEAF,
    centered_on_plate_controls,
    control_mask,
    control_positions,
    feature_matrix,
    fold_masks,
    reference_map,
)
from phenoica.contract import GENE, GUIDE, PERT_TYPE, PERTURBATION, PLATE, WELL, ScreenError
from phenoica.hits._options import ReferenceOptions
from phenoica.hits._tail import TAIL_P_FLOOR, fit_tail, leave_one_out_pareto, pareto_p_values
from phenoica.utils import bh_qvalues, derive_seed, rng_for, write_parquet

#: The rules ``screen.reference.rule`` may name.
REFERENCE_RULES: tuple[str, ...] = ("named_like_gene",)
#: The gene of the null contrasts' rows.
NULL_CONTRAST = "null contrast"
#: How many features a pair's row names.
TOP_FEATURES = 5
REFERENCE_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    GENE,
    GUIDE,
    "reference",
    "n_wells",
    "n_reference_wells",
    "n_folds_ok",
    "n_folds_no_split",
    "auroc",
    "auroc_p_value",
    "auroc_q_value",
    "auroc_hit",
    "mean_average_precision",
    "map_p_value",
    "map_q_value",
    "map_hit",
    "n_null",
    "auroc_p_floor",
    "auroc_null_loo_ks_p",
    "map_p_floor",
    "map_null_loo_ks_p",
    "differing_features",
)


@dataclass(frozen=True)
class Contrast:
    """One comparison: the rows of one side (``rows``, label 1) against the other
    (``reference_rows``, label 0); a real pair names its construct and reference, a null contrast
    its two control well sets (``gene`` :data:`NULL_CONTRAST`)."""

    gene: str
    guide: str
    reference: str
    rows: np.ndarray
    reference_rows: np.ndarray

    @property
    def is_null(self) -> bool:
        return self.gene == NULL_CONTRAST


def reference_pairs(table: pd.DataFrame, spec: Mapping[str, str]) -> pd.DataFrame:
    """The (gene, guide, reference) pairs ``screen.reference`` declares on ``table``, sorted.

    ``{"column": name}``: each perturbation construct whose rows hold a value in column ``name``
    (surrounding whitespace removed) is compared with the construct of that name. ``{"rule":
    "named_like_gene"}``: each perturbation construct of a gene that has a construct named as the
    gene is compared with it. A construct is never its own reference. Raises ScreenError naming
    the column, the construct and the value when the column is absent, holds two references for
    one construct, or names a construct the table lacks."""
    pert = table[PERT_TYPE].astype(str).to_numpy() == PERTURBATION
    constructs = table[[GENE, GUIDE]].astype(str).drop_duplicates()
    names = set(constructs[GUIDE])
    if "column" in spec:
        column = spec["column"]
        if column not in table.columns:
            raise ScreenError(
                f"screen.reference: column {column!r} is not a column of the profiles (after screen.columns)"
            )
        sub = table.loc[pert, [GENE, GUIDE, column]].astype(str)
        sub[column] = sub[column].str.strip().replace({"nan": "", "None": "", "<NA>": ""})
        sub = sub[sub[column] != ""].drop_duplicates()
        twice = sub[sub.duplicated([GENE, GUIDE], keep=False)]
        if len(twice):
            raise ScreenError(
                f"screen.reference: construct {twice[GUIDE].iloc[0]!r} has several references in column {column!r}: "
                f"{sorted(twice[column].unique())[:5]}; expected one per construct"
            )
        missing = sub[~sub[column].isin(names)]
        if len(missing):
            raise ScreenError(
                f"screen.reference: column {column!r} names {missing[column].iloc[0]!r} as the reference of "
                f"{missing[GUIDE].iloc[0]!r}, and no construct of the table ({GUIDE}) is named so"
            )
        pairs = sub.rename(columns={column: "reference"})
    elif spec.get("rule") == "named_like_gene":
        genes = set(constructs.loc[constructs[GENE] == constructs[GUIDE], GENE])
        sub = table.loc[pert, [GENE, GUIDE]].astype(str).drop_duplicates()
        pairs = sub[sub[GENE].isin(genes)].assign(reference=lambda d: d[GENE])
    else:
        raise ScreenError(
            f"screen.reference: expected {{column: ...}} or {{rule: one of {REFERENCE_RULES}}}, got {dict(spec)}"
        )
    pairs = pairs[pairs[GUIDE] != pairs["reference"]]
    return pairs[[GENE, GUIDE, "reference"]].sort_values([GENE, GUIDE]).reset_index(drop=True)


def _layout(table: pd.DataFrame, rows: np.ndarray) -> tuple[int, tuple[str, ...]]:
    """(distinct positions, sorted plates) of ``rows``."""
    sub = table.iloc[rows]
    return int(sub[WELL].astype(str).nunique()), tuple(sorted(set(sub[PLATE].astype(str))))


def null_contrasts(table: pd.DataFrame, pairs: Sequence[Contrast], n: int, seed: int) -> list[Contrast]:
    """Up to ``n`` distinct null contrasts of control wells at other positions (module doc), each
    copying a real pair drawn at random: its two sides' numbers of positions and their plates. A
    contrast is one control construct at some of its positions against the same construct at
    others where it holds enough positions for both sides, and one construct against another
    otherwise. Seeds: ``derive_seed(seed, "reference_null", j)`` for the ``j``-th draw."""
    if not pairs or n <= 0 or WELL not in table.columns:
        return []
    positions = control_positions(table)
    constructs = sorted(positions)
    is_control = control_mask(table)
    key = (table[GENE].astype(str) + "\x1f" + table[GUIDE].astype(str) + "\x1f" + table[WELL].astype(str)).to_numpy()
    plate = table[PLATE].astype(str).to_numpy()
    rows_at = pd.Series(np.flatnonzero(is_control)).groupby(key[is_control]).indices
    index = np.flatnonzero(is_control)
    layouts = [(_layout(table, p.rows), _layout(table, p.reference_rows)) for p in pairs]
    seen: set[tuple[Any, ...]] = set()
    out: list[Contrast] = []
    for draw in range(max(20 * n, 200)):
        if len(out) >= n:
            break
        rng = rng_for(seed, "reference_null", draw)
        (m_a, plates_a), (m_r, plates_r) = layouts[int(rng.integers(len(layouts)))]
        same = [c for c in constructs if len(positions[c]) >= m_a + m_r]
        if same:
            c_a = c_r = same[int(rng.integers(len(same)))]
            chosen = rng.choice(positions[c_a], size=m_a + m_r, replace=False).tolist()
            side_a, side_r = tuple(sorted(chosen[:m_a])), tuple(sorted(chosen[m_a:]))
        else:
            fit_a = [c for c in constructs if len(positions[c]) >= m_a]
            fit_r = [c for c in constructs if len(positions[c]) >= m_r]
            if not fit_a or len(set(fit_a) | set(fit_r)) < 2:
                return out
            c_a = fit_a[int(rng.integers(len(fit_a)))]
            fit_r = [c for c in fit_r if c != c_a]
            if not fit_r:
                continue
            c_r = fit_r[int(rng.integers(len(fit_r)))]
            side_a = tuple(sorted(rng.choice(positions[c_a], size=m_a, replace=False).tolist()))
            side_r = tuple(sorted(rng.choice(positions[c_r], size=m_r, replace=False).tolist()))
        ident = (c_a, side_a, c_r, side_r)
        if ident in seen:
            continue
        rows_a = _rows_at(rows_at, index, plate, c_a, side_a, plates_a)
        rows_r = _rows_at(rows_at, index, plate, c_r, side_r, plates_r)
        if not len(rows_a) or not len(rows_r):
            continue
        seen.add(ident)
        name = f"{c_a.split(chr(31))[1]}@{'+'.join(side_a)}"
        out.append(Contrast(NULL_CONTRAST, name, f"{c_r.split(chr(31))[1]}@{'+'.join(side_r)}", rows_a, rows_r))
    return out


def _rows_at(
    rows_at: Any, index: np.ndarray, plate: np.ndarray, construct: str, wells: Sequence[str], plates: Sequence[str]
) -> np.ndarray:
    """The control rows of ``construct`` at ``wells`` on ``plates``."""
    found = [index[rows_at[f"{construct}\x1f{w}"]] for w in wells if f"{construct}\x1f{w}" in rows_at]
    rows = np.sort(np.concatenate(found)) if found else np.empty(0, dtype=np.int64)
    return rows[np.isin(plate[rows], list(plates))]


def pair_contrasts(table: pd.DataFrame, pairs: pd.DataFrame) -> list[Contrast]:
    """The real pairs of ``pairs`` as contrasts of the table's rows (a construct's perturbation
    rows against its reference's rows, whatever the reference's role)."""
    key = (table[GENE].astype(str) + "\x1f" + table[GUIDE].astype(str)).to_numpy()
    guide_rows = pd.Series(np.arange(len(table))).groupby(table[GUIDE].astype(str).to_numpy()).indices
    by_key = pd.Series(np.arange(len(table))).groupby(key).indices
    return [
        Contrast(g, s, r, np.sort(by_key[f"{g}\x1f{s}"]), np.sort(guide_rows[r]))
        for g, s, r in pairs[[GENE, GUIDE, "reference"]].itertuples(index=False)
    ]


def small_sample_params(params: Mapping[str, Any], n_side: int) -> dict[str, Any]:
    """``params`` for a training set whose smaller side has ``n_side`` rows (docs/hit-calling.md,
    *A reference other than the controls*): ``min_data_in_leaf`` the smaller of its setting and
    ``n_side``, ``lambda_l1`` and ``lambda_l2`` times ``min(1, n_side / 20)``; unchanged from 20
    rows a side on."""
    out = dict(params)
    share = min(1.0, n_side / LIGHTGBM_MIN_DATA_IN_LEAF)
    out["min_data_in_leaf"] = max(1, min(int(params.get("min_data_in_leaf", LIGHTGBM_MIN_DATA_IN_LEAF)), n_side))
    for key in ("lambda_l1", "lambda_l2"):
        if key in out:
            out[key] = float(out[key]) * share
    return out


def contrast_auroc(
    X: np.ndarray, contrast: Contrast, folds: Sequence[tuple[str, np.ndarray, np.ndarray]], options: ReferenceOptions
) -> tuple[float, int, int]:
    """(mean held-out AUROC over the folds whose model split, those folds, the folds whose model made
    no split) of one contrast (module doc), each fold's model trained with
    :func:`small_sample_params` and seeded ``derive_seed(seed, "reference", gene, guide,
    reference, fold)``. A model without a split predicts one value and answers nothing: it is
    counted, not scored (NaN AUROC when no fold split). The model is fitted and scored as a guide's
    (:func:`phenoica.classify.score_guide_on`, without the concentration models)."""
    from phenoica.classify import columns_dataset, score_guide_on  # imports lightgbm: only here

    classify = options.classify
    params = classify.booster_params()
    aucs, no_split = [], 0
    for name, train, test in folds:
        a_train, r_train = contrast.rows[train[contrast.rows]], contrast.reference_rows[train[contrast.reference_rows]]
        a_test, r_test = contrast.rows[test[contrast.rows]], contrast.reference_rows[test[contrast.reference_rows]]
        lo, lo_test = classify.min_train_samples, classify.min_test_samples
        if min(len(a_train), len(r_train)) < lo or min(len(a_test), len(r_test)) < lo_test:
            continue
        rows = np.concatenate([a_train, r_train])
        y = np.r_[np.ones(len(a_train)), np.zeros(len(r_train))]
        fold_params = {
            **small_sample_params(params, min(len(a_train), len(r_train))),
            "seed": derive_seed(classify.seed, "reference", contrast.gene, contrast.guide, contrast.reference, name),
        }
        held = np.concatenate([a_test, r_test])
        held_out = (X[held], np.r_[np.ones(len(a_test)), np.zeros(len(r_test))])
        training = functools.partial(columns_dataset, X[rows], y)
        score = score_guide_on(training, [held_out], fold_params, classify.num_boost_round, None)[0]
        if not score.split:
            no_split += 1  # a model without a split predicts one value: no answer, not an AUROC of 0.5
            continue
        aucs.append(score.auroc)
    return (float(np.mean(aucs)) if aucs else math.nan), len(aucs), no_split


def differing_features(
    X: np.ndarray, names: Sequence[str], contrast: Contrast, scale: np.ndarray, k: int = TOP_FEATURES
) -> str:
    """The ``k`` features whose means differ most between the contrast's sides, in SDs ``scale``,
    as ``name (+d SD)`` joined with ``, ``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        d = (X[contrast.rows].mean(axis=0) - X[contrast.reference_rows].mean(axis=0)) / scale
    d = np.where(np.isfinite(d), d, 0.0)
    top = np.argsort(-np.abs(d), kind="stable")[:k]
    return ", ".join(f"{names[j]} ({d[j]:+.1f} SD)" for j in top)


def empirical_p(values: np.ndarray, null: np.ndarray) -> np.ndarray:
    """``(1 + #{null >= x}) / (n + 1)`` of each finite ``x`` against the finite null values (NaN
    without either)."""
    null = np.sort(null[np.isfinite(null)])
    out = np.full(len(values), math.nan)
    if not null.size:
        return out
    ok = np.isfinite(values)
    above = null.size - np.searchsorted(null, values[ok] - 1e-12, side="left")
    out[ok] = (1 + above) / (null.size + 1)
    return out


def reference_p(values: np.ndarray, null: np.ndarray, seed: int) -> tuple[np.ndarray, float, float]:
    """p-values of ``values`` (AUROCs or mAPs, in [0, 1]) against the null contrasts' ``null`` by
    the classifier null's rule (``hits.null_model: pareto``, :mod:`phenoica.hits._tail`, on their
    logits): the empirical p-value where 10 or more null contrasts lie at or above, a Pareto tail
    fitted to their upper exceedances beyond that where the goodness-of-fit test accepts one (40
    null contrasts or more), the empirical p-value bounded at ``1 / (n + 1)`` otherwise. Returns the
    p-values, the smallest reported (the floor) and the Kolmogorov-Smirnov p of the null contrasts'
    own leave-one-out p-values against U(0, 1) (NaN below 4 null contrasts), those p-values
    randomized within ties (seeded by ``seed``): a null of few distinct values (AUROCs of a few
    wells a side) is then tested for its calibration, not for its ties."""
    finite = np.sort(null[np.isfinite(null)])
    if not finite.size:
        return empirical_p(values, finite), math.nan, math.nan
    z = np.log(np.clip(finite, 1e-6, 1 - 1e-6)) - np.log1p(-np.clip(finite, 1e-6, 1 - 1e-6))
    tail = fit_tail(z, seed)
    floor = TAIL_P_FLOOR if tail is not None else 1.0 / (finite.size + 1)
    loo = leave_one_out_pareto(z, tail, rng_for(seed, "reference_null_loo", finite.size))
    ks = float(stats.kstest(loo, "uniform").pvalue) if finite.size >= 4 else math.nan
    if tail is None:
        return empirical_p(values, finite), floor, ks
    out = np.full(len(values), math.nan)
    ok = np.isfinite(values)
    x = np.clip(values[ok], 1e-6, 1 - 1e-6)
    out[ok] = np.maximum(pareto_p_values(z, np.log(x) - np.log1p(-x), tail), floor)
    return out, floor, ks


def null_size(n_pairs: int, n_null_guides: int | str, q_threshold: float) -> int:
    """How many null contrasts to draw at most for ``n_pairs`` pairs: ``n_null_guides`` (under
    ``auto`` its floor :data:`phenoica.classify.AUTO_NULL_MIN`: a tenth of the pairs never exceeds
    the reach below), or more where that many leave a lone pair above every null contrast short of
    Benjamini-Hochberg's cut at ``q_threshold`` (its bounded p-value ``1 / (n + 1)`` at most
    ``q / (2 m)``); none where ``n_null_guides`` is 0 (no null asked for)."""
    n = AUTO_NULL_MIN if n_null_guides == "auto" else int(n_null_guides)
    if n <= 0:
        return 0
    return max(n, math.ceil(2 * n_pairs / q_threshold))


def reference_scores(
    table: pd.DataFrame,
    folds: Sequence[Any],
    options: ReferenceOptions,
    *,
    model: str,
    variant: str,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """Every pair ``options.reference`` declares on ``table`` (one variant's profile table) against
    its reference, by both readouts, with p- and q-values against the null contrasts (module doc):
    the classifiers' settings, the seed, :func:`null_size` null contrasts at most and the calls'
    ``q_threshold`` are ``options``'. Returns :data:`REFERENCE_COLUMNS`."""
    log = log or logging.getLogger(__name__)
    source = f"reference readout ({model}/{variant})"
    spec = options.reference or {}
    pairs = reference_pairs(table, spec)
    if pairs.empty:
        log.warning("%s: screen.reference %s declares no pair on this screen", source, dict(spec))
        return pd.DataFrame({c: [] for c in REFERENCE_COLUMNS})
    X, names = feature_matrix(table, source, log)
    real = pair_contrasts(table, pairs)
    n_null = null_size(len(real), options.classify.n_null_guides, options.q_threshold)
    nulls = null_contrasts(table, real, n_null, options.classify.seed)
    log.info("%s: %d pair(s), %d null contrast(s)", source, len(real), len(nulls))
    fold_arrays = fold_masks(folds, len(table))
    scored = [contrast_auroc(X, c, fold_arrays, options) for c in real + nulls]
    maps = reference_map(table, real + nulls, X, log)
    is_control = control_mask(table)
    centred = centered_on_plate_controls(X, table[PLATE].astype(str).to_numpy(), is_control)
    scale = centred[is_control].std(axis=0, ddof=1) if is_control.sum() > 1 else np.ones(X.shape[1])
    rows = []
    for contrast, (auc, n_ok, n_flat), average in zip(real + nulls, scored, maps):
        rows.append(
            {
                "model": model,
                "variant": variant,
                GENE: contrast.gene,
                GUIDE: contrast.guide,
                "reference": contrast.reference,
                "n_wells": _n_wells(table, contrast.rows),
                "n_reference_wells": _n_wells(table, contrast.reference_rows),
                "n_folds_ok": n_ok,
                "n_folds_no_split": n_flat,
                "auroc": auc,
                "mean_average_precision": average,
                "is_null": contrast.is_null,
                "differing_features": differing_features(centred, names, contrast, scale),
            }  # fmt: skip
        )
    df = pd.DataFrame(rows)
    null = df[df["is_null"]]
    out = df[~df["is_null"]].drop(columns="is_null").reset_index(drop=True)
    out["n_null"] = len(null)
    for readout, column in (("auroc", "auroc"), ("map", "mean_average_precision")):
        p, floor, ks = reference_p(
            out[column].to_numpy(dtype=float), null[column].to_numpy(dtype=float), options.classify.seed
        )
        out[f"{readout}_p_floor"], out[f"{readout}_null_loo_ks_p"] = floor, ks
        q = bh_qvalues(p)
        out[f"{readout}_p_value"], out[f"{readout}_q_value"] = p, q
        out[f"{readout}_hit"] = np.where(np.isfinite(q), q < options.q_threshold, False).astype(bool)
    if len(null) and null["auroc"].notna().sum() == 0 and out["auroc"].notna().any():
        log.warning("%s: no null contrast could be scored by the classifier; its p-values are NaN", source)
    return out[list(REFERENCE_COLUMNS)]


def _n_wells(table: pd.DataFrame, rows: np.ndarray) -> int:
    sub = table.iloc[rows]
    return int(len(sub.drop_duplicates([PLATE, WELL]))) if WELL in table.columns else len(rows)


def reference_files(
    tables: Mapping[tuple[str, str], Path | str],
    folds: Mapping[str, Path | str],
    out_path: Path | str,
    options: ReferenceOptions,
    log: logging.Logger | None = None,
) -> pd.DataFrame:
    """:func:`reference_scores` of every (model, variant) table (``tables``; folds per model) in
    one table, written to ``out_path`` (atomically)."""
    from phenoica.classify import read_folds

    parts = []
    for (model, variant), path in tables.items():
        table = pd.read_parquet(path)
        folds_of = read_folds(folds[model], table)
        parts.append(reference_scores(table, folds_of, options, model=model, variant=variant, log=log))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({c: [] for c in REFERENCE_COLUMNS})
    write_parquet(out, out_path)
    return out
