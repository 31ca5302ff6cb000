"""Scores of representations, as Nelson et al. (ICLR 2026) and the works they cite define them.

The scores of classifiers (``auroc``, ``split_fractions``, ``sparsity``, ``concentration``,
``top_features``) are :mod:`phenoica.utils`'s, below every stage that trains one.

Structural identifiability (Nelson et al. 2026 "Table 2"; the DAG's ``structural`` branch and the
disentangle study): how well latents recover known generative factors.

- ``mcc``: mean |Pearson correlation| of latent/factor pairs after Hungarian matching.
- ``linear_r2``: R^2 of a linear regression from all latents to each factor.
- ``probe_r2``: held-out R^2 of a ridge linear probe (z-scored latents, k-fold cross-validation).
- InfoMEC (Hsu et al. 2023): ``nmi_matrix``, ``active_latents``, ``infom``, ``infoc``,
  ``infoe`` (``infoe_sources`` per source) and ``infomec`` (all three at once).
- ``dci``: disentanglement, completeness, informativeness (Eastwood & Williams 2018) from
  gradient-boosted tree importances.

InfoMEC and DCI treat factors ("sources") as discrete classes. ``discretize`` label-encodes a
factor with at most ``n_bins`` distinct values and puts a continuous one (e.g. the demo
screen's ``factor_XX`` columns) into ``n_bins`` quantile bins; ``n_bins=None`` label-encodes
every factor with all its values (discrete factors of any size, as Hsu et al.); ``nmi_matrix``, ``infoe``,
``infomec`` and ``dci`` call it on their factors, so continuous factors may be passed as they are.
Arrays are ``(n_samples, n_columns)``; a 1-D array is one column.
"""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import linear_sum_assignment
from scipy.stats import entropy
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression, LogisticRegression, RidgeCV
from sklearn.metrics import log_loss, r2_score
from sklearn.model_selection import KFold, cross_val_predict, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.class_weight import compute_class_weight

from phenoica.identifiability._mutual_information import jittered_columns, mutual_info_columns, sort_columns

LOG = logging.getLogger(__name__)


# --------------------------------------------------------------------------- structural identifiability


def _columns(values: Any, name: str, *, min_rows: int = 2) -> np.ndarray:
    """``values`` as a finite float64 ``(n, k)`` matrix (1-D = one column); ValueError otherwise."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array (samples x columns), got shape {x.shape}")
    if x.shape[0] < min_rows or x.shape[1] < 1:
        raise ValueError(f"{name}: needs at least {min_rows} rows and 1 column, got shape {x.shape}")
    bad = ~np.isfinite(x)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(f"{name}: non-finite value at row {row}, column {col}")
    return x


def _paired(latents: Any, factors: Any, *, min_rows: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Latents and factors as matrices with the same number of rows (samples)."""
    z = _columns(latents, "latents", min_rows=min_rows)
    f = _columns(factors, "factors", min_rows=min_rows)
    if z.shape[0] != f.shape[0]:
        raise ValueError(
            f"latents have {z.shape[0]} rows but factors have {f.shape[0]}; expected one row per sample in both"
        )
    return z, f


def _undefined(what: str, reason: str) -> float:
    """NaN with a RuntimeWarning giving the reason (the convention of ``auroc``)."""
    warnings.warn(f"{what} undefined: {reason}", RuntimeWarning, stacklevel=3)
    return float("nan")


def _zscore(x: np.ndarray) -> np.ndarray:
    """Columns centred and scaled to unit SD; a constant column becomes all zeros."""
    sd = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def _require_classes(codes: np.ndarray, name: str) -> None:
    """Every column of ``codes`` must hold at least two classes."""
    for i in range(codes.shape[1]):
        if codes[:, i].max() < 1:
            raise ValueError(f"{name} column {i} is constant (one class): it carries no information to score")


