"""Cross-seed identifiability errors per (dataset, alpha, group) and their rank correlation with the bi-Lipschitz constant."""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from phenoica.identifiability import AlignOptions, align_errors
from phenoica.studies._plan import ALL_GROUP
from phenoica.studies.bilipschitz._model import negative_slope

ALIGN_MAPS: tuple[str, ...] = ("rigid", "linear")


def _latents(t: pd.DataFrame) -> np.ndarray:
    cols = sorted((c for c in t.columns if c.startswith("z_")), key=lambda c: int(c[2:]))
    return t.sort_values("sample")[cols].to_numpy(dtype=np.float64)


def model_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per model: mean / median / max B over its samples, share singular, reconstruction."""
    keys = ["dataset", "group", "alpha", "slope", "seed"]
    rows = []
    for key, t in runs.groupby(keys, sort=True):
        b = t["bilipschitz"].to_numpy(dtype=float)
        b = b[~np.isnan(b)]
        fin = b[np.isfinite(b)]
        rows.append(
            dict(
                zip(keys, key),
                n_samples=len(t),
                n_jacobians=b.size,
                b_mean=float(fin.mean()) if fin.size else math.nan,
                b_median=float(np.median(fin)) if fin.size else math.nan,
                b_max=float(b.max()) if b.size else math.nan,
                frac_singular=float(np.mean(~np.isfinite(b))) if b.size else math.nan,
                recon_error=float(t["recon_error"].mean()),
                final_loss=float(t["final_loss"].iloc[0]),
                **{c: t[c].iloc[0] for c in ("parametrization", "epochs_run", "late_improvement") if c in t},
            )
        )
    return pd.DataFrame(rows)


def pair_alignment(runs: pd.DataFrame, train_fraction: float, seed: int) -> pd.DataFrame:
    """Identifiability error of every pair of seeds within each (dataset, group, alpha).

    Rigid and linear maps (:func:`phenoica.identifiability.align_errors`), from the lower seed's latents
    to the higher seed's, plus the pair's bi-Lipschitz summaries (mean of the two models' mean
    B, max of their max B) and mean reconstruction error.
    """
    summary = model_summary(runs).set_index(["dataset", "group", "alpha", "seed"])
    rows = []
    for (dataset, group, alpha), t in runs.groupby(["dataset", "group", "alpha"], sort=True):
        seeds = sorted(t["seed"].unique())
        lat = {s: _latents(t[t["seed"] == s]) for s in seeds}
        for sa, sb in itertools.combinations(seeds, 2):
            if lat[sa].shape[0] != lat[sb].shape[0]:
                raise ValueError(f"{dataset}/{group} alpha={alpha}: seeds {sa} and {sb} embed different sample counts")
            res = align_errors(
                lat[sa], lat[sb], AlignOptions(train_fraction=train_fraction, seed=seed, maps=ALIGN_MAPS, knn_k=None)
            )
            ma, mb = summary.loc[(dataset, group, alpha, sa)], summary.loc[(dataset, group, alpha, sb)]
            rows.append(
                dict(
                    dataset=dataset,
                    group=group,
                    alpha=float(alpha),
                    slope=negative_slope(alpha),
                    seed_a=int(sa),
                    seed_b=int(sb),
                    rigid=res["rigid"],
                    linear=res["linear"],
                    b_mean=float(np.mean([ma["b_mean"], mb["b_mean"]])),
                    b_max=float(max(ma["b_max"], mb["b_max"])),
                    recon_error=float(np.mean([ma["recon_error"], mb["recon_error"]])),
                    n_samples=int(lat[sa].shape[0]),
                )
            )
    return pd.DataFrame(rows)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho, NaN with fewer than 3 points or a constant side."""
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def spearman_interval(
    t: pd.DataFrame, statistic: str, error: str, n_boot: int, seed: int, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of Spearman's rho(``statistic``, ``error``) over the pairs ``t``.

    Pairs that share a model are not independent, so the bootstrap resamples models, not pairs:
    in every (group, alpha) cell the seeds are drawn with replacement, and each drawn pair of
    distinct seeds contributes its pair row (as often as it is drawn). (NaN, NaN) when fewer
    than half of the ``n_boot`` replicates give a defined rho.
    """
    if not 0 < level < 1 or n_boot < 1:
        raise ValueError(f"level must lie in (0, 1) and n_boot >= 1, got {level}, {n_boot}")
    cells = []
    for _, u in t.groupby(["group", "alpha"], sort=True):
        seeds = np.array(sorted(set(u["seed_a"]) | set(u["seed_b"])))
        values = {
            (int(a), int(b)): (x, y)
            for a, b, x, y in zip(u["seed_a"], u["seed_b"], u[statistic].to_numpy(float), u[error].to_numpy(float))
        }
        cells.append((seeds, values))
    rng = np.random.default_rng(seed)
    rhos = []
    for _ in range(int(n_boot)):
        xs, ys = [], []
        for seeds, values in cells:
            draw = rng.choice(seeds, size=seeds.size, replace=True)
            for a, b in itertools.combinations(draw.tolist(), 2):
                pair = values.get((min(a, b), max(a, b)))
                if a != b and pair is not None:
                    xs.append(pair[0])
                    ys.append(pair[1])
        rho = _spearman(np.asarray(xs), np.asarray(ys))
        if np.isfinite(rho):
            rhos.append(rho)
    if len(rhos) < n_boot / 2:
        return math.nan, math.nan
    lo, hi = np.quantile(rhos, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def spearman_table(pairs: pd.DataFrame, *, n_boot: int, seed: int) -> pd.DataFrame:
    """Spearman rank correlation of identifiability error (rigid, linear) with the pair's mean
    and max B, per dataset and model kind (``all`` or ``per-digit``, the digits pooled), as
    measured, with a 95% model-resampling bootstrap interval (:func:`spearman_interval`). The
    p-value is scipy's, which treats pairs as independent (they are not: read the interval)."""
    columns = ["dataset", "models", "map", "statistic", "n_pairs", "spearman_rho", "ci_low", "ci_high", "p_value"]
    rows = []
    if pairs.empty:
        return pd.DataFrame(columns=columns)
    kinds = np.where(pairs["group"] == ALL_GROUP, "all", "per-digit")
    for (dataset, kind), t in pairs.assign(models=kinds).groupby(["dataset", "models"], sort=True):
        for m in ALIGN_MAPS:
            for stat in ("b_mean", "b_max"):
                ok = np.isfinite(t[m].to_numpy(float)) & np.isfinite(t[stat].to_numpy(float))
                x, y = t.loc[ok, stat].to_numpy(float), t.loc[ok, m].to_numpy(float)
                rho = _spearman(x, y)
                p = float(stats.spearmanr(x, y).pvalue) if np.isfinite(rho) else math.nan
                lo, hi = spearman_interval(t[ok], stat, m, n_boot, seed) if np.isfinite(rho) else (math.nan, math.nan)
                rows.append(
                    dict(
                        dataset=dataset,
                        models=kind,
                        map=m,
                        statistic=stat,
                        n_pairs=int(ok.sum()),
                        spearman_rho=rho,
                        ci_low=lo,
                        ci_high=hi,
                        p_value=p,
                    )
                )
    return pd.DataFrame(rows, columns=columns)


def alpha_summary(models: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, group, alpha): mean B statistics, reconstruction and identifiability errors."""
    extra = {"epochs_run": ("epochs_run", "mean"), "late_improvement": ("late_improvement", "max")}
    m = (
        models.groupby(["dataset", "group", "alpha"], sort=True)
        .agg(
            slope=("slope", "first"),
            n_models=("seed", "size"),
            b_mean=("b_mean", "mean"),
            b_max=("b_max", "max"),
            recon_error=("recon_error", "mean"),
            **{k: v for k, v in extra.items() if v[0] in models},
        )
        .reset_index()
    )
    if pairs.empty:
        return m.assign(rigid=math.nan, linear=math.nan, n_pairs=0)
    p = (
        pairs.groupby(["dataset", "group", "alpha"], sort=True)
        .agg(rigid=("rigid", "mean"), linear=("linear", "mean"), n_pairs=("rigid", "size"))
        .reset_index()
    )
    return m.merge(p, on=["dataset", "group", "alpha"], how="left")


def gather_dataset(
    run_tables: Sequence[pd.DataFrame], train_fraction: float, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(model summaries, per-pair alignment, B(z) samples) of one dataset's runs."""
    if not run_tables:
        raise ValueError("bilipschitz gather: no runs given")
    runs = pd.concat(run_tables, ignore_index=True)
    samples = runs.loc[
        runs["bilipschitz"].notna(), ["dataset", "group", "alpha", "slope", "seed", "sample", "bilipschitz"]
    ]
    return model_summary(runs), pair_alignment(runs, train_fraction, seed), samples.reset_index(drop=True)
