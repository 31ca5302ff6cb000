"""The controls checked as a null: each control construct scored against the remaining controls.

Hit calls compare guides with the control wells, as if the controls were one homogeneous null.
Where the controls hold several constructs (non-targeting guides, control ORFs, empty vectors),
that is an assumption that can be checked: each construct is classified against the other
controls exactly as a guide is (:func:`phenoica.classify.control_constructs`), and its
held-out AUROC gets a p-value against the same pseudo-guide null as the guides. A control
construct that is itself called a hit means the controls are not one homogeneous null: the
guides' calls then mix their own phenotype with that construct's difference from the rest, and
hit rates read higher than they are. :func:`separating_features` names the features that
separate each construct from the other controls, for a biologist to judge.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from phenoica.contract import BATCH, CONTROL, GENE, GUIDE, OK, PERT_TYPE, ScreenError, feature_columns
from phenoica.hits._calls import bounded, null_fit_for
from phenoica.hits._effects import DISTANCE_COLUMNS, guide_distances
from phenoica.utils import bh_qvalues

CONTROL_CALL_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    GENE,
    GUIDE,
    "n_folds_ok",
    "auroc",
    *DISTANCE_COLUMNS,
    "p_value",
    "p_beyond_null",
    "p_tail",
    "q_value",
    "hit",
    "separating_features",
)
#: How many features :func:`separating_features` names per construct.
TOP_FEATURES = 5


def control_calls(
    control_rows: pd.DataFrame,
    guides: pd.DataFrame,
    null_model: str,
    q_threshold: float,
    separating: dict[tuple[str, str, str], str] | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Per (model, variant, control construct): mean held-out AUROC over its scored folds, its
    held-out distance from the other controls (:func:`phenoica.hits._effects.guide_distances`), its
    p-value against the pseudo-guides of ``guides`` (the guide table with ``is_null_guide``;
    reported as the guides' are: ``p_value`` bounded at the null's ``p_floor``, ``p_beyond_null``,
    ``p_tail``), the Benjamini-Hochberg q-value of ``p_value`` over the constructs of that (model,
    variant), the call (q < ``q_threshold``) and ``separating`` ((model, gene, guide) -> text) when
    given (``seed``: the null's, :class:`phenoica.hits.NullFit`). A (model, variant) without a null
    keeps AUROCs and gets no p-values."""
    separating = separating or {}
    if control_rows.empty:
        return pd.DataFrame({c: [] for c in CONTROL_CALL_COLUMNS})
    ok = control_rows[control_rows["status"] == OK]
    keys = ["model", "variant", GENE, GUIDE]
    per = control_rows[keys].drop_duplicates().sort_values(keys).reset_index(drop=True)
    stats = ok.groupby(keys)["auroc"].agg(["size", "mean"]).reset_index()
    per = per.merge(stats, on=keys, how="left")
    per["n_folds_ok"] = per["size"].fillna(0).astype(np.int64)
    per["auroc"] = per["mean"].astype(float)
    distances = guide_distances(ok.assign(is_null_guide=True)).drop(columns="is_null_guide")
    per = per.merge(distances, on=keys, how="left")
    per["p_value"] = math.nan
    per["p_beyond_null"] = False
    per["p_tail"] = math.nan
    per["q_value"] = math.nan
    for (model, variant), idx in per.groupby(["model", "variant"]).indices.items():
        try:
            fit = null_fit_for(guides, model, variant, null_model, seed)
        except ScreenError:
            continue
        p = fit.p_values(per["auroc"].to_numpy(dtype=float)[idx])
        reported, beyond = bounded(p, fit.p_floor)
        rows = per.index[idx]
        per.loc[rows, "p_value"], per.loc[rows, "p_beyond_null"], per.loc[rows, "p_tail"] = reported, beyond, p
        per.loc[rows, "q_value"] = bh_qvalues(reported)
    q = per["q_value"].to_numpy(dtype=float)
    per["hit"] = np.where(np.isfinite(q), q < q_threshold, False).astype(bool)
    per["separating_features"] = [separating.get((m, g, s), "") for m, g, s in zip(per["model"], per[GENE], per[GUIDE])]
    return per[list(CONTROL_CALL_COLUMNS)]


def separating_features(
    controls: pd.DataFrame, features: list[str], k: int = TOP_FEATURES
) -> dict[tuple[str, str], str]:
    """Per control construct (gene, guide): the ``k`` features whose means differ most between
    its rows and the other controls', in SDs of the other controls (each batch's control mean
    taken out first, so batch offsets do not count), as ``name (+d)`` joined with ``, ``.
    ``controls`` holds the control rows of one model's profile table."""
    if controls.empty or not features:
        return {}
    X = controls[features].to_numpy(dtype=np.float64)
    batch = controls[BATCH].astype(str).to_numpy() if BATCH in controls.columns else np.zeros(len(X), dtype=str)
    for b in np.unique(batch):
        X[batch == b] -= X[batch == b].mean(axis=0)
    key = controls[GENE].astype(str) + "\x1f" + controls[GUIDE].astype(str)
    out = {}
    for name, rows in key.groupby(key, sort=True).indices.items():
        own = np.zeros(len(X), dtype=bool)
        own[rows] = True
        if own.all():
            continue
        sd = X[~own].std(axis=0, ddof=1) if (~own).sum() > 1 else np.ones(X.shape[1])
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where(sd > 0, (X[own].mean(axis=0) - X[~own].mean(axis=0)) / sd, 0.0)
        top = np.argsort(-np.abs(d), kind="stable")[:k]
        gene, guide = name.split("\x1f")
        out[(gene, guide)] = ", ".join(f"{features[j]} ({d[j]:+.1f} SD)" for j in top)
    return out


def separating_by_model(control_rows: pd.DataFrame, profiles: dict[str, str]) -> dict[tuple[str, str, str], str]:
    """:func:`separating_features` of every model that has control-construct rows, from the
    control rows of its profile table (``profiles``: model -> parquet path; only those rows are
    read), keyed by (model, gene, guide)."""
    out: dict[tuple[str, str, str], str] = {}
    for model in sorted(set(control_rows["model"].astype(str))) if len(control_rows) else []:
        table = pd.read_parquet(profiles[model], filters=[(PERT_TYPE, "==", CONTROL)])
        for (gene, guide), text in separating_features(table, feature_columns(table)).items():
            out[(model, gene, guide)] = text
    return out
