"""Benchmark: the plain and the position-aware null on an arrayed screen with a position effect.

Each draw is the simulated screen of the ``arrayed_plates`` scenario
(:data:`phenoica.screen.POSITION_DESIGN`: one well per construct per plate, 2 batches of 4
replicate plates, 64 control wells of 4 constructs scattered over the plate, edge wells and a row
gradient shifting one programme each by the effect's own size) with another seed, the same screen
without the position effect, and the same screen with control constructs all alike (the scenario's
last construct differs from the others; a position-aware pseudo-guide is one construct, so it
carries that difference whole where a plain one mixes constructs). The classifier scores every real guide once (leave-one-batch-out,
the schema's defaults, concentration off: it changes no AUROC), and both nulls (the plain null's 100
pseudo-guides and the position-aware null's distinct ones) beside them; the hit calls are made
against each. Per screen and null it prints, pooled over the draws and the variants ``base`` and
``pca``:

- the observed FDR among the calls (guides without effect called / calls, Wilson 95% interval;
  nominal 0.05) and the recall of the effect guides;
- the calls among the guides without effect at an edge well, and elsewhere;
- the null's calibration: the pseudo-guides' leave-one-out KS p (median over (draw, variant)).

    python benchmarks/position_null.py --draws 6
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time

import numpy as np
import pandas as pd

from phenoica.classify import (
    NULL_GENE,
    ClassifyOptions,
    GuideSamples,
    SplitOptions,
    classify_guides,
    make_folds,
    null_guide_design,
)
from phenoica.contract import BATCH, CONTROL, GUIDE, PERT_TYPE, WELL, feature_columns, validate_config
from phenoica.hits import screen_calls
from phenoica.screen import (
    PLATE_COLUMNS,
    PLATE_ROWS,
    POSITION_DESIGN,
    ArrayedDesign,
    screen_profiles,
    well_position,
)
from phenoica.transforms import TransformOptions, fit_variants

VARIANTS = ("base", "pca")
NULLS = ("plain", "position")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def screen(design: ArrayedDesign, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The screen's per-well profiles and its truth."""
    return screen_profiles(design, seed)


def variant_tables(profiles: pd.DataFrame, cfg: dict, seed: int) -> dict[str, pd.DataFrame]:
    """``base`` and ``pca`` as the workflow fits them (schema defaults)."""
    features = feature_columns(profiles)
    X = profiles[features].to_numpy(np.float64)
    b = profiles[BATCH].astype(str).to_numpy()
    c = (profiles[PERT_TYPE].astype(str) == CONTROL).to_numpy()
    fitted = fit_variants(["pca"], X, b, c, TransformOptions.from_config(cfg)._replace(seed=seed), features)
    meta = profiles[[col for col in profiles.columns if col not in features]].reset_index(drop=True)
    Z = fitted["pca"].transform(X, b, c)
    pca = pd.concat([meta, pd.DataFrame(Z, columns=[f"emb_{i:04d}" for i in range(Z.shape[1])])], axis=1)
    return {"base": profiles.reset_index(drop=True), "pca": pca}


def one_draw(design: ArrayedDesign, seed: int, cfg: dict) -> pd.DataFrame:
    """Every guide's call against each null on one screen: the hit table with ``null``,
    ``has_effect`` and ``edge``, and the null's KS p as ``ks_p``."""
    profiles, truth = screen(design, seed)
    options = ClassifyOptions.from_config(cfg)._replace(seed=seed, concentration=False)
    edge = {
        w: (r in (0, len(PLATE_ROWS) - 1) or c in (0, PLATE_COLUMNS - 1))
        for w in profiles[WELL].unique()
        for r, c in [well_position(w)]
    }
    well_of = profiles.drop_duplicates(GUIDE).set_index(GUIDE)[WELL]
    out = []
    for variant, table in variant_tables(profiles, cfg, seed).items():
        folds = make_folds(table, SplitOptions.from_config(cfg)._replace(seed=seed))
        designs = {name: null_guide_design(table, options.n_null_guides, seed, layout=name) for name in NULLS}
        renamed = [
            GuideSamples(NULL_GENE, f"{name}:{g.guide}", g.rows, True) for name, gs in designs.items() for g in gs
        ]
        rows = classify_guides(table, None, folds, options, variant, "sim", nulls=renamed)
        for name in NULLS:
            null_rows = rows[GUIDE].astype(str).str.startswith(f"{name}:")
            keep = ~rows["is_null_guide"].astype(bool) | null_rows
            calls = screen_calls(rows[keep].reset_index(drop=True), None, cfg["hits"]["null_model"], 0.05)
            guides = calls["guides"][~calls["guides"]["is_null_guide"]]
            out.append(
                guides.assign(
                    null=name,
                    n_null=len(designs[name]),
                    ks_p=float(calls["null"]["loo_uniform_ks_p"].iloc[0]),
                    has_effect=guides[GUIDE].map(truth.set_index(GUIDE)["has_effect"]).astype(bool),
                    edge=guides[GUIDE].map(well_of).map(edge).astype(bool),
                    draw=seed,
                )
            )
    return pd.concat(out, ignore_index=True)


def summarize(calls: pd.DataFrame) -> list[str]:
    lines = []
    for name in NULLS:
        sub = calls[calls["null"] == name]
        called = sub[sub["hit"].astype(bool)]
        false = int((~called["has_effect"]).sum())
        lo, hi = wilson(false, len(called))
        recall = called["has_effect"].sum() / max(1, int(sub["has_effect"].sum()))
        inert = sub[~sub["has_effect"]]
        ks = sub.drop_duplicates(["draw", "variant"])["ks_p"]
        lines.append(
            f"  {name:8s} null ({int(sub['n_null'].median())} pseudo-guides): FDR {false}/{len(called)} = "
            f"{false / max(1, len(called)):.3f} [{lo:.3f}, {hi:.3f}], recall {recall:.3f}; guides without effect "
            f"called: edge {int(inert[inert['edge']]['hit'].sum())}/{int(inert['edge'].sum())}, elsewhere "
            f"{int(inert[~inert['edge']]['hit'].sum())}/{int((~inert['edge']).sum())}; null KS p median "
            f"{ks.median():.2f}, {int((ks <= 0.01).sum())} of {len(ks)} <= 0.01"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=6)
    args = parser.parse_args()
    cfg = validate_config({})
    screens = {
        "position effect": POSITION_DESIGN,
        "no position effect": dataclasses.replace(POSITION_DESIGN, edge_effect=0.0, row_gradient=0.0),
        "position effect, alike control constructs": dataclasses.replace(POSITION_DESIGN, control_effect=0.0),
    }
    for label, design in screens.items():
        t0 = time.perf_counter()
        draws = []
        for seed in range(args.draws):
            draws.append(one_draw(design, seed, cfg))
            print(f"  {label}: draw {seed} done ({time.perf_counter() - t0:.0f} s)", flush=True)
        print(f"{label}, {args.draws} draws, variants {', '.join(VARIANTS)} ({time.perf_counter() - t0:.0f} s):")
        print("\n".join(summarize(pd.concat(draws, ignore_index=True))), flush=True)


if __name__ == "__main__":
    main()
