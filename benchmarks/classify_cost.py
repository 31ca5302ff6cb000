"""Classification cost under both protocols (exact, fast), the concentration switch, the null,
and the CPU-hours of a genome-scale screen.

Synthetic screen at the paper's scale of controls (22,062 control samples x 384 features in 4
batches, well-structured: 4 samples per well), guides of one well per plate, one
leave-one-batch-out fold (3 of 4 batches train: a guide keeps 75% of its wells, as in a fast
fold group of 4 at 40 batches), Nelson et al. 2026 Table 6 parameters, ``num_threads`` 1. In one
run, for ``classify.protocol`` exact and fast (schema defaults of ``fast_fold_groups`` and
``fast_train_controls``):

- real guides with concentration on (3 models per guide), off (the full model only), and
  pseudo-guides (1 model each), ``classify_guides`` end to end on the fold;
- setup: what the library does once per training set (bin boundaries on its training
  controls, the block's binned columns), timed alone;
- exact only (unless ``--no-floor``): the floor, the same models trained on prebuilt,
  already-binned Datasets (only ``lightgbm.train`` timed), and the per-guide ratio.

Times are CPU seconds of this process (``time.process_time``; every path runs on one thread),
so other work on the machine does not bias the ratios. The cost per guide and training set
(setup spread over the guides of one classify job of the screen config) gives the CPU-hours of
classification for that config (default ``benchmarks/genome_scale.yaml``): guides x training
sets per guide x (model, variant) pairs, plus the pseudo-guides. Training sets per guide:
exact, one per fold (folds = batches under leave-one-batch-out); fast, at most
``fast_fold_groups``. The exact estimate uses the 75% training share measured here (at 40
batches exact trains on 97.5%: slightly more positives), so the ratio exact / fast it prints is,
if anything, low.

``--profile`` instead says where a real guide's CPU goes on that fold under each protocol: the
engine's steps timed one by one as ``benchmarks/classify_growth.py --profile`` times them (CPU ms
per guide), with the leaves per tree and the CPU per boosting round.

    python benchmarks/classify_cost.py [--guides 8] [--nulls 8] [--rounds 100] [--no-floor] [--config benchmarks/genome_scale.yaml]
        [--fast-train-controls 1000]
    python benchmarks/classify_cost.py --profile [--guides 4] [--fast-train-controls 128]
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
import yaml

from phenoica.classify import (
    PROTOCOLS,
    ClassifyOptions,
    Fold,
    FoldBins,
    GuideSamples,
    classify_guides,
    control_mask,
    control_strata,
    feature_matrix,
    guide_samples,
    guide_seed,
    guides_of,
    null_count,
    null_guide_design,
    training_controls,
)
from phenoica.contract import (
    BATCH,
    CONTROL,
    GENE,
    GUIDE,
    IMAGE_INDEX,
    PERT_TYPE,
    PERTURBATION,
    PLATE,
    SITE,
    WELL,
    validate_config,
)
from phenoica.utils import top_features

SITES = 4


def synthetic_screen(
    n_controls: int, n_features: int, n_guides: int, n_batches: int, plates: int, seed: int
) -> pd.DataFrame:
    """Control wells and guide wells (one per plate) of ``SITES`` samples; every third guide
    shifts 3 features by 1 SD; batch shifts on every sample."""
    rng = np.random.default_rng(seed)
    ctrl_wells = n_controls // SITES
    meta = []
    for w in range(ctrl_wells):
        b, p = w % n_batches, (w // n_batches) % plates
        meta += [(f"B{b}", f"B{b}P{p}", f"C{w:06d}", s, "NTC", "NTC_1", CONTROL, 0) for s in range(SITES)]
    for g in range(n_guides):
        for b in range(n_batches):
            for p in range(plates):
                meta += [
                    (
                        f"B{b}",
                        f"B{b}P{p}",
                        f"G{g:05d}",
                        s,
                        f"GENE{g // 2:05d}",
                        f"GENE{g // 2:05d}_{g % 2}",
                        PERTURBATION,
                        int(g % 3 == 0),
                    )
                    for s in range(SITES)
                ]
    t = pd.DataFrame(meta, columns=[BATCH, PLATE, WELL, SITE, GENE, GUIDE, PERT_TYPE, "effect"])
    t[IMAGE_INDEX] = np.arange(len(t))
    batch = t[BATCH].str[1:].astype(int).to_numpy()
    X = rng.standard_normal((len(t), n_features)).astype(np.float32)
    X += 0.3 * rng.standard_normal((n_batches, n_features)).astype(np.float32)[batch]
    X[np.flatnonzero(t["effect"].to_numpy()), :3] += 1.0
    feats = pd.DataFrame(X, columns=[f"emb_{j:04d}" for j in range(n_features)])
    return pd.concat([t.drop(columns="effect"), feats], axis=1)


def floor_seconds(
    table: pd.DataFrame, targets: list[GuideSamples], fold: Fold, options: ClassifyOptions, concentration: bool
) -> float:
    """lightgbm.train time of each target's models on prebuilt, constructed, binned Datasets."""
    X, _ = feature_matrix(table)
    params, seed = options.booster_params(), options.seed
    rounds, k = options.num_boost_round, options.concentration_k
    train = np.zeros(len(table), bool)
    train[fold.train] = True
    ctrl = control_mask(table)
    tr_ctrl = np.flatnonzero(train & ctrl)
    bins = FoldBins.build(X, tr_ctrl, params)
    total = 0.0
    for t in targets:
        tr = t.rows[train[t.rows]]
        block = bins.block(tr)
        p = dict(params, seed=guide_seed(seed, t.gene, t.guide, fold.name))
        datasets = [block.guide_dataset(tr).construct()]
        if concentration and not t.is_null:
            full = lgb.train(dict(p), datasets[0], num_boost_round=rounds)
            top, rest = top_features(full.feature_importance(importance_type="split"), k)
            datasets += [block.guide_dataset(tr, top).construct(), block.guide_dataset(tr, rest).construct()]
        t0 = time.process_time()
        for ds in datasets:
            lgb.train(dict(p), ds, num_boost_round=rounds)
        total += time.process_time() - t0
    return total