def discretize(factors: Any, n_bins: int | None = 20) -> np.ndarray:
    """Factors as integer class codes ``0 .. n_classes - 1``, column by column, shape ``(n, K)``.

    ``n_bins=None``: every column is label-encoded with all its values (its sorted distinct
    values become 0, 1, ...), as Hsu et al. process discrete sources; use this for factors that
    are discrete by construction (e.g. MPI3D's two 40-valued factors keep their 40 classes).
    An integer ``n_bins``: a column with at most ``n_bins`` distinct values is label-encoded
    likewise; a column with more distinct values is treated as continuous (e.g. the demo
    screen's ``factor_XX`` columns) and cut into ``n_bins`` equal-count quantile bins
    (``pandas.qcut``); bins that collapse on tied values are merged and the codes renumbered
    consecutively. InfoMEC (``nmi_matrix``, ``infoe``, ``infomec``) and ``dci`` use this on
    their factors.
    """
    if n_bins is not None and (isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 2):
        raise ValueError(
            f"discretize: n_bins must be None (label-encode all values) or an integer >= 2, got {n_bins!r}"
        )
    f = _columns(factors, "factors", min_rows=1)
    codes = np.empty(f.shape, dtype=np.int64)
    for i in range(f.shape[1]):
        column = f[:, i]
        distinct, inverse = np.unique(column, return_inverse=True)
        if n_bins is not None and distinct.size > n_bins:
            binned = pd.qcut(column, int(n_bins), labels=False, duplicates="drop")
            _, inverse = np.unique(np.asarray(binned), return_inverse=True)
        codes[:, i] = inverse.ravel()
    return codes


def mcc(latents: Any, factors: Any) -> float:
    """Mean absolute Pearson correlation between factors and latents after Hungarian matching.

    The ``|corr|`` matrix (factors x latents) is matched one-to-one to maximize the total
    (``scipy.optimize.linear_sum_assignment``); with unequal counts ``min(K, L)`` pairs are
    matched and the unmatched columns ignored. A constant latent correlates 0 with every
    factor; a constant factor is an error (its correlation is undefined). 1 for any signed
    permutation (and positive rescaling) of the factors.
    """
    z, f = _paired(latents, factors)
    constant = np.flatnonzero(f.std(axis=0) == 0)
    if constant.size:
        raise ValueError(f"mcc: factor column {int(constant[0])} is constant; its correlation is undefined")
    corr = np.abs(_zscore(f).T @ _zscore(z)) / f.shape[0]
    rows, cols = linear_sum_assignment(corr, maximize=True)
    return float(min(1.0, corr[rows, cols].mean()))


def linear_r2(latents: Any, factors: Any, *, train_fraction: float | None = None, seed: int = 0) -> np.ndarray:
    """Per-factor R^2 of an ordinary least-squares regression (with intercept) from all latents.

    ``train_fraction=None`` (default): fitted and scored on all samples (in-sample R^2, in
    [0, 1]; optimistic when latents are many relative to samples). A fraction in (0, 1): fitted
    on a seeded random split of that size (``seed``) and scored on the rest (held-out R^2,
    may be negative). ``seed`` is used only for the split. The mean R^2 is ``.mean()`` of the
    result. 1 for any invertible linear mix of the factors; near 0 for independent noise.
    """
    z, f = _paired(latents, factors, min_rows=3)
    if train_fraction is None:
        z_fit, f_fit, z_eval, f_eval = z, f, z, f
    else:
        if not 0.0 < float(train_fraction) < 1.0:
            raise ValueError(f"linear_r2: train_fraction must lie in (0, 1) or be None, got {train_fraction}")
        z_fit, z_eval, f_fit, f_eval = train_test_split(z, f, train_size=float(train_fraction), random_state=seed)
    constant = np.flatnonzero(f_eval.std(axis=0) == 0)
    if constant.size:
        raise ValueError(
            f"linear_r2: factor column {int(constant[0])} is constant on the scored samples; R^2 is undefined"
        )
    model = LinearRegression().fit(z_fit, f_fit)
    return np.asarray(r2_score(f_eval, model.predict(z_eval), multioutput="raw_values"), dtype=np.float64)


#: Ridge penalties the probe chooses from (per factor, inside each training fold).
PROBE_ALPHAS: tuple[float, ...] = tuple(float(a) for a in np.logspace(-2, 4, 13))


def probe_r2(
    latents: Any,
    factors: Any,
    *,
    n_splits: int = 5,
    seed: int = 0,
    alphas: tuple[float, ...] = PROBE_ALPHAS,
) -> np.ndarray:
    """Per-factor held-out R^2 of a linear probe: ridge regression on z-scored latents.

    ``n_splits``-fold cross-validation over rows (shuffled with ``seed``): in each training
    fold the latents are z-scored and a ridge penalty is chosen per factor from ``alphas``
    (efficient leave-one-out, ``RidgeCV``); the held-out fold is predicted. R^2 is computed on
    the pooled out-of-fold predictions, so it may be negative (worse than predicting the
    mean); 1 = the factor is a linear function of the latents. Constant latents are allowed.
    """
    if n_splits < 2:
        raise ValueError(f"probe_r2: n_splits must be at least 2, got {n_splits}")
    z, f = _paired(latents, factors, min_rows=2 * n_splits)
    constant = np.flatnonzero(f.std(axis=0) == 0)
    if constant.size:
        raise ValueError(f"probe_r2: factor column {int(constant[0])} is constant; R^2 is undefined")
    probe = make_pipeline(StandardScaler(), RidgeCV(alphas=alphas, alpha_per_target=True))
    folds = KFold(n_splits=n_splits, shuffle=True, random_state=seed)
    predicted = cross_val_predict(probe, z, f, cv=folds)
    return np.asarray(r2_score(f, predicted, multioutput="raw_values"), dtype=np.float64)


