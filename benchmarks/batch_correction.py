"""The post-processing variants beside the field's batch correction, by the field's measures.

Two parts, each printing one table:

1. ``--profiles PATH``: a run's profile table (``results/.../profiles/<model>.parquet``: after the
   profile hygiene, before any transform). Replicate retrieval across batches
   (:func:`phenoica.classify.guide_retrieval`, mean over guides with a 95% bootstrap interval, and
   the ratio to ``base`` measured in the same run) for:

   - ``base`` (the profiles as they came) and ``center_scale`` (each batch centred and scaled on
     its own control wells, the first step of every whitened variant);
   - the whitening (phenoica's own ``pca`` fit) on all wells or on the control wells, with a
     relative ridge of 0 or 1, at the component rule ``deflated`` and at the counts of ``--counts``;
   - the field's references: pycytominer's ``Spherize`` fitted on the control wells (ZCA-cor, the
     JUMP recipe's sphering, epsilon 0.1) and Harmony (harmonypy, the top method of the field's
     batch-correction benchmark, on the center-scaled profiles' 50 leading principal components,
     the batch as its covariate). harmonypy is not a dependency of phenoica: the row is left out,
     with a note, where it is not installed.

2. ``--runs NAME=DIR ...``: finished runs' report tables. Per run and variant: replicate retrieval
   (``tables/retrieval.csv``), the classifier's mean gene AUROC, guides at AUROC 1.000, the null's
   mean AUROC and leave-one-out KS p, and the paired gene AUROC comparisons with their intervals
   (``pca_ica`` against ``base``, ``pca`` and ``pca_rand``).

Usage (the shipped plate, its two image sets as two batches)::

    snakemake --cores 2 --configfile config/scenarios/varchamp_microscopes.yaml
    python benchmarks/batch_correction.py \
        --profiles results/scenarios/varchamp_microscopes/profiles/cellprofiler.parquet \
        --runs plate=results/scenarios/varchamp_microscopes
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from phenoica.classify import MapReadoutOptions, guide_retrieval, mean_retrieval, well_profiles
from phenoica.contract import BATCH, CONTROL, PERT_TYPE, feature_columns, validate_config
from phenoica.transforms import CenterScale, TransformOptions, fit_variants


def transform_options(fit_on: str, ridge: float, count: int | float | str, seed: int) -> TransformOptions:
    """The ``pca`` variant's fit settings: the schema's defaults but for these."""
    transforms = {"variants": ["pca"], "fit_on": fit_on, "whiten_ridge": ridge, "n_components": count}
    return TransformOptions.from_config(validate_config({"seed": seed, "transforms": transforms}))


def harmony(Xc: np.ndarray, batches: np.ndarray, seed: int) -> np.ndarray | None:
    """Harmony's corrected leading principal components of the center-scaled wells, or None where
    harmonypy is not installed."""
    if importlib.util.find_spec("harmonypy") is None:
        return None
    import harmonypy

    centred = Xc - Xc.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    pcs = centred @ vt[: min(50, vt.shape[0])].T
    out = harmonypy.run_harmony(pcs, pd.DataFrame({"batch": batches}), ["batch"], random_state=seed, verbose=False)
    Z = np.asarray(out.Z_corr)
    return Z.T if Z.shape[0] != len(batches) else Z


def retrieval_rows(path: str, counts: list[int | float | str], seed: int) -> pd.DataFrame:
    """Part 1: replicate retrieval of every profile construction on one profile table."""
    wells = well_profiles(pd.read_parquet(path)).reset_index(drop=True)
    features = feature_columns(wells)
    X = wells[features].to_numpy(np.float64)
    batches = wells[BATCH].astype(str).to_numpy()
    is_control = (wells[PERT_TYPE].astype(str) == CONTROL).to_numpy()
    meta = wells.drop(columns=features)
    Xc = CenterScale().fit(X, batches, is_control, features).transform(X, batches)
    constructions: list[tuple[str, Callable[[], np.ndarray | None]]] = [
        ("base", lambda: X),
        ("center_scale", lambda: Xc),
    ]
    for fit_on in ("all", "controls"):
        for ridge in (0.0, 1.0):
            for count in ["deflated", *counts]:

                def whitened(
                    fit_on: str = fit_on, ridge: float = ridge, count: int | float | str = count
                ) -> np.ndarray:
                    opts = transform_options(fit_on, ridge, count, seed)
                    fitted = fit_variants(["pca"], X, batches, is_control, opts, features)["pca"]
                    return fitted.transform(X, batches, is_control)

                constructions.append((f"pca fit_on={fit_on} ridge={ridge:g} n_components={count}", whitened))

    def sphering() -> np.ndarray:
        from pycytominer.operations.transform import Spherize

        spherize = Spherize(epsilon=0.1, method="ZCA-cor", return_numpy=True).fit(pd.DataFrame(X[is_control]))
        return np.asarray(spherize.transform(pd.DataFrame(X)))

    constructions += [
        ("pycytominer spherize (ZCA-cor on controls)", sphering),
        ("harmony (harmonypy, 50 PCs of center_scale)", lambda: harmony(Xc, batches, seed)),
    ]
    rows, base = [], None
    for name, build in constructions:
        start = time.process_time()
        try:
            Z = build()
        except ValueError as err:  # a count above what the fit rows allow, named
            rows.append({"profiles": name, "note": str(err)[:90]})
            continue
        if Z is None:
            rows.append({"profiles": name, "note": "harmonypy is not installed"})
            continue
        table = pd.concat([meta, pd.DataFrame(Z, columns=[f"f{i}" for i in range(Z.shape[1])])], axis=1)
        bounds = MapReadoutOptions.from_config(validate_config({}))
        r = mean_retrieval(
            guide_retrieval(table, max_guides=bounds.retrieval_max_guides, max_wells=bounds.retrieval_max_wells), seed
        )
        base = r.mean if base is None else base
        rows.append(
            {
                "profiles": name,
                "width": Z.shape[1],
                "retrieval": r.mean,
                "ci_low": r.low,
                "ci_high": r.high,
                "ratio_to_base": r.mean / base,
                "cpu_s": time.process_time() - start,
                "note": "",
            }
        )
    return pd.DataFrame(rows)


def run_rows(name: str, results: Path) -> pd.DataFrame:
    """Part 2: one finished run's variants by the field's and the classifier's measures."""
    tables = results / "report" / "tables"
    retrieval = pd.read_csv(tables / "retrieval.csv").set_index("variant")
    null = pd.read_csv(tables / "null_calibration.csv").set_index("variant")
    tests = pd.read_csv(tables / "paired_tests.csv")
    tests = tests[(tests["metric"] == "auroc") & (tests["variant"] == "pca_ica")].set_index("reference")
    guides = pd.read_parquet(results / "hits" / "guides.parquet")
    real = guides[~guides["is_null_guide"].astype(bool)]
    genes = pd.read_parquet(results / "hits" / "genes.parquet")
    rows = []
    for variant in retrieval.index:
        g = real[real["variant"] == variant]
        row = {
            "run": name,
            "variant": variant,
            "retrieval": retrieval.loc[variant, "retrieval"],
            "retrieval_ci": f"[{retrieval.loc[variant, 'ci_low']:.3f}, {retrieval.loc[variant, 'ci_high']:.3f}]",
            "gene_auroc": float(genes.loc[genes["variant"] == variant, "auroc"].mean()),
            "guides_at_1": int((g["auroc"] >= 1.0 - 1e-12).sum()),
            "guide_hits": int((g["q_value"] < 0.05).sum()),
            "null_auroc": null.loc[variant, "null_auroc_mean"] if variant in null.index else np.nan,
            "null_loo_ks_p": null.loc[variant, "loo_uniform_ks_p"] if variant in null.index else np.nan,
        }
        rows.append(row)
    out = pd.DataFrame(rows)
    for ref in ("base", "pca", "pca_rand"):
        if ref in tests.index:
            t = tests.loc[ref]
            out.loc[out["variant"] == "pca_ica", f"pca_ica-{ref}"] = (
                f"{t['mean_diff']:+.3f} [{t['ci_low']:+.3f}, {t['ci_high']:+.3f}]"
            )
    return out


def component_rule_arg(text: str) -> int | float | str:
    """A component rule as ``transforms.n_components`` takes it: a count, a fraction or a name."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", nargs="*", default=[], help="profile tables (part 1)")
    parser.add_argument("--runs", nargs="*", default=[], help="NAME=RESULTS_DIR of finished runs (part 2)")
    parser.add_argument(
        "--counts",
        type=component_rule_arg,
        nargs="*",
        default=[16, 64, 256],
        help="component rules besides deflated: counts, fractions of the variance, or rule names",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    pd.set_option("display.width", 250, "display.max_columns", 30, "display.max_colwidth", 60)
    for path in args.profiles:
        print(f"\n== replicate retrieval across batches: {path}")
        print(retrieval_rows(path, args.counts, args.seed).to_string(index=False, float_format="{:.3f}".format))
    if args.runs:
        frames = [run_rows(name, Path(results)) for name, results in (spec.split("=", 1) for spec in args.runs)]
        print("\n== runs: the field's measure, the classifier, the null")
        print(pd.concat(frames).to_string(index=False, float_format="{:.3f}".format))


if __name__ == "__main__":
    main()
