"""Fidelity of the fast classification protocol against the exact one, on one screen.

Scores a screen's guides and pseudo-guides under ``classify.protocol`` exact and fast (same seed,
same settings otherwise) and, with ``--seed-reference``, under exact again with the seed + 1: the
exact protocol's own seed-to-seed agreement, the yardstick for the approximation's. Hit calls
are ``phenoica.hits.screen_calls`` (parametric null). Prints, for each comparison with the
exact protocol:

- Spearman of the real guides' AUROC (mean over folds), and of their concentration;
- Jaccard of the guide hits and of the gene hits at q < ``--q`` (0.1);
- per protocol: the hit counts, the null's calibration (Kolmogorov-Smirnov p of the
  pseudo-guides' leave-one-out p-values against uniform, ``loo_uniform_ks_p``) and CPU seconds.

Screens: ``--screen positive_control`` builds the positive control
(``phenoica.screen.known_truth``) with the design given by the flags (default: its own
design scaled to 12 batches and 48 control wells per plate, so that the fast protocol's defaults
act: 12 folds in 4 groups, 8,448 training controls capped at 4,000); ``--screen arrayed`` the
arrayed per-well screen of ``benchmarks/classify_growth.py`` at ``--guides-scale`` times its
guides (2 batches: the folds are never grouped; at 4x 256 training controls per fold, so a
``--fast-train-controls`` below that acts); ``--screen position`` the arrayed screen with its
planted plate-position effect (``phenoica.screen.POSITION_DESIGN``: 256 training controls a
fold), scored as ``tests/test_plates.py`` scores it (concentration off, the plain and the
position-aware null's pseudo-guides scored together, the calls made against each null apart,
with the guides without effect called counted); ``--table`` and
``--folds`` score a profile table of a finished run (a ``transforms/{model}/{variant}.parquet``
with its ``splits/{model}.parquet``). ``--fast-fold-groups`` / ``--fast-train-controls`` lower the
fast protocol's thresholds where a small screen would not reach them; ``--fast-leaf`` sets
``classify.fast_leaf``; ``--control-scope plates`` sets ``classify.control_scope`` for the
candidate, which is then ``exact`` on each guide's plates (named ``exact, plates``) instead of
``fast``: each guide classified against its own plates' controls, compared with every control of
the fold; ``--guides-scale`` grows the position screen as well (its guides on as many plate maps).
Every figure is printed with
the thresholds and whether each approximation acted (folds grouped, controls capped).

    python benchmarks/classify_fidelity.py --screen positive_control [--batches 12] [--seed-reference]
    python benchmarks/classify_fidelity.py --screen arrayed --guides-scale 4 --fast-train-controls 128 [--seed-reference]
    python benchmarks/classify_fidelity.py --screen position --null-model parametric --q 0.05 --seed-reference
    python benchmarks/classify_fidelity.py --table RUN/transforms/mae/pca_ica.parquet --folds RUN/splits/mae.parquet \\
        [--fast-fold-groups 2 --fast-train-controls 192]
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from classify_growth import arrayed_design
from scipy import stats

from phenoica.classify import (
    NULL_GENE,
    ClassifyOptions,
    GuideSamples,
    classify_guides,
    leave_one_batch_out,
    null_guide_design,
    read_folds,
    trainings,
)
from phenoica.contract import GENE, GUIDE, feature_name, validate_config
from phenoica.hits import screen_calls
from phenoica.screen import POSITION_DESIGN, SCREENS, VECTOR, ArrayedDesign, screen_profiles, write_known_truth_screen

#: The null layouts ``--screen position`` calls against, each apart.
LAYOUTS = ("plain", "position")


def positive_control_table(args: argparse.Namespace) -> pd.DataFrame:
    """The positive control's embeddings as a profile table (emb_* columns), built in a temporary folder."""
    design = dataclasses.replace(
        SCREENS["positive_control"],
        n_batches=args.batches,
        control_wells=args.control_wells,
        n_effect_genes=args.effect_genes,
        n_null_genes=args.null_genes,
    )
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_known_truth_screen(tmp, seed=args.seed, design=design)
        parts = [pd.read_parquet(f) for f in paths["files"]]
    table = pd.concat(parts, ignore_index=True)
    X = np.stack(table.pop(VECTOR).to_numpy()).astype(np.float32)
    feats = pd.DataFrame(X, columns=[feature_name(j) for j in range(X.shape[1])])
    return pd.concat([table, feats], axis=1)


