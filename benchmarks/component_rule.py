"""Benchmark: the component rules against a grid of counts on a finished run of a known-truth screen.

For every model of the run (``--results``: its results folder, with profiles/ and splits/),
the whitened variants pca and pca_ica are refitted at each count of the sweep grid
(:func:`phenoica.sweep.sweep_grid`) and at the counts the rules ``deflated`` and ``parallel``
choose, and the screen is scored again (:func:`phenoica.sweep.sweep_model`: the run's LightGBM
settings, folds and null, without concentration models). Against the truth (``--truth``), it
prints per grid point and per rule the pooled guide recall (pca and pca_ica, all models) at
q < 0.1 and the observed FDR, and whether each rule reaches 90% of the best grid point's recall
with FDR <= 0.15. Cost: the seconds of the sweep as a ratio of one full classification (with
concentration models, at the deflated count, pca_ica) timed in the same run.

    python benchmarks/component_rule.py --results results --truth results/screen/truth.parquet \
        --configfile config.yaml                                    # the image demo (~15 min on 2 cores)
    python benchmarks/component_rule.py --results results/scenarios/positive_control \
        --truth scenario_data/positive_control/truth.parquet --configfile config/scenarios/positive_control.yaml
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from phenoica.classify import ClassifyOptions, classify_shard, read_folds
from phenoica.contract import BATCH, CONTROL, PERT_TYPE, feature_columns, validate_config
from phenoica.hits import recall_fdr
from phenoica.sweep import SweepOptions, sweep_grid, sweep_model
from phenoica.transforms import TransformOptions, component_name, fit_variants

VARIANTS = ("pca", "pca_ica")


def rule_counts(profiles: pd.DataFrame, fit: TransformOptions) -> dict[str, int]:
    """The count each named rule keeps on these profiles (the run's transform settings)."""
    features = feature_columns(profiles)
    X = profiles[features].to_numpy(np.float64)
    b = profiles[BATCH].astype(str).to_numpy()
    c = (profiles[PERT_TYPE].astype(str) == CONTROL).to_numpy()
    out = {}
    for rule in ("deflated", "parallel"):
        fitted = fit_variants(["pca"], X, b, c, fit._replace(n_components=rule), features)
        out[rule] = int(fitted["pca"].whitener.n_components_)
    return out


def full_classification_seconds(
    profiles: pd.DataFrame, folds, options: ClassifyOptions, fit: TransformOptions, k: int
) -> float:
    """Seconds of one classification as the run does it (concentration models on), pca_ica at k."""
    features = feature_columns(profiles)
    X = profiles[features].to_numpy(np.float64)
    b = profiles[BATCH].astype(str).to_numpy()
    c = (profiles[PERT_TYPE].astype(str) == CONTROL).to_numpy()
    fitted = fit_variants(["pca_ica"], X, b, c, fit._replace(n_components=k), features)
    Z = fitted["pca_ica"].transform(X, b, c).astype(np.float32)
    meta = profiles[[col for col in profiles.columns if col not in features]].reset_index(drop=True)
    table = pd.concat([meta, pd.DataFrame(Z, columns=[component_name(i) for i in range(k)])], axis=1)
    start = time.perf_counter()
    classify_shard(table, 0, folds, options._replace(n_shards=1), variant="pca_ica", model="bench")
    return time.perf_counter() - start


def pooled(calls: pd.DataFrame, truth: pd.DataFrame) -> tuple[float, float, int, int]:
    """Pooled guide recall and observed FDR at q < 0.1 over the given calls (all models, variants)."""
    r = recall_fdr(calls, truth, (0.1,))
    r = r[r["level"] == "guide"]
    tp, fp, pos = int(r["true_positives"].sum()), int(r["false_positives"].sum()), int(r["n_true_effects"].sum())
    return tp / pos if pos else float("nan"), fp / (tp + fp) if tp + fp else 0.0, tp, fp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", required=True)
    parser.add_argument("--truth", required=True)
    parser.add_argument("--configfile", required=True)
    parser.add_argument("--out", default=None, help="CSV of the grid (default: <results>/component_rule.csv)")
    args = parser.parse_args()
    cfg = validate_config(yaml.safe_load(Path(args.configfile).read_text()) or {})
    options = SweepOptions.from_config(cfg)._replace(variants=list(VARIANTS))
    run, fit = ClassifyOptions.from_config(cfg), TransformOptions.from_config(cfg)
    truth = pd.read_parquet(args.truth)
    results = Path(args.results)
    calls, chosen, seconds, baseline = [], {}, 0.0, 0.0
    for path in sorted((results / "profiles").glob("*.parquet")):
        model = path.stem
        profiles = pd.read_parquet(path)
        folds = read_folds(results / "splits" / f"{model}.parquet", profiles)
        chosen[model] = rule_counts(profiles, fit)
        grid = sorted(
            set(sweep_grid(len(feature_columns(profiles)), len(profiles), 2, options.points))
            | set(chosen[model].values())
        )
        print(f"{model}: rules keep {chosen[model]}; grid {grid}", flush=True)
        baseline += full_classification_seconds(profiles, folds, run, fit, chosen[model]["deflated"])
        start = time.perf_counter()
        table, model_calls = sweep_model(profiles, folds, model, chosen[model]["deflated"], options, grid)
        seconds += time.perf_counter() - start
        calls.append(model_calls.assign(model=model))
    calls = pd.concat(calls, ignore_index=True)
    rows = []
    for k in sorted(calls["n_components"].unique()):
        at = calls[calls["n_components"] == k]
        if at["model"].nunique() == len(chosen):
            rows.append(("grid", str(k), *pooled(at, truth)))
    for rule in ("deflated", "parallel"):
        picked = pd.concat(
            [calls[(calls["model"] == m) & (calls["n_components"] == c[rule])] for m, c in chosen.items()]
        )
        rows.append((rule, "/".join(str(c[rule]) for c in chosen.values()), *pooled(picked, truth)))
    out = pd.DataFrame(rows, columns=["point", "n_components", "recall", "observed_fdr", "true_pos", "false_pos"])
    best = out.loc[out["point"] == "grid", "recall"].max()
    out["share_of_best"] = out["recall"] / best
    out["well"] = (out["share_of_best"] >= 0.9) & (out["observed_fdr"] <= 0.15)
    print(out.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(
        f"sweep: {seconds:.0f} s for {len(calls.groupby(['model', 'n_components', 'variant']))} (model, count, variant) "
        f"points = {seconds / baseline:.2f}x one full classification ({baseline:.0f} s, concentration on, one "
        "variant per model)"
    )
    out.to_csv(args.out or results / "component_rule.csv", index=False)


if __name__ == "__main__":
    main()