def timed(fn) -> tuple[float, object]:
    """CPU seconds of this process (LightGBM runs on 1 thread): steady on a shared machine."""
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def _genome_shape(config: Path) -> dict:
    """Guides, folds, (model, variant) pairs, pseudo-guides and guides per job of a screen config."""
    cfg = validate_config(yaml.safe_load(config.read_text()))
    demo = cfg["demo"]
    n_guides = demo["n_genes"] * demo["guides_per_gene"]
    n_folds = demo["n_batches"] if cfg["splits"]["scheme"] == "leave_one_batch_out" else cfg["splits"]["n_folds"]
    return {
        "guides": n_guides,
        "folds": n_folds,
        "pairs": len(cfg["transforms"]["variants"]) * len(cfg["models"]),
        "nulls": null_count(cfg["classify"]["n_null_guides"], n_guides),
        "per_job": n_guides / cfg["classify"]["n_shards"],
        "grouped": cfg["splits"]["scheme"] == "leave_one_batch_out",
    }


def _protocol_costs(table, guides, nulls, fold, base: ClassifyOptions) -> dict[str, dict[str, float]]:
    """Library CPU-s of the real guides (concentration on, off) and the pseudo-guides on one
    training set, and the once-per-training setup, under each protocol."""
    X, _ = feature_matrix(table)
    train = np.zeros(len(table), bool)
    train[fold.train] = True
    tr_all = np.flatnonzero(train & control_mask(table))
    guide_rows = np.concatenate([t.rows[train[t.rows]] for t in guide_samples(table, guides)])
    out = {}
    for protocol in PROTOCOLS:
        opt_on = base._replace(protocol=protocol, concentration=True)
        opt_off = base._replace(protocol=protocol, concentration=False)
        cost = {
            "on": timed(lambda: classify_guides(table, guides, [fold], opt_on, "base", "bench"))[0],
            "off": timed(lambda: classify_guides(table, guides, [fold], opt_off, "base", "bench"))[0],
            "null": timed(lambda: classify_guides(table, [], [fold], opt_on, "base", "bench", nulls=nulls))[0],
        }
        ctrl = training_controls(tr_all, control_strata(table), opt_on.max_train_controls, base.seed, fold.name)
        cost["setup"] = timed(lambda: FoldBins.build(X, ctrl, opt_on.booster_params()).block(guide_rows))[0]
        cost["controls"] = len(ctrl)
        out[protocol] = cost
    return out


