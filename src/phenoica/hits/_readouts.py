"""The hit table: each real guide's calls by every registered readout
(:func:`phenoica.classify.registered_readouts`: the classifier's, against its null, and the mAP
readout's), their agreement and what a (model, variant) could not call."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy import stats

from phenoica.classify import GUIDE_KEYS, Readout, ReadoutInputs, registered_readouts
from phenoica.contract import GENE, GUIDE
from phenoica.hits._calls import KEYS
from phenoica.hits._effects import ranked


def agreement_classes(readouts: tuple[Readout, ...]) -> tuple[str, ...]:
    """The values of the hit table's ``agreement``: which of ``readouts`` call a guide, largest
    sets first. Every readout: ``both`` (two readouts) or ``all``; one: ``NAME_only``; some: their
    names joined by ``+``; none: ``neither``."""
    names = [r.name for r in readouts]
    out = []
    for size in range(len(names), 0, -1):
        for subset in itertools.combinations(names, size):
            out.append(_agreement_name(subset, len(names)))
    return (*out, "neither")


def _agreement_name(callers: tuple[str, ...], n_readouts: int) -> str:
    if not callers:
        return "neither"
    if len(callers) == n_readouts and n_readouts > 1:
        return "both" if n_readouts == 2 else "all"
    if len(callers) == 1:
        return f"{callers[0]}_only"
    return "+".join(callers)


def hit_table(inputs: ReadoutInputs) -> pd.DataFrame:
    """One row per real guide: each registered readout's columns (:attr:`Readout.columns`: for the
    classifier AUROC, distance from the controls with its interval, p, q, call; for the mAP readout
    ``mean_average_precision``, ``map_p_value``, ``map_q_value`` and ``map_hit``) and the calls'
    ``agreement`` (:func:`agreement_classes`), ranked by effect size.

    The first readout's table (the classifier's) gives the rows; a readout that did not run, or did
    not score a guide, leaves NaN and no call (its ``hit`` is its q-value below
    ``inputs.q_threshold`` where its table does not carry it). ``rank`` and ``ranked_by``:
    :func:`phenoica.hits._effects.ranked` (the held-out distance, or the mAP where the mAP readout
    scored more guides), rows in that order.
    """
    readouts = registered_readouts()
    first, others = readouts[0], readouts[1:]
    key = list(GUIDE_KEYS)
    out = first.guide_table(inputs)
    if out is None:
        raise ValueError(f"hit_table: the {first.name} readout, whose guides are the table's rows, has no table")
    out = out.copy()
    for readout in others:
        table = readout.guide_table(inputs)
        given = [c for c in readout.columns if c != readout.hit]
        if table is not None and len(table):
            out = out.merge(table[key + given], on=key, how="left", validate="one_to_one")
            q = out[readout.q_value].to_numpy(dtype=float)
            out[readout.hit] = np.where(np.isfinite(q), q < inputs.q_threshold, False).astype(bool)
        else:
            for c in given:
                out[c] = math.nan
            out[readout.hit] = False
    calls = np.column_stack([out[r.hit].astype(bool).to_numpy() for r in readouts])
    names = [r.name for r in readouts]
    out["agreement"] = [_agreement_name(tuple(n for n, c in zip(names, row) if c), len(names)) for row in calls]
    out = ranked(out, [GENE, GUIDE])
    return out[["model", "variant", "rank", *[c for c in out.columns if c not in ("model", "variant", "rank")]]]


def readout_agreement(hits: pd.DataFrame) -> pd.DataFrame:
    """Per (model, variant): counts of each ``agreement`` class (:func:`agreement_classes`) and,
    per pair of readouts, Cohen's kappa of their calls and the Spearman correlation of their
    statistics over the guides both scored (``kappa`` and ``spearman_auroc_map`` where two
    readouts are registered; ``kappa_A_B`` and ``spearman_A_B`` per pair where more are)."""
    readouts = registered_readouts()
    classes = agreement_classes(readouts)
    pairs = list(itertools.combinations(readouts, 2))
    pair_columns = [_pair_columns(a, b, len(pairs)) for a, b in pairs]
    rows = []
    for (model, variant), sub in hits.groupby(list(KEYS), sort=True):
        counts = sub["agreement"].value_counts()
        row: dict[str, object] = {"model": model, "variant": variant, "n_guides": len(sub)}
        row.update({c: int(counts.get(c, 0)) for c in classes})
        for (a, b), (kappa, rho) in zip(pairs, pair_columns):
            row[kappa] = _kappa(sub[a.hit].astype(bool).to_numpy(), sub[b.hit].astype(bool).to_numpy())
            row[rho] = _spearman(sub[a.statistic], sub[b.statistic])
        rows.append(row)
    columns = ["model", "variant", "n_guides", *classes, *[c for pair in pair_columns for c in pair]]
    return pd.DataFrame(rows, columns=columns)


def _pair_columns(a: Readout, b: Readout, n_pairs: int) -> tuple[str, str]:
    """The agreement table's kappa and Spearman columns of readouts ``a`` and ``b``."""
    kappa = "kappa" if n_pairs == 1 else f"kappa_{a.short}_{b.short}"
    return kappa, f"spearman_{a.short}_{b.short}"


def _spearman(x: pd.Series, y: pd.Series) -> float:
    """Spearman's rho of two statistics over the guides both scored (NaN under 3 or without spread)."""
    both = np.isfinite(x.to_numpy(dtype=float)) & np.isfinite(y.to_numpy(dtype=float))
    xs, ys = x[both], y[both]
    if both.sum() < 3 or xs.nunique() < 2 or ys.nunique() < 2:
        return math.nan
    return float(stats.spearmanr(xs, ys).statistic)


def _kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's kappa of two boolean calls (NaN when chance agreement is total)."""
    if not a.size:
        return math.nan
    po = float(np.mean(a == b))
    pe = float(a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean()))
    return (po - pe) / (1 - pe) if pe < 1 else math.nan


def readout_notes(hits: pd.DataFrame, null: pd.DataFrame, with_null: bool, ran: frozenset[str]) -> np.ndarray:
    """Per hit-table row: what its (model, variant) could not call, empty when every readout that
    ran (``ran``: their names) called: the classifier without a null (``with_null`` False, or the
    null table's reason), and any readout that scored no guide there (:attr:`Readout.scored_when`)."""
    no_calls = {}
    if not with_null:
        no_calls = {k: "classify.n_null_guides is 0" for k in hits.groupby(list(KEYS)).groups}
    else:
        for row in null.itertuples(index=False):
            if not bool(row.calls):
                no_calls[(row.model, row.variant)] = str(row.reason)
    readouts = registered_readouts()
    unscored = {
        r.name: hits.groupby(list(KEYS))[r.statistic].apply(lambda s: bool(np.isfinite(s).any()))
        for r in readouts[1:]
        if r.name in ran
    }
    notes = []
    for key in zip(hits["model"], hits["variant"]):
        parts = []
        if key in no_calls:
            parts.append(f"{readouts[0].label}: no hit calls ({no_calls[key]})")
        for r in readouts[1:]:
            if r.name in unscored and not unscored[r.name].get(key, False):
                parts.append(f"{r.label}: no guide scored ({r.scored_when})")
        notes.append("; ".join(parts))
    return np.asarray(notes, dtype=object)