def active_latents(latents: Any) -> np.ndarray:
    """Boolean mask of active latents: range (max - min) above 1/20 of the largest range (Hsu et al.).

    All False when every latent is constant.
    """
    ranges = np.ptp(_columns(latents, "latents", min_rows=1), axis=0)
    return ranges > ranges.max() / 20.0


def nmi_matrix(
    sources: Any, latents: Any, n_neighbors: int = 10, seed: int = 0, *, n_bins: int | None = 20
) -> np.ndarray:
    """Normalized mutual information, ``K x L``: ``NMI[i, j] = I(s_i; z_j) / H(s_i)``.

    Sources are made discrete by :func:`discretize` (``n_bins``); latents are z-scored.
    ``I`` is scikit-learn's kNN estimate for a continuous feature and a discrete target
    (``mutual_info_classif``, ``n_neighbors``, ``random_state=seed`` for its tie-breaking
    jitter), in nats, computed for all latents at once by :func:`mutual_info_columns` (the
    same numbers); ``H(s_i)`` is the empirical entropy of the source's labels, in nats.
    Estimates are clipped at 0 and can exceed 1 slightly through estimator bias.
    Every latent passed is scored; :func:`infomec` passes only the active ones.
    """
    s, z = _paired(sources, latents)
    codes = discretize(s, n_bins)
    _require_classes(codes, "sources")
    jittered = jittered_columns(_zscore(z), seed)  # the same jitter for every source, as scikit-learn's per call
    ordered = sort_columns(jittered)  # sorted once for every source
    out = np.empty((codes.shape[1], z.shape[1]))
    for i in range(codes.shape[1]):
        y = codes[:, i]
        out[i] = mutual_info_columns(jittered, y, n_neighbors, sorted_columns=ordered) / entropy(np.bincount(y))
    return out


def _nmi_checked(nmi: Any, active: Any) -> np.ndarray:
    """The NMI matrix (sources x latents) restricted to ``active`` columns, validated."""
    m = np.asarray(nmi, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] < 1 or m.shape[1] < 1:
        raise ValueError(f"nmi: expected a non-empty 2-D matrix (sources x latents), got shape {m.shape}")
    if not np.isfinite(m).all() or (m < 0).any():
        raise ValueError("nmi: entries must be finite and non-negative")
    if active is not None:
        mask = np.asarray(active, dtype=bool).ravel()
        if mask.size != m.shape[1]:
            raise ValueError(f"active: mask has {mask.size} entries but nmi has {m.shape[1]} latent columns")
        m = m[:, mask]
        if m.shape[1] == 0:
            raise ValueError("active: no latent is active; InfoM/InfoC need at least one")
    return m


def _peak_share(m: np.ndarray, axis: int) -> np.ndarray:
    """``max / sum`` along ``axis``; an all-zero slice gets ``1 / n`` (n = its length: no preference)."""
    n = m.shape[axis]
    total = m.sum(axis=axis)
    peak = m.max(axis=axis)
    return np.where(total > 0, peak / np.where(total > 0, total, 1.0), 1.0 / n)


def infom(nmi: Any, active: Any = None) -> float:
    """InfoM (modularity): ``(mean_j max_i NMI[i,j] / sum_i NMI[i,j] - 1/K) / (1 - 1/K)``.

    ``nmi`` is ``K x L`` (sources x latents); the mean runs over the latent columns, restricted
    to ``active`` (a boolean mask) when given; :func:`infomec` passes the active latents only.
    1 when every latent informs about one source only, 0 when each spreads evenly.
    0/0: a latent whose NMI is 0 for every source has no preferred source; its share is set to
    ``1/K``, so it counts as not modular (contributes 0) rather than being dropped. NaN with a
    RuntimeWarning for K = 1 (the normalization divides by 0).
    """
    m = _nmi_checked(nmi, active)
    k = m.shape[0]
    if k < 2:
        return _undefined("InfoM", "needs at least 2 sources, got 1")
    return float((_peak_share(m, axis=0).mean() - 1.0 / k) / (1.0 - 1.0 / k))