def position_design(scale: int) -> ArrayedDesign:
    """``POSITION_DESIGN`` at ``scale`` times its genes and allele genes, on as many plate maps."""
    d = POSITION_DESIGN
    if scale == 1:
        return d
    return dataclasses.replace(
        d,
        n_effect_genes=d.n_effect_genes * scale,
        n_null_genes=d.n_null_genes * scale,
        n_allele_genes=d.n_allele_genes * scale,
        plate_maps=scale,
    )


def score(
    table: pd.DataFrame, folds: list, options: ClassifyOptions, null_model: str, q_threshold: float
) -> tuple[dict[str, pd.DataFrame], float]:
    """Score every guide and ``n_null_guides`` pseudo-guides; the hit calls under ``null_model`` at
    ``q_threshold`` (with the score rows under ``rows``) and CPU seconds."""
    nulls = null_guide_design(table, options.n_null_guides, options.seed)
    t0 = time.process_time()
    rows = classify_guides(table, None, folds, options, "variant", "model", nulls=nulls)
    cpu = time.process_time() - t0
    return {**screen_calls(rows, None, null_model, q_threshold), "rows": rows}, cpu


def score_layouts(
    table: pd.DataFrame, folds: list, options: ClassifyOptions, null_model: str, q_threshold: float
) -> tuple[dict[str, dict[str, pd.DataFrame]], float]:
    """``--screen position``: every guide and the pseudo-guides of both null layouts scored in one
    call (concentration off), then the calls against each layout's pseudo-guides alone."""
    options = options._replace(concentration=False)
    nulls = [
        GuideSamples(NULL_GENE, f"{layout}:{g.guide}", g.rows, True)
        for layout in LAYOUTS
        for g in null_guide_design(table, options.n_null_guides, options.seed, layout=layout)
    ]
    t0 = time.process_time()
    rows = classify_guides(table, None, folds, options, "base", "model", nulls=nulls)
    cpu = time.process_time() - t0
    out = {}
    for layout in LAYOUTS:
        keep = ~rows["is_null_guide"] | rows[GUIDE].str.startswith(f"{layout}:")
        part = rows[keep].reset_index(drop=True)
        out[layout] = {**screen_calls(part, None, null_model, q_threshold), "rows": part}
    return out, cpu


