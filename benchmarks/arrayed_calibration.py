"""Benchmark: hit calls on the field's arrayed layout at the schema's defaults, over many draws.

Each draw is the simulated arrayed screen of :mod:`phenoica.screen.arrayed` (one well per guide
per plate, 4 replicate plates per batch, 16 control wells of 4 constructs at fixed positions, one
construct differing from the rest, 300 correlated features) with another seed, at 2 and at 3
batches. The screen goes through what the workflow runs on it: leave-one-batch-out folds, the
variants ``base``, ``pca`` and ``pca_ica`` (the schema's transform settings), the classifier
readout with its pseudo-guide null and the control constructs, and the mAP readout, every
setting at the schema's defaults. Per layout it prints, over the draws:

- the null's calibration: the pseudo-guides' leave-one-out KS p (median, and the share of
  (draw, variant) pairs with p <= 0.01);
- recall of the guides with an effect at q < 0.05, and the observed FDR among the calls (pooled
  over draws and variants, with a Wilson 95% interval), for both readouts;
- how often the differing control construct, and how often an inert one, is called a hit.

    python benchmarks/arrayed_calibration.py --draws 10          # about 10 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

from phenoica.classify import (
    ClassifyOptions,
    SplitOptions,
    classify_guides,
    control_constructs,
    guide_map,
    make_folds,
    null_guide_design,
    split_control_rows,
)
from phenoica.contract import BATCH, CONTROL, GUIDE, PERT_TYPE, feature_columns, validate_config
from phenoica.hits import control_calls, screen_calls
from phenoica.screen import ArrayedDesign, screen_profiles
from phenoica.transforms import TransformOptions, fit_variants

VARIANTS = ("base", "pca", "pca_ica")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def variant_tables(profiles: pd.DataFrame, cfg: dict, seed: int) -> dict[str, pd.DataFrame]:
    """The screen's variants as the workflow fits them (schema defaults)."""
    features = feature_columns(profiles)
    X = profiles[features].to_numpy(np.float64)
    b = profiles[BATCH].astype(str).to_numpy()
    c = (profiles[PERT_TYPE].astype(str) == CONTROL).to_numpy()
    fitted = fit_variants(["pca", "pca_ica"], X, b, c, TransformOptions.from_config(cfg)._replace(seed=seed), features)
    meta = profiles[[col for col in profiles.columns if col not in features]].reset_index(drop=True)
    out = {"base": profiles.reset_index(drop=True)}
    for name, transform in fitted.items():
        Z = transform.transform(X, b, c)
        out[name] = pd.concat([meta, pd.DataFrame(Z, columns=[f"emb_{i:04d}" for i in range(Z.shape[1])])], axis=1)
    return out


def one_draw(n_batches: int, seed: int, cfg: dict) -> dict[str, pd.DataFrame]:
    """Every readout's calls on one simulated screen."""
    design = ArrayedDesign(n_batches=n_batches)
    profiles, truth = screen_profiles(design, seed)
    options = ClassifyOptions.from_config(cfg)._replace(seed=seed)
    rows, maps = [], []
    for variant, table in variant_tables(profiles, cfg, seed).items():
        folds = make_folds(table, SplitOptions.from_config(cfg)._replace(seed=seed))
        nulls = null_guide_design(table, options.n_null_guides, seed, layout=options.null_layout)
        nulls += control_constructs(table)
        rows.append(classify_guides(table, None, folds, options, variant, "sim", nulls=nulls))
        maps.append(guide_map(table, variant, "sim", seed, cfg["classify"]["map_null_size"]))
    guide_rows, control_rows = split_control_rows(pd.concat(rows, ignore_index=True))
    calls = screen_calls(guide_rows, pd.concat(maps, ignore_index=True), cfg["hits"]["null_model"], 0.05)
    controls = control_calls(control_rows, calls["guides"], cfg["hits"]["null_model"], 0.05)
    effect = truth.set_index(GUIDE)["has_effect"]
    hits = calls["hits"].assign(has_effect=lambda d: d[GUIDE].map(effect).astype(bool))
    controls = controls.assign(has_effect=lambda d: d[GUIDE].map(effect).astype(bool))
    return {"hits": hits, "null": calls["null"], "controls": controls}


def summarize(draws: list[dict[str, pd.DataFrame]]) -> list[str]:
    hits = pd.concat([d["hits"] for d in draws], ignore_index=True)
    null = pd.concat([d["null"] for d in draws], ignore_index=True)
    controls = pd.concat([d["controls"] for d in draws], ignore_index=True)
    ks = null["loo_uniform_ks_p"].to_numpy(dtype=float)
    lines = [
        f"  null KS p: median {np.nanmedian(ks):.2f}, {int((ks <= 0.01).sum())} of {len(ks)} (draw, variant) "
        f"pairs <= 0.01; no calls in {int((~null['calls'].astype(bool)).sum())}"
    ]
    for readout, col in (("classifier", "hit"), ("mAP", "map_hit")):
        for variant in VARIANTS:
            sub = hits[hits["variant"] == variant]
            called = sub[sub[col].astype(bool)]
            false = int((~called["has_effect"]).sum())
            lo, hi = wilson(false, len(called))
            recall = called["has_effect"].sum() / max(1, int(sub["has_effect"].sum()))
            lines.append(
                f"  {readout:10s} {variant:8s} recall {recall:.2f}  FDR {false}/{len(called)} = "
                f"{false / max(1, len(called)):.3f} [{lo:.3f}, {hi:.3f}] (nominal 0.05)"
            )
    for readout, col in (("classifier", "hit"), ("mAP", "map_hit")):
        per_draw = [
            float((d["hits"]["variant"].eq("base") & d["hits"][col] & d["hits"]["has_effect"]).sum())
            / max(1, int((d["hits"]["variant"].eq("base") & d["hits"]["has_effect"]).sum()))
            for d in draws
        ]
        lines.append(
            f"  {readout} base recall per draw: mean {np.mean(per_draw):.3f}, sd {np.std(per_draw, ddof=1):.3f}, "
            f"min {min(per_draw):.3f} over {len(per_draw)} draws"
        )
    differs = controls[controls["has_effect"]]
    inert = controls[~controls["has_effect"]]
    lines.append(
        f"  control constructs called: differing {int(differs['hit'].sum())}/{len(differs)}, "
        f"inert {int(inert['hit'].sum())}/{len(inert)}"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--batches", type=int, nargs="+", default=[2, 3])
    args = parser.parse_args()
    cfg = validate_config({})
    print(
        f"defaults: classify.min_train_samples {cfg['classify']['min_train_samples']}, min_test_samples "
        f"{cfg['classify']['min_test_samples']}, n_null_guides {cfg['classify']['n_null_guides']}, "
        f"null_model {cfg['hits']['null_model']}, n_components {cfg['transforms']['n_components']}"
    )
    for n_batches in args.batches:
        t0 = time.perf_counter()
        draws = []
        for seed in range(args.draws):
            draws.append(one_draw(n_batches, seed, cfg))
            print(f"  draw {seed} done ({time.perf_counter() - t0:.0f} s)", flush=True)
        print(f"{n_batches} batches x 4 plates, {args.draws} draws ({time.perf_counter() - t0:.0f} s):")
        print("\n".join(summarize(draws)), flush=True)


if __name__ == "__main__":
    main()