def infoc(nmi: Any, active: Any = None) -> float:
    """InfoC (compactness): ``(mean_i max_j NMI[i,j] / sum_j NMI[i,j] - 1/L) / (1 - 1/L)``.

    ``nmi`` is ``K x L``; the latent columns are restricted to ``active`` when given and L
    counts the columns kept. 1 when each source is captured by one latent, 0 when it spreads
    evenly over all L. 0/0: a source with NMI 0 to every latent gets the share ``1/L``
    (contributes 0: it is captured by no latent). NaN with a RuntimeWarning for L = 1.
    """
    m = _nmi_checked(nmi, active)
    n_latents = m.shape[1]
    if n_latents < 2:
        return _undefined("InfoC", "needs at least 2 (active) latents, got 1")
    return float((_peak_share(m, axis=1).mean() - 1.0 / n_latents) / (1.0 - 1.0 / n_latents))


def infoe_sources(
    sources: Any, latents: Any, seed: int = 0, *, n_bins: int | None = 20, max_iter: int = 10_000
) -> np.ndarray:
    """Explicitness of each source, ``(H0 - CE) / H0`` (shape ``(K,)``); :func:`infoe` is their mean.

    For each source (made discrete by :func:`discretize`), CE is the log-loss of an
    unregularized multinomial logistic regression (``LogisticRegression(C=inf,
    class_weight="balanced")``, lbfgs, ``max_iter``; ``C=inf`` is scikit-learn >= 1.8's spelling
    of ``penalty=None``) predicting it from all latents passed (z-scored; :func:`infomec` passes
    the active ones), fitted and scored on the same samples (in-sample, as Hsu et al.).

    Weighting: the model is fitted with balanced class weights and CE is scored with the same
    weights (each class counts equally). H0 is the same weighted log-loss of the best model that
    sees no latents, which under balanced weights predicts the uniform distribution, so
    ``H0 = log(n_classes)`` exactly. With the same weights in fit and score, the latent model
    nests the null one and CE <= H0 up to optimizer tolerance. Hsu et al. score the log-loss
    unweighted; the two agree when classes are balanced.
    Non-convergence (the usual case when a source is linearly separable and the loss tends to 0)
    is logged at debug level; the last iterate's loss is used. ``seed`` goes to the estimator's
    ``random_state`` (lbfgs does not use it; kept for a uniform signature).
    """
    s, z = _paired(sources, latents)
    codes = discretize(s, n_bins)
    _require_classes(codes, "sources")
    zs = _zscore(z)
    scores = []
    for i in range(codes.shape[1]):
        y = codes[:, i]
        classes = np.unique(y)
        weight = compute_class_weight("balanced", classes=classes, y=y)[np.searchsorted(classes, y)]
        model = LogisticRegression(C=np.inf, class_weight="balanced", max_iter=max_iter, random_state=seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            model.fit(zs, y)
        for w in caught:
            if issubclass(w.category, ConvergenceWarning):
                LOG.debug("InfoE: logistic regression for source %d stopped at max_iter=%d", i, max_iter)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        ce = log_loss(y, model.predict_proba(zs), sample_weight=weight, labels=model.classes_)
        h0 = math.log(classes.size)
        scores.append((h0 - ce) / h0)
    return np.asarray(scores, dtype=np.float64)


def infoe(sources: Any, latents: Any, seed: int = 0, *, n_bins: int | None = 20, max_iter: int = 10_000) -> float:
    """InfoE (explicitness): mean over sources of ``(H0 - CE) / H0`` (:func:`infoe_sources`)."""
    return float(np.mean(infoe_sources(sources, latents, seed, n_bins=n_bins, max_iter=max_iter)))


def infomec(
    sources: Any,
    latents: Any,
    n_neighbors: int = 10,
    seed: int = 0,
    *,
    n_bins: int | None = 20,
    infoe_max_iter: int = 10_000,
    infoe_all_latents: bool = False,
) -> dict[str, Any]:
    """InfoM, InfoE and InfoC of Hsu et al. (Nelson et al. 2026 "Table 2") on the active latents.

    Sources are discretized (:func:`discretize`, ``n_bins``), latents restricted to
    :func:`active_latents` and z-scored. InfoE regresses each source on the active latents, or
    with ``infoe_all_latents=True`` on all latents as Nelson et al. (ICLR 2026) and Hsu et al.'s code define it
    (the two differ only when an inactive latent carries information); returns ``{"infom", "infoe", "infoc"}`` (floats),
    ``"infoe_sources"`` (each source's explicitness, ``(K,)``), ``"nmi"`` (``K x L_active``) and
    ``"active"`` (the boolean mask over all latents).

    Quirk (noted by Nelson et al. 2026): InfoM and InfoC are ratios of NMIs, so latents of pure noise, whose NMIs
    are all near 0, can still score high on both; only InfoE falls to about 0 for noise.
    Read InfoM/InfoC only beside a high InfoE. ``infoe_max_iter`` caps the lbfgs iterations of
    InfoE's unregularized regressions (separable sources never converge; see :func:`infoe`).
    """
    s, z = _paired(sources, latents)
    active = active_latents(z)
    if not active.any():
        raise ValueError("infomec: every latent is constant; no active latents to score")
    z_active = z[:, active]
    nmi = nmi_matrix(s, z_active, n_neighbors=n_neighbors, seed=seed, n_bins=n_bins)
    per_source = infoe_sources(
        s, z if infoe_all_latents else z_active, seed=seed, n_bins=n_bins, max_iter=infoe_max_iter
    )
    return {
        "infom": infom(nmi),
        "infoe": float(per_source.mean()),
        "infoe_sources": per_source,
        "infoc": infoc(nmi),
        "nmi": nmi,
        "active": active,
    }


def dci(
    latents: Any, factors: Any, seed: int = 0, *, n_bins: int | None = 20, train_fraction: float = 0.8
) -> dict[str, Any]:
    """DCI of Eastwood & Williams (2018): disentanglement, completeness, informativeness.

    Factors are discretized (:func:`discretize`). A seeded split (``train_fraction`` for
    training, ``seed``) is drawn once; per factor k a ``GradientBoostingClassifier``
    (scikit-learn defaults, ``random_state=seed``) is trained on all latents, and its
    impurity-based ``feature_importances_`` form column k of the importance matrix R
    (latents x factors; each column sums to 1 unless the trees never split).

    - disentanglement: ``sum_j rho_j (1 - H_K(P_j.))``, ``P_jk = R_jk / sum_k R_jk``, ``H_K`` the
      entropy in base K (number of factors), ``rho_j = sum_k R_jk / sum R`` (unimportant
      latents weigh little).
    - completeness: mean over factors of ``1 - H_L(P~_.k)``, ``P~_jk = R_jk / sum_j R_jk``, base L
      (number of latents); a factor with no importance at all scores 0.
    - informativeness: mean held-out classification accuracy over factors (chance is about
      1 / n_classes).

    Returns those three floats and ``"importance"`` (R). Disentanglement is NaN with a
    RuntimeWarning for K = 1, completeness for L = 1 (base-1 entropy).
    """
    from sklearn.ensemble import GradientBoostingClassifier  # here: only DCI needs sklearn.ensemble (slow to import)

    z, f = _paired(latents, factors, min_rows=4)
    if not 0.0 < float(train_fraction) < 1.0:
        raise ValueError(f"dci: train_fraction must lie in (0, 1), got {train_fraction}")
    codes = discretize(f, n_bins)
    _require_classes(codes, "factors")
    n_latents, n_factors = z.shape[1], codes.shape[1]
    z_train, z_test, y_train, y_test = train_test_split(z, codes, train_size=float(train_fraction), random_state=seed)
    importance = np.zeros((n_latents, n_factors))
    accuracy = np.empty(n_factors)
    for k in range(n_factors):
        if np.unique(y_train[:, k]).size < 2:
            raise ValueError(f"dci: factor column {k} has one class in the training split; use more samples")
        model = GradientBoostingClassifier(random_state=seed).fit(z_train, y_train[:, k])
        importance[:, k] = np.abs(model.feature_importances_)
        accuracy[k] = model.score(z_test, y_test[:, k])
    total = importance.sum()
    if n_factors < 2:
        disentanglement = _undefined("DCI disentanglement", "needs at least 2 factors, got 1")
    elif total <= 0:
        disentanglement = _undefined("DCI disentanglement", "the trees made no splits (all importances are 0)")
    else:
        per_latent = importance.sum(axis=1)
        used = per_latent > 0
        d_j = 1.0 - entropy(importance[used].T, base=n_factors)
        disentanglement = float(np.sum(d_j * per_latent[used] / total))
    if n_latents < 2:
        completeness = _undefined("DCI completeness", "needs at least 2 latents, got 1")
    else:
        per_factor = importance.sum(axis=0)
        c_k = np.zeros(n_factors)
        has = per_factor > 0
        if has.any():
            c_k[has] = 1.0 - entropy(importance[:, has], base=n_latents)
        completeness = float(c_k.mean())
    return {
        "disentanglement": disentanglement,
        "completeness": completeness,
        "informativeness": float(accuracy.mean()),
        "importance": importance,
    }