def profile(table, guides, fold, base: ClassifyOptions) -> None:
    """Where a real guide's CPU goes on the fold under each protocol (module docstring, ``--profile``)."""
    from classify_growth import STEPS, StepClock  # the same step clock as the growth benchmark's

    names = list(dict.fromkeys(n for n, _, _ in STEPS)) + ["rest"]
    print("protocol: CPU ms per guide of " + ", ".join(names) + "; total; leaves per tree; us per round")
    for protocol in PROTOCOLS:
        clock = StepClock()
        with clock.installed():
            t0 = time.process_time()
            classify_guides(table, guides, [fold], base._replace(protocol=protocol), "base", "bench")
            total = time.process_time() - t0 - clock.own.pop("(profiling)", 0.0)
        clock.own["rest"] = total - sum(clock.own.values())
        per = " ".join(f"{1000 * clock.own.get(k, 0.0) / len(guides):6.1f}" for k in names)
        rounds = 1e6 * clock.own["boosting rounds"] / max(clock.rounds, 1)
        print(f"{protocol:6s} {per}; {1000 * total / len(guides):7.1f}; {np.mean(clock.leaves):5.2f}; {rounds:5.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--controls", type=int, default=22062)
    ap.add_argument("--features", type=int, default=384)
    ap.add_argument("--guides", type=int, default=8)
    ap.add_argument("--nulls", type=int, default=8, help="pseudo-guides timed (the cost per pseudo-guide)")
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--plates", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-floor", action="store_true", help="skip the floor (prebuilt Datasets) timings")
    ap.add_argument("--config", type=Path, default=Path(__file__).with_name("genome_scale.yaml"))
    ap.add_argument(
        "--fast-train-controls", type=int, default=None, help="the fast protocol's cap (default: the schema's)"
    )
    ap.add_argument(
        "--fast-leaf", choices=["scaled", "configured"], default=None, help="classify.fast_leaf (default: the schema's)"
    )
    ap.add_argument("--profile", action="store_true", help="where a guide's CPU goes, step by step")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    table = synthetic_screen(args.controls, args.features, args.guides, args.batches, args.plates, args.seed)
    held = f"B{args.batches - 1}"
    batch = table[BATCH].to_numpy()
    fold = Fold(f"holdout_{held}", np.flatnonzero(batch != held), np.flatnonzero(batch == held), (held,))
    classify = {"num_boost_round": args.rounds, "lightgbm": {"num_threads": 1}}
    if args.fast_train_controls is not None:
        classify["fast_train_controls"] = args.fast_train_controls
    if args.fast_leaf is not None:
        classify["fast_leaf"] = args.fast_leaf
    base = ClassifyOptions.from_config(validate_config({"classify": classify, "seed": args.seed}))
    guides = guides_of(table)
    nulls = null_guide_design(table, args.nulls, args.seed)
    print(
        f"screen: {args.controls} controls x {args.features} features, {len(guides)} guides of "
        f"{args.plates * args.batches} wells x {SITES} samples, {len(nulls)} pseudo-guides, 1 fold, "
        f"num_boost_round={args.rounds}, 1 thread; LightGBM {lgb.__version__}; fast protocol: "
        f"fast_fold_groups={base.fast_fold_groups}, fast_train_controls={base.fast_train_controls}, "
        f"fast_leaf={base.fast_leaf}"
    )
    if args.profile:
        profile(table, guides, fold, base)
        return
    costs = _protocol_costs(table, guides, nulls, fold, base)
    shape = _genome_shape(args.config)
    n, m, per_job = len(guides), len(nulls), shape["per_job"]
    print("\nCPU s per guide and training set (the once-per-training setup spread over one job's guides):")
    print(f"{'protocol':9s} {'train ctrl':>10s} {'setup s':>8s} {'conc. on':>9s} {'conc. off':>10s} {'null':>7s}")
    per: dict[str, dict[str, float]] = {}
    for protocol, c in costs.items():
        setup = c["setup"] / per_job
        per[protocol] = {
            "on": (c["on"] - c["setup"]) / n + setup,
            "off": (c["off"] - c["setup"]) / n + setup,
            "null": (c["null"] - c["setup"]) / m + setup,
        }
        p = per[protocol]
        print(f"{protocol:9s} {c['controls']:10d} {c['setup']:8.2f} {p['on']:9.3f} {p['off']:10.3f} {p['null']:7.3f}")

    if not args.no_floor:
        real = guide_samples(table, guides)
        ex = costs["exact"]
        print("\nexact protocol against its floor (lightgbm.train alone on prebuilt binned Datasets):")
        for name, t, f, k in (
            ("concentration on", ex["on"], floor_seconds(table, real, fold, base, True), n),
            ("concentration off", ex["off"], floor_seconds(table, real, fold, base, False), n),
            ("null pseudo-guides", ex["null"], floor_seconds(table, nulls, fold, base, False), m),
        ):
            marginal = (t - ex["setup"]) / k
            print(
                f"  {name:18s}: library {t / k:.3f} s/guide, floor {f / k:.3f}, per-guide ratio {marginal / (f / k):.2f}x"
            )

    folds, pairs, n_null = shape["folds"], shape["pairs"], shape["nulls"]
    groups = min(base.fast_fold_groups, folds) if shape["grouped"] else folds
    sets = {"exact": folds, "fast": groups}
    print(
        f"\n{args.config.name}: {shape['guides']} guides x {folds} folds x {pairs} (model, variant) pairs, "
        f"{n_null} pseudo-guides per pair; training sets per guide: exact {folds}, fast {groups}"
    )
    print(
        f"{'':18s} {'exact CPU-h':>12s} {'fast CPU-h':>11s} {'exact/fast':>11s}   (per guide-fold CPU-s exact / fast)"
    )
    for name, key in (("concentration on", "on"), ("concentration off", "off")):
        hours = {}
        for protocol in PROTOCOLS:
            p = per[protocol]
            hours[protocol] = (p[key] * shape["guides"] + p["null"] * n_null) * sets[protocol] * pairs / 3600
        print(
            f"{name:18s} {hours['exact']:12.1f} {hours['fast']:11.1f} {hours['exact'] / hours['fast']:10.1f}x   "
            f"({per['exact'][key]:.3f} / {per['fast'][key] * groups / folds:.3f})"
        )


if __name__ == "__main__":
    main()
