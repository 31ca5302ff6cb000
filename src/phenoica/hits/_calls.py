"""Hit calls with a known error rate: guide and gene p-values and BH q-values, from both readouts.

The classifier readout. A guide's statistic is its held-out AUROC (mean over its scored folds).
Its null distribution is that of the pseudo-guides of the same (model, variant): whole control
wells laid out like real guides and scored by the same classifier (``phenoica.classify``).
``hits.null_model`` turns the null into p-values (:class:`NullFit`):

- ``pareto`` (default): the empirical p-value where at least 10 pseudo-guides lie at or above the
  guide, beyond that a generalized Pareto tail fitted to the pseudo-guides' upper exceedances
  where a goodness-of-fit test accepts it (:mod:`phenoica.hits._tail`), so that calls reach the
  depth of a genome-scale screen; the bounded empirical p-value where it does not;
- ``parametric``: logit(AUROC) of the pseudo-guides taken as normal; a guide's p-value is the
  upper tail of the Student-t predictive distribution of a new draw;
- ``empirical``: ``p = (1 + #{null >= x}) / (n_null + 1)``.

No reported ``p_value`` lies below the null's :attr:`NullFit.p_floor`: ``1 / (n + 1)`` (what n
pseudo-guides observe) unless an accepted Pareto tail reads further, where its own floor holds.
``p_beyond_null`` marks a p-value raised to that bound (read: "below ``p_value``") and ``p_tail``
keeps the model's value: the normal tail was measured 2 to 5 times anti-conservative beyond
``1 / (n + 1)``, so no call rests on it (docs/hit-calling.md); :func:`null_summary` counts the
guides it alone would call.

p-values are one-sided (a hit classifies better than the null). Guide q-values: Benjamini-Hochberg
over the scored real guides of one (model, variant). Gene p-values combine the gene's guide
p-values with the Cauchy combination (ACAT, ``phenoica.utils.acat``): valid however the guides
depend on each other (they share the control set) and powerful when only some of a gene's
guides work. Gene q-values: BH over genes. The pseudo-guides' own p-values are leave-one-out
(each against the other n - 1), so their uniformity is a fair check of calibration; they never
enter the BH correction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
from scipy import stats

from phenoica.contract import GENE, ScreenError
from phenoica.hits._tail import (
    TAIL_COLUMNS,
    TAIL_P_FLOOR,
    TailFit,
    fit_tail,
    leave_one_out_pareto,
    pareto_p_values,
    tail_summary,
)
from phenoica.utils import acat, bh_qvalues, rng_for

NULL_MODELS: tuple[str, ...] = ("pareto", "parametric", "empirical")
#: AUROCs are clipped into [AUROC_CLIP, 1 - AUROC_CLIP] before the logit.
AUROC_CLIP = 1e-6
KEYS: tuple[str, ...] = ("model", "variant")


GUIDE_CALL_COLUMNS: tuple[str, ...] = ("p_value", "p_beyond_null", "p_tail", "q_value", "hit")
GENE_CALL_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    GENE,
    "n_guides",
    "n_guides_hit",
    "auroc",
    "p_value",
    "p_beyond_null",
    "p_tail",
    "q_value",
    "hit",
)
NULL_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    "null_model",
    "n_null",
    "n_null_skipped",
    "null_auroc_mean",
    "null_auroc_median",
    "logit_mean",
    "logit_sd",
    "normality_p",
    "loo_uniform_ks_p",
    "loo_fraction_below_05",
    "p_floor",
    "n_beyond_null",
    "n_tail_only_calls",
    *TAIL_COLUMNS,
    "calls",
    "reason",
)


def logit_auroc(auroc: np.ndarray) -> np.ndarray:
    """logit(AUROC), AUROC clipped into [AUROC_CLIP, 1 - AUROC_CLIP]."""
    a = np.clip(np.asarray(auroc, dtype=float), AUROC_CLIP, 1 - AUROC_CLIP)
    return np.log(a) - np.log1p(-a)


@dataclass(frozen=True)
class NullFit:
    """The null of one (model, variant): the pseudo-guides' AUROCs and the p-values of ``model``
    (``seed``: the Pareto tail's goodness-of-fit draws)."""

    auroc: np.ndarray
    model: str
    seed: int = 0

    def __post_init__(self) -> None:
        if self.model not in NULL_MODELS:
            raise ValueError(f"hits.null_model: expected one of {NULL_MODELS}, got {self.model!r}")
        a = np.asarray(self.auroc, dtype=float)
        if a.ndim != 1 or not np.isfinite(a).all():
            raise ValueError("NullFit: auroc must be a 1-d array of finite values")
        need = 3 if self.model == "parametric" else 1
        if a.size < need:
            raise ValueError(f"NullFit: the {self.model} null needs at least {need} scored pseudo-guides, has {a.size}")
        object.__setattr__(self, "auroc", a)

    @property
    def n(self) -> int:
        return int(self.auroc.size)

    @cached_property
    def tail(self) -> TailFit | None:
        """The accepted Pareto tail of a ``pareto`` null (None otherwise, or where none fits)."""
        return fit_tail(logit_auroc(self.auroc), self.seed) if self.model == "pareto" else None

    @property
    def p_floor(self) -> float:
        """The smallest p-value reported: ``1 / (n + 1)``, what n pseudo-guides can show (a guide
        above all of them), or the Pareto tail's floor where an accepted tail reads further."""
        return TAIL_P_FLOOR if self.tail is not None else 1.0 / (self.n + 1.0)

    @property
    def logit_mean(self) -> float:
        return float(logit_auroc(self.auroc).mean())

    @property
    def logit_sd(self) -> float:
        return float(logit_auroc(self.auroc).std(ddof=1)) if self.n > 1 else math.nan

    def p_values(self, auroc: np.ndarray) -> np.ndarray:
        """One-sided p-values of AUROCs ``auroc`` against this null, the parametric tail's value
        however far out (NaN in, NaN out); :func:`bounded` reports them."""
        x = np.asarray(auroc, dtype=float)
        out = np.full(x.shape, math.nan)
        ok = np.isfinite(x)
        if self.model == "empirical":
            srt = np.sort(self.auroc)
            n_ge = self.n - np.searchsorted(srt, x[ok], side="left")
            out[ok] = (1.0 + n_ge) / (self.n + 1.0)
        elif self.model == "pareto":
            out[ok] = pareto_p_values(logit_auroc(self.auroc), logit_auroc(x[ok]), self.tail)
        else:
            out[ok] = _t_upper(logit_auroc(x[ok]), self.logit_mean, self.logit_sd, self.n)
        return out

    def leave_one_out_p(self) -> np.ndarray:
        """Each pseudo-guide's p-value against the other n - 1 (the calibration check; the other
        n - 1 reach down to ``1 / n``). The empirical p-values are randomized within ties (seeded
        by ``seed``): AUROCs of few held-out wells tie often, and a tie counted as an exceedance
        makes exchangeable values look conservative, so the check would test the ties rather
        than the null (the calls' own p-values count ties, conservatively)."""
        a = self.auroc
        n = self.n
        rng = rng_for(self.seed, "null_leave_one_out")
        if self.model == "empirical":
            return leave_one_out_pareto(a, None, rng)
        if self.model == "pareto":
            return leave_one_out_pareto(logit_auroc(a), self.tail, rng)
        z = logit_auroc(a)
        if n < 4:
            return np.full(n, math.nan)
        total, total2 = z.sum(), (z**2).sum()
        mean = (total - z) / (n - 1)
        var = ((total2 - z**2) - (n - 1) * mean**2) / (n - 2)
        return _t_upper(z, mean, np.sqrt(np.maximum(var, 0.0)), n - 1)


def _t_upper(z: np.ndarray, mean: float | np.ndarray, sd: float | np.ndarray, n: int) -> np.ndarray:
    """Upper tail of the Student-t predictive distribution of a new draw of a normal sample."""
    sd = np.asarray(sd, dtype=float)
    scale = sd * math.sqrt(1.0 + 1.0 / n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (np.asarray(z, dtype=float) - mean) / scale
    # a degenerate null (all pseudo-guides equal): above it p = 0, at or below p = 1
    t = np.where(scale > 0, t, np.where(np.asarray(z) > mean, np.inf, -np.inf))
    return stats.t.sf(t, df=n - 1)


def bounded(p_tail: np.ndarray, p_floor: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reported p-values of ``p_tail`` against a null that reaches down to ``p_floor`` (one
    value, or one per p-value): each raised to ``p_floor`` at least, and whether it was raised
    (the tail put it beyond the null)."""
    p = np.asarray(p_tail, dtype=float)
    beyond = np.isfinite(p) & (p < p_floor)
    return np.where(beyond, p_floor, p), beyond


def _groups(df: pd.DataFrame) -> list[tuple[tuple[str, str], np.ndarray]]:
    return [(key, np.asarray(idx)) for key, idx in df.groupby(list(KEYS), sort=True).indices.items()]


def null_fit_for(guides: pd.DataFrame, model: str, variant: str, null_model: str, seed: int = 0) -> NullFit:
    """The null of (model, variant) from the guide table's scored pseudo-guides.

    Raises ScreenError naming the model, variant and counts when no pseudo-guide has a finite
    AUROC (e.g. ``classify.n_null_guides: 0``, or every pseudo-guide was skipped).
    """
    sub = guides[(guides["model"] == model) & (guides["variant"] == variant) & guides["is_null_guide"]]
    a = sub["auroc"].to_numpy(dtype=float)
    finite = a[np.isfinite(a)]
    need = 3 if null_model == "parametric" else 1
    if finite.size < need:
        raise ScreenError(
            f"hit calls for {model}/{variant}: the null has {finite.size} pseudo-guide(s) with a finite AUROC "
            f"({len(sub)} drawn, {len(sub) - finite.size} skipped in every fold; reasons in guide_folds.parquet); "
            f"the {null_model} null needs at least {need}. Pseudo-guides copy the real guides' layouts, so they are "
            "skipped for the same reasons (too few training or held-out rows per fold: classify.min_train_samples, "
            "classify.min_test_samples, the batches and replicate plates of splits.scheme), and need control wells "
            "in every batch; the door's readout notes (screen/validated.json) give the counts"
        )
    return NullFit(finite, null_model, seed)


def call_guides(
    guides: pd.DataFrame, null_model: str = "pareto", q_threshold: float = 0.05, seed: int = 0
) -> pd.DataFrame:
    """The guide table with ``GUIDE_CALL_COLUMNS`` added: ``p_tail`` (the null model's p-value),
    ``p_value`` and ``p_beyond_null`` (:func:`bounded` at the null's ``p_floor``), ``q_value`` and
    ``hit`` (q < ``q_threshold``).

    Per (model, variant): real guides get p against that null and BH q over the real guides
    with a finite p (of the reported ``p_value``); pseudo-guides get their leave-one-out p (bounded
    at ``1 / n``, the reach of the other n - 1) and no q. Guides skipped in every fold get NaN and
    no call.
    """
    if not 0 < q_threshold < 1:
        raise ValueError(f"hits.q_threshold: expected a value in (0, 1), got {q_threshold}")
    out = guides.reset_index(drop=True).copy()
    p = np.full(len(out), math.nan)
    floor = np.zeros(len(out))
    q = np.full(len(out), math.nan)
    is_null = out["is_null_guide"].astype(bool).to_numpy()
    for (model, variant), idx in _groups(out):
        try:
            fit = null_fit_for(out.iloc[idx], model, variant, null_model, seed)
        except ScreenError:  # no null: this (model, variant) gets no classifier calls (null_summary says why)
            continue
        real = idx[~is_null[idx]]
        p[real] = fit.p_values(out["auroc"].to_numpy(dtype=float)[real])
        floor[real] = fit.p_floor
        q[real] = bh_qvalues(bounded(p[real], fit.p_floor)[0])
        nulls = idx[is_null[idx]]
        scored = nulls[np.isfinite(out["auroc"].to_numpy(dtype=float)[nulls])]
        p[scored] = fit.leave_one_out_p()
        floor[scored] = fit.p_floor if fit.tail is not None else 1.0 / fit.n
    reported, beyond = bounded(p, floor)
    out["p_value"], out["p_beyond_null"], out["p_tail"], out["q_value"] = reported, beyond, p, q
    out["hit"] = np.where(np.isfinite(q), q < q_threshold, False).astype(bool)
    return out


def call_genes(guide_calls: pd.DataFrame, q_threshold: float = 0.05) -> pd.DataFrame:
    """Gene-level calls (``GENE_CALL_COLUMNS``) from ``call_guides``' output (real guides only).

    ``p_value``: ACAT of the gene's guides' reported p-values (never below their null's
    ``p_floor``: ACAT of p-values at or above a bound stays at or above it); ``p_beyond_null``:
    some of them lie beyond the null, so ``p_value`` is an upper bound; ``p_tail``: ACAT of the
    guides' ``p_tail``; ``q_value``: BH over the genes of one (model, variant), of ``p_value``;
    ``n_guides``: guides with a p-value; ``n_guides_hit``: guides with q < ``q_threshold`` (the
    guides that agree the gene is a hit); ``auroc``: mean of its guides' AUROCs.
    """
    real = guide_calls[~guide_calls["is_null_guide"].astype(bool)]
    rows = []
    for (model, variant, gene), sub in real.groupby(["model", "variant", GENE], sort=True):
        p = sub["p_value"].to_numpy(dtype=float)
        rows.append(
            {
                "model": model,
                "variant": variant,
                GENE: gene,
                "n_guides": int(np.isfinite(p).sum()),
                "n_guides_hit": int(sub["hit"].astype(bool).sum()),
                "auroc": float(np.nanmean(sub["auroc"])) if np.isfinite(sub["auroc"]).any() else math.nan,
                "p_value": acat(p),
                "p_beyond_null": bool(sub["p_beyond_null"].astype(bool).any()),
                "p_tail": acat(sub["p_tail"].to_numpy(dtype=float)),
            }
        )
    genes = pd.DataFrame(rows, columns=[c for c in GENE_CALL_COLUMNS if c not in ("q_value", "hit")])
    genes["p_beyond_null"] = genes["p_beyond_null"].astype(bool)
    q = np.full(len(genes), math.nan)
    for _key, idx in _groups(genes):
        q[idx] = bh_qvalues(genes["p_value"].to_numpy(dtype=float)[idx])
    genes["q_value"] = q
    genes["hit"] = np.where(np.isfinite(q), q < q_threshold, False).astype(bool)
    for c in ("n_guides", "n_guides_hit"):
        genes[c] = genes[c].astype(np.int64)
    return genes[list(GENE_CALL_COLUMNS)].reset_index(drop=True)


def null_summary(
    guide_calls: pd.DataFrame, null_model: str = "pareto", q_threshold: float = 0.05, seed: int = 0
) -> pd.DataFrame:
    """Per (model, variant): the null's size, its fit, checks of its calibration, and what lies
    beyond its reach.

    ``normality_p``: Shapiro-Wilk of the pseudo-guides' logit AUROCs (the parametric model's
    assumption); ``loo_uniform_ks_p``: Kolmogorov-Smirnov of their leave-one-out p-values
    against U(0, 1); ``loo_fraction_below_05``: how many of those fall below 0.05 (nominal 0.05).
    ``p_floor``: ``1 / (n_null + 1)``, the smallest p-value the null reaches; ``n_beyond_null``:
    real guides whose tail p-value lies below it; ``n_tail_only_calls``: guides that BH over the
    tail's p-values would call at ``q_threshold`` and the calls (on the reported p-values) do not:
    what a screen would gain from a null large enough to reach them.
    """
    rows = []
    for (model, variant), idx in _groups(guide_calls):
        sub = guide_calls.iloc[idx]
        nulls = sub[sub["is_null_guide"].astype(bool)]
        real = sub[~sub["is_null_guide"].astype(bool)]
        try:
            fit = null_fit_for(sub, model, variant, null_model, seed)
        except ScreenError as exc:
            rows.append(_no_null_row(model, variant, null_model, len(nulls), str(exc)))
            continue
        loo = fit.leave_one_out_p()
        loo = loo[np.isfinite(loo)]
        z = logit_auroc(fit.auroc)
        rows.append(
            {
                "model": model,
                "variant": variant,
                "null_model": null_model,
                "n_null": fit.n,
                "n_null_skipped": int(len(nulls) - fit.n),
                "null_auroc_mean": float(fit.auroc.mean()),
                "null_auroc_median": float(np.median(fit.auroc)),
                "logit_mean": fit.logit_mean,
                "logit_sd": fit.logit_sd,
                "normality_p": float(stats.shapiro(z).pvalue) if fit.n >= 3 and np.ptp(z) > 0 else math.nan,
                "loo_uniform_ks_p": float(stats.kstest(loo, "uniform").pvalue) if loo.size else math.nan,
                "loo_fraction_below_05": float(np.mean(loo < 0.05)) if loo.size else math.nan,
                "p_floor": fit.p_floor,
                "n_beyond_null": int(real["p_beyond_null"].astype(bool).sum()),
                "n_tail_only_calls": _tail_only_calls(real, q_threshold),
                **tail_summary(fit),
                "calls": True,
                "reason": "",
            }
        )
    return pd.DataFrame(rows, columns=list(NULL_COLUMNS))


def _tail_only_calls(real: pd.DataFrame, q_threshold: float) -> int:
    """Real guides of one (model, variant) that BH over their ``p_tail`` would call at
    ``q_threshold`` and that are not called."""
    tail_calls = bh_qvalues(real["p_tail"].to_numpy(dtype=float)) < q_threshold
    return int((tail_calls & ~real["hit"].astype(bool).to_numpy()).sum())


def _no_null_row(model: str, variant: str, null_model: str, n_drawn: int, reason: str) -> dict[str, object]:
    """The null summary of a (model, variant) whose null cannot be fitted: no classifier calls, and why."""
    row: dict[str, object] = {c: math.nan for c in NULL_COLUMNS}
    row.update(model=model, variant=variant, null_model=null_model, n_null=0, n_null_skipped=n_drawn)
    row.update(n_beyond_null=0, n_tail_only_calls=0, calls=False, reason=reason)
    return row
