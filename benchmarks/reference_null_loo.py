"""Benchmark: the reference readout's classifier null, its leave-one-out p-values at 0.01 and 0.05.

On the simulated allele pairs (``phenoica.screen.arrayed``'s position design, ``screen.reference:
{column: ...}``, ``base`` profiles, the schema's defaults) the reference null holds 480 null
contrasts (``phenoica.hits``'s ``_reference`` module, :func:`null_size`), whose classifier AUROCs
move in steps of 1/32. Per draw it scores the null contrasts as the readout does and prints the
share of their own leave-one-out p-values (the readout's rule: ties counted as exceedances, the
tail where one is fitted) at or below 0.01 and 0.05 (above nominal: liberal), the KS p of those
p-values and of the same randomized within ties (the reported check), and, pooled over draws, the
ratio share / nominal with a 95% percentile-bootstrap interval over the draws.

    python benchmarks/reference_null_loo.py --seeds 0 1 2 3 4 5 6 7 8 9 10 11
    python benchmarks/reference_null_loo.py --seeds 0 1 2 3 4 5 --position-effect
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
from scipy import stats

from phenoica.classify import SplitOptions, feature_matrix, fold_masks, make_folds
from phenoica.contract import validate_config
from phenoica.hits import (
    ReferenceOptions,
    contrast_auroc,
    fit_tail,
    leave_one_out_pareto,
    null_contrasts,
    null_size,
    pair_contrasts,
    reference_pairs,
)
from phenoica.screen import POSITION_DESIGN, screen_profiles
from phenoica.utils import bootstrap_mean, rng_for

LEVELS: tuple[float, ...] = (0.01, 0.05)
#: The column of the simulated screen naming each allele's reference (its wild type).
REFERENCE = "Metadata_Reference"


def null_aurocs(seed: int, position_effect: bool) -> np.ndarray:
    """The classifier AUROCs of one draw's null contrasts (finite ones)."""
    design = POSITION_DESIGN
    if not position_effect:
        design = dataclasses.replace(design, edge_effect=0.0, row_gradient=0.0)
    cfg = validate_config({"screen": {"reference": {"column": REFERENCE}}})
    table, _ = screen_profiles(design, seed)
    options = ReferenceOptions.from_config(cfg)
    options = options._replace(classify=options.classify._replace(seed=seed))
    X, _ = feature_matrix(table, "simulated pairs", None)
    real = pair_contrasts(table, reference_pairs(table, options.reference or {}))
    nulls = null_contrasts(table, real, null_size(len(real), options.classify.n_null_guides, options.q_threshold), seed)
    folds = fold_masks(make_folds(table, SplitOptions.from_config(cfg)), len(table))
    auroc = np.array([contrast_auroc(X, c, folds, options)[0] for c in nulls], dtype=float)
    return auroc[np.isfinite(auroc)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--position-effect", action="store_true", help="the design's edge effect and row gradient")
    args = parser.parse_args()
    shares: dict[float, list[float]] = {alpha: [] for alpha in LEVELS}
    for seed in args.seeds:
        t0 = time.process_time()
        a = np.clip(null_aurocs(seed, args.position_effect), 1e-6, 1 - 1e-6)
        z = np.log(a) - np.log1p(-a)
        tail = fit_tail(z, seed)
        loo = leave_one_out_pareto(z, tail)
        randomized = leave_one_out_pareto(z, tail, rng_for(seed, "reference_null_loo", z.size))
        for alpha in LEVELS:
            shares[alpha].append(float(np.mean(loo <= alpha)))
        print(
            f"seed {seed}: {z.size} null contrasts, {np.unique(a).size} distinct AUROCs, tail "
            f"{'fitted' if tail is not None else 'not fitted'}; share at or below "
            + ", ".join(f"{alpha:g}: {shares[alpha][-1]:.4f}" for alpha in LEVELS)
            + f"; KS p ties as exceedances {stats.kstest(loo, 'uniform').pvalue:.3g}, randomized "
            f"{stats.kstest(randomized, 'uniform').pvalue:.3g} ({time.process_time() - t0:.0f} CPU s)",
            flush=True,
        )
    for alpha, values in shares.items():
        ci = bootstrap_mean(np.asarray(values), 0, "reference_null_loo", f"{alpha:g}")
        print(
            f"pooled over {len(values)} draws, alpha {alpha:g}: share / alpha {ci.estimate / alpha:.2f} [{ci.low / alpha:.2f}, {ci.high / alpha:.2f}]"
        )


if __name__ == "__main__":
    main()
