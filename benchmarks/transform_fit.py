"""Benchmark: fitting the embedding transforms at screen scale, against the X^T X floor.

Synthetic embeddings: ``--sources`` independent Laplace sources mixed into ``--d`` dims plus
unit Gaussian noise, float32, ``--n`` rows (default 1,000,000 x 384 = 1.5 GB). Timed, each
in the same run:

    floor      one float32 X^T X product (BLAS sgemm): the least any covariance-based fit costs
    parallel   parallel_analysis (the default component rule; fixed cost, 20 x 20,000 rows)
    pca        PCAWhitener.fit at that k (float64 chunked covariance + eigh)
    whiten     PCAWhitener.transform of all rows (what ICA is fitted on)
    picard     ICARotation(picard).fit on the whitened rows (all, or --ica-rows subsamples)
    fastica    ICARotation(fastica).fit likewise

and printed as seconds (best of ``--repeats`` for the cheap steps) and ratios to the floor,
with the peak resident memory. ICA on all
rows is timed only with ``--ica-all`` (it dominates the run); by default ICA is timed on
seeded subsamples of ``--ica-rows`` rows, the proposed ``transforms.ica_max_samples``.

    python benchmarks/transform_fit.py                    # default: ~3 min, < 8 GB on 2 cores
    python benchmarks/transform_fit.py --n 200000         # smaller machines
    python benchmarks/transform_fit.py --ica-all          # ICA on every row too (slow)
    python benchmarks/transform_fit.py --threads 1        # BLAS threads (1 is faster on a busy machine)
"""

from __future__ import annotations

import argparse
import logging
import resource
import time

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.stats import ortho_group
from threadpoolctl import threadpool_info, threadpool_limits

from phenoica.transforms import ICARotation, PCAWhitener, parallel_analysis


def synthetic(
    n: int, d: int, sources: int, seed: int, chunk: int = 100_000
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X float32 n x d, sources of the first 20,000 rows, mixing) built chunk by chunk."""
    rng = np.random.default_rng(seed)
    mixing = (3.0 * ortho_group.rvs(d, random_state=seed)[:sources]).astype(np.float32)
    X = np.empty((n, d), dtype=np.float32)
    head = None
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        S = (rng.laplace(size=(m, sources)) / np.sqrt(2)).astype(np.float32)
        X[start : start + m] = S @ mixing + rng.standard_normal((m, d), dtype=np.float32)
        if head is None:
            head = S[:20_000]
    return X, head, mixing


def timed(fn, repeats: int = 1):  # type: ignore[no-untyped-def]
    """(result, seconds): the fastest of ``repeats`` calls (shared machines are noisy)."""
    best = float("inf")
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def peak_gb() -> float:
    """Peak resident memory of this process so far (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def recovery(Y: np.ndarray, S: np.ndarray) -> float:
    """Worst |corr| of Hungarian-matched (component, source) pairs: 1 = every source recovered."""
    k, s = Y.shape[1], S.shape[1]
    corr = np.abs(np.corrcoef(Y.T, S.T)[:k, k:])
    rows, cols = linear_sum_assignment(-corr)
    return float(corr[rows, cols].min()) if s <= k else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000, help="rows (images); 200000 on small machines")
    parser.add_argument("--d", type=int, default=384, help="embedding width")
    parser.add_argument("--sources", type=int, default=32, help="planted independent sources")
    parser.add_argument("--components", default="parallel", help="n_components: int, fraction or 'parallel'")
    parser.add_argument("--ica-rows", type=int, nargs="*", default=[50_000, 200_000], help="ICA subsample sizes")
    parser.add_argument("--ica-all", action="store_true", help="also fit ICA on every row")
    parser.add_argument("--methods", nargs="*", default=["picard", "fastica"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="best-of repeats for floor, pca and whitening")
    parser.add_argument("--threads", type=int, default=None, help="BLAS threads (default: the library's)")
    args = parser.parse_args()
    if args.threads is not None:
        threadpool_limits(args.threads)
    blas = ", ".join(f"{p['internal_api']} {p['num_threads']} threads" for p in threadpool_info())
    print(f"BLAS: {blas}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    comps: int | float | str = args.components
    if args.components != "parallel":
        comps = float(args.components) if "." in args.components else int(args.components)

    (X, S_head, _), t_data = timed(lambda: synthetic(args.n, args.d, args.sources, args.seed))
    print(
        f"data: {args.n} x {args.d} float32 ({X.nbytes / 2**30:.2f} GiB), {args.sources} sources, "
        f"built in {t_data:.1f} s"
    )
    _, floor = timed(lambda: X.T @ X, args.repeats)
    rows = [("floor  X^T X (float32)", floor, "")]

    if comps == "parallel":
        (k, _, _), t_pa = timed(lambda: parallel_analysis(X, seed=args.seed), args.repeats)
        rows.append(("parallel analysis (20 x 20k rows)", t_pa, f"k = {k}"))
        comps = k
    whitener, t_pca = timed(lambda: PCAWhitener(n_components=comps, seed=args.seed).fit(X), args.repeats)
    k = whitener.n_components_
    rows.append(("pca    fit (covariance + eigh)", t_pca, f"k = {k}"))
    Z, t_white = timed(lambda: whitener.transform(X), args.repeats)
    rows.append(("whiten transform", t_white, f"{Z.shape[0]} x {k}"))
    X = None  # free the rows before the ICA fits
    sizes = sorted({s for s in args.ica_rows if s < args.n}) + ([args.n] if args.ica_all else [])
    for method in args.methods:
        for size in sizes:
            ica, t_ica = timed(
                lambda: ICARotation(method, max_iter=500, tol=1e-7, seed=args.seed, max_samples=size).fit(Z)
            )
            score = recovery(ica.transform(Z[:20_000]), S_head)
            rows.append(
                (
                    f"{method:8s}fit on {size} rows",
                    t_ica,
                    f"n_iter {ica.n_iter_}, converged {ica.converged_}, source recovery {score:.3f}",
                )
            )

    print(f"\n{'step':34s} {'seconds':>9s} {'x floor':>9s}  notes")
    for name, secs, note in rows:
        print(f"{name:34s} {secs:9.2f} {secs / floor:9.1f}  {note}")
    print(f"\npeak resident memory: {peak_gb():.2f} GiB")


if __name__ == "__main__":
    main()