def _mask(rows: np.ndarray, n: int) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    return mask


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def compare(ref: dict[str, pd.DataFrame], other: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Agreement of two scorings of the same screen: AUROC and concentration Spearman over the
    real guides, Jaccard of the guide and the gene hits."""
    key = [GENE, GUIDE]
    a = ref["guides"][~ref["guides"]["is_null_guide"]].set_index(key)
    b = other["guides"][~other["guides"]["is_null_guide"]].set_index(key).loc[a.index]
    out = {}
    for col in ("auroc", "concentration"):
        ok = np.isfinite(a[col]) & np.isfinite(b[col])
        out[f"spearman_{col}"] = float(stats.spearmanr(a[col][ok], b[col][ok]).statistic) if ok.sum() > 2 else np.nan
    out["jaccard_guides"] = _jaccard(set(a.index[a["hit"]]), set(b.index[b["hit"]]))
    ga, gb = ref["genes"], other["genes"]
    out["jaccard_genes"] = _jaccard(set(ga[GENE][ga["hit"]]), set(gb[GENE][gb["hit"]]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--screen", choices=["positive_control", "arrayed", "position"], default=None)
    ap.add_argument("--guides-scale", type=int, default=4, help="arrayed: times the base screen's guides")
    ap.add_argument("--table", type=Path, help="a profile table (transforms/{model}/{variant}.parquet)")
    ap.add_argument("--folds", type=Path, help="its folds (splits/{model}.parquet)")
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--control-wells", type=int, default=48, help="positive control: control wells per plate")
    ap.add_argument("--effect-genes", type=int, default=24)
    ap.add_argument("--null-genes", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=None, help="num_boost_round (default: the schema's)")
    ap.add_argument("--nulls", type=int, default=None, help="n_null_guides (default: the schema's)")
    ap.add_argument("--fast-fold-groups", type=int, default=None)
    ap.add_argument("--fast-train-controls", type=int, default=None)
    ap.add_argument("--fast-leaf", choices=["scaled", "configured"], default=None, help="classify.fast_leaf")
    ap.add_argument("--control-scope", choices=["fold", "plates"], default="fold", help="the candidate's scope")
    ap.add_argument("--q", type=float, default=0.1)
    ap.add_argument("--null-model", default=None, help="hits.null_model (default: the schema's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seed-reference", action="store_true", help="also score exact with seed + 1")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if (args.screen is None) == (args.table is None):
        ap.error("give --screen positive_control, --screen arrayed or --table (with --folds)")
    inert: set[str] = set()  # the guides without effect, where the screen's truth is known
    if args.screen == "arrayed":
        table, truth = screen_profiles(arrayed_design(args.guides_scale, "guides"), args.seed)
        inert = set(truth.loc[~truth["has_effect"].astype(bool), GUIDE])
        folds = leave_one_batch_out(table)
        name = f"arrayed per-well screen, {args.guides_scale}x its guides"
    elif args.screen == "position":
        table, truth = screen_profiles(position_design(args.guides_scale), args.seed)
        inert = set(truth.loc[~truth["has_effect"].astype(bool), GUIDE])
        folds = leave_one_batch_out(table)
        name = (
            f"arrayed per-well screen with its plate-position effect (POSITION_DESIGN, {args.guides_scale}x its "
            "guides), concentration off"
        )
    elif args.screen:
        table = positive_control_table(args)
        folds = leave_one_batch_out(table)
        name = f"positive control, {args.batches} batches x {args.control_wells} control wells"
    else:
        if args.folds is None:
            ap.error("--table needs --folds")
        table = pd.read_parquet(args.table)
        folds = read_folds(args.folds, table)
        name = str(args.table)
    classify = {"lightgbm": {"num_threads": 1}}
    for key, value in (
        ("num_boost_round", args.rounds),
        ("n_null_guides", args.nulls),
        ("fast_fold_groups", args.fast_fold_groups),
        ("fast_train_controls", args.fast_train_controls),
        ("fast_leaf", args.fast_leaf),
    ):
        if value is not None:
            classify[key] = value
    hits = {"q_threshold": args.q} | ({"null_model": args.null_model} if args.null_model else {})
    config = validate_config({"classify": classify, "seed": args.seed, "hits": hits})
    options = ClassifyOptions.from_config(config)
    if args.screen == "position":
        options = options._replace(concentration=False)
    fast = options._replace(protocol="fast")
    is_ctrl = table["Metadata_PertType"].astype(str).to_numpy() == "control"
    n_train_ctrl = max(int(is_ctrl[f.train].sum()) for f in folds)
    n_sets = len(
        trainings(
            folds,
            [(f.name, _mask(f.train, len(table)), _mask(f.test, len(table))) for f in folds],
            fast.max_fold_groups,
        )
    )
    print(
        f"{name}: {len(table)} rows, {(~is_ctrl).sum()} perturbation rows, {len(folds)} folds; rounds "
        f"{options.num_boost_round}, {options.n_null_guides} pseudo-guides, concentration {options.concentration}, "
        f"q < {args.q}"
    )
    if args.control_scope == "fold":  # the candidate is fast: say whether its approximations act
        print(
            f"fast: fast_fold_groups {fast.fast_fold_groups} -> {n_sets} training sets per guide "
            f"({'grouped' if n_sets < len(folds) else 'not grouped'}); fast_train_controls {fast.fast_train_controls} "
            f"vs up to {n_train_ctrl} training controls ({'capped' if n_train_ctrl > fast.fast_train_controls else 'not capped'}"
            f", fast_leaf {fast.fast_leaf})"
        )
    candidate = "exact, plates" if args.control_scope == "plates" else "fast"
    protocols = {
        "exact": options._replace(protocol="exact"),
        candidate: options._replace(protocol="exact", control_scope="plates")
        if args.control_scope == "plates"
        else fast,
    }
    if args.seed_reference:
        protocols[f"exact, seed {args.seed + 1}"] = options._replace(protocol="exact", seed=args.seed + 1)
    if args.screen == "position":
        compare_layouts(table, folds, protocols, config["hits"]["null_model"], args.q, inert)
        return
    print(
        f"\n{'run':16s} {'CPU s':>8s} {'guide hits':>10s} {'without effect':>14s} {'gene hits':>9s} {'null KS p':>9s}"
        "  vs exact: AUROC rho, concentration rho, guide-hit Jaccard, gene-hit Jaccard, score rows identical",
        flush=True,
    )
    runs = {}
    for run, run_options in protocols.items():
        calls, cpu = runs[run] = score(table, folds, run_options, config["hits"]["null_model"], args.q)
        ks = float(calls["null"]["loo_uniform_ks_p"].iloc[0])
        real = calls["guides"][~calls["guides"]["is_null_guide"]]
        hits = set(real.loc[real["hit"], GUIDE])
        line = (
            f"{run:16s} {cpu:8.1f} {len(hits):10d} {len(hits & inert):14d} {int(calls['genes']['hit'].sum()):9d} "
            f"{ks:9.3f}"
        )
        if run != "exact":
            ref = runs["exact"][0]
            c = compare(ref, calls)
            line += (
                f"  {c['spearman_auroc']:.4f}, {c['spearman_concentration']:.4f}, "
                f"{c['jaccard_guides']:.3f}, {c['jaccard_genes']:.3f}, {calls['rows'].equals(ref['rows'])}"
            )
        print(line, flush=True)
    print(f"CPU ratio exact / {candidate}: {runs['exact'][1] / runs[candidate][1]:.2f}x")


def compare_layouts(table, folds, protocols, null_model, q, inert) -> None:
    """``--screen position``: per run and null layout, the guide and gene hits, the guides without
    effect called, the null's KS p, and, against exact, the guide-hit and gene-hit Jaccard indices."""
    print(f"\n{'run':16s} {'CPU s':>7s} {'null':9s} {'guide hits':>10s} {'without effect':>14s} {'gene hits':>9s}"
          f" {'null KS p':>9s}  vs exact: guide-hit Jaccard, gene-hit Jaccard", flush=True)  # fmt: skip
    runs = {}
    for run, run_options in protocols.items():
        calls, cpu = runs[run] = score_layouts(table, folds, run_options, null_model, q)
        for layout in LAYOUTS:
            real = calls[layout]["guides"][~calls[layout]["guides"]["is_null_guide"]]
            hits = set(real.loc[real["hit"], GUIDE])
            line = (
                f"{run:16s} {cpu:7.1f} {layout:9s} {len(hits):10d} {len(hits & inert):14d} "
                f"{int(calls[layout]['genes']['hit'].sum()):9d} {float(calls[layout]['null']['loo_uniform_ks_p'].iloc[0]):9.3f}"
            )
            if run != "exact":
                c = compare(runs["exact"][0][layout], calls[layout])
                line += f"  {c['jaccard_guides']:.3f}, {c['jaccard_genes']:.3f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
