"""Training-length x model-size sweep of the disentangle study's AE on the procedural datasets.

Where do InfoM, InfoE, InfoC and MCC of AE, AE + ICA (and the AE + random rotation control)
stop changing? One AE is trained per (n_images, width, seed) for the largest step count; at
every milestone its latents of the fixed evaluation subset are scored (Adam with a constant
learning rate: the network at step t is the network of a steps = t run, so one run gives the
whole curve). Scores are those of the study (``phenoica.studies.disentangle.score_latents``,
DCI skipped: it dominates evaluation time and is not what the sweep decides on).

Prints one line per (setting, step, variant) as it is measured, appends it to ``--out`` (CSV;
a rerun skips the settings already complete there), then a curve table: mean over seeds per
(n_images, width, step, variant) with the AE's cumulative training wall time, and the ratio of
each setting's training time to the width-1 setting measured in the same run. Wall times are
measured in this process on one thread (``torch.set_num_threads(1)``); the 1-minute load
average at each milestone is recorded beside them, since the machine may be shared.

    OMP_NUM_THREADS=1 python benchmarks/disentangle_sweep.py \
        --widths 0.5 1 2 --lrs 0.001 --milestones 500 1000 2000 4000 8000 --seeds 0 1 \
        --out results/benchmarks/disentangle_sweep.csv --figure results/benchmarks/disentangle_sweep.png

With ``--milestones`` all already measured (``--out`` complete), it only prints (and plots) the curves.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from phenoica.contract import validate_config
from phenoica.studies.disentangle import (
    DisentangleEvaluateOptions,
    DisentangleTrainOptions,
    FactorAE,
    build_model,
    derived_latents,
    encode,
    eval_index,
    procedural_dataset,
    scenes_dataset,
    score_latents,
    train_model,
)

SCORES = ("infom", "infoe", "infoc", "mcc", "r2")
VARIANTS = ("ae", "ae_ica", "ae_rand")
KEYS = ["dataset", "image_size", "object_scale", "n_images", "lr", "width", "seed"]


def options_for(
    args: argparse.Namespace, width: float, lr: float
) -> tuple[DisentangleTrainOptions, DisentangleEvaluateOptions]:
    """The study's training options of one setting (on the CPU) and its scoring options (the schema's)."""
    config = validate_config(
        {
            "disentangle": {
                "latent_dim": args.latent_dim,
                "steps": max(args.milestones),
                "batch_size": args.batch_size,
                "lr": lr,
                "width": width,
                "device": "cpu",
            }
        }
    )
    return DisentangleTrainOptions.from_config(config), DisentangleEvaluateOptions.from_config(config)


def run_setting(
    args: argparse.Namespace,
    dataset: str,
    image_size: int,
    object_scale: float,
    n_images: int,
    lr: float,
    width: float,
    seed: int,
) -> list[dict]:
    if dataset == "scenes":
        data = scenes_dataset(n_images, image_size, seed=0)
    else:
        data = procedural_dataset(n_images, image_size, seed=0, object_scale=object_scale)
    index = eval_index(len(data), args.n_eval, args.eval_seed)
    factors = data.factors[index]
    train, evaluate = options_for(args, width, lr)
    rows: list[dict] = []
    clock = {"train": 0.0, "last": time.perf_counter()}

    def on_milestone(step: int, net: FactorAE) -> None:
        clock["train"] += time.perf_counter() - clock["last"]
        t0 = time.perf_counter()
        z = encode(net, data, index)
        for variant in VARIANTS:
            lat = z if variant == "ae" else derived_latents(variant, z, evaluate, seed)
            s = score_latents(lat, factors, evaluate, seed, with_dci=False)
            row = {
                "dataset": dataset,
                "image_size": image_size,
                "object_scale": object_scale,
                "n_images": n_images,
                "lr": lr,
                "width": width,
                "seed": seed,
                "step": step,
                "variant": variant,
                **{k: float(s[k]) for k in SCORES},
                "train_seconds": clock["train"],
                "load1": os.getloadavg()[0],
            }
            rows.append(row)
        eval_s = time.perf_counter() - t0
        for r in rows[-len(VARIANTS) :]:
            r["eval_seconds"] = eval_s
            print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()), flush=True)
        clock["last"] = time.perf_counter()

    n_params = sum(p.numel() for p in build_model("ae", image_size, args.latent_dim, width).parameters())
    print(
        f"# setting dataset={dataset} image_size={image_size} object_scale={object_scale} n_images={n_images} lr={lr} width={width} seed={seed}: {n_params} parameters",
        flush=True,
    )
    _, summary = train_model("ae", data, train, seed, on_milestone=on_milestone, milestones=args.milestones)
    loss = np.asarray(summary["loss"])
    for r in rows:
        r["recon_loss"] = float(loss[max(0, r["step"] - 50) : r["step"]].mean())
        r["n_params"] = n_params
    return rows


def curve_table(df: pd.DataFrame) -> pd.DataFrame:
    """Mean (and SD) over seeds per setting, step and variant, scores as columns."""
    g = df.groupby(KEYS[:-1] + ["step", "variant"])
    out = g[list(SCORES) + ["train_seconds", "recon_loss"]].mean()
    sd = g[list(SCORES)].std(ddof=1).add_suffix("_sd")
    return pd.concat([out, sd, g.size().rename("n_seeds")], axis=1).reset_index()


def curve_figure(curves: pd.DataFrame, path: Path) -> None:
    """InfoE, InfoM, InfoC and MCC against training steps, one line per (dataset, width, variant)."""
    from matplotlib.figure import Figure

    from phenoica.report import save_figure

    shown = ("infoe", "infom", "infoc", "mcc")
    fig = Figure(figsize=(4.2 * len(shown), 3.6), layout="constrained")
    axes = fig.subplots(1, len(shown))
    styles = {"ae": "-", "ae_ica": "--", "ae_rand": ":"}
    settings = curves.groupby(KEYS[:-1], sort=True)
    for i, (key, t) in enumerate(settings):
        label = ", ".join(f"{k}={v}" for k, v in zip(KEYS[:-1], key) if k in ("dataset", "width", "image_size", "lr"))
        for variant, u in t.groupby("variant"):
            for ax, c in zip(axes, shown):
                ax.plot(
                    u["step"],
                    u[c],
                    styles.get(variant, "-"),
                    color=f"C{i % 10}",
                    marker="o",
                    ms=3,
                    label=f"{label} {variant}" if c == "infoe" else None,
                )
    for ax, c in zip(axes, shown):
        ax.set(xscale="log", xlabel="training steps", title=c)
    axes[0].axhline(0.76, color="grey", lw=0.8, ls="--")
    fig.legend(fontsize=6, loc="outside lower center", ncols=3)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--widths", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    ap.add_argument("--milestones", type=int, nargs="+", default=[500, 1000, 2000, 4000, 8000])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--n-images", type=int, nargs="+", default=[4096])
    ap.add_argument("--datasets", nargs="+", default=["procedural"], choices=["procedural", "scenes"])
    ap.add_argument("--image-sizes", type=int, nargs="+", default=[32])
    ap.add_argument("--object-scales", type=float, nargs="+", default=[1.0])
    ap.add_argument("--latent-dim", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lrs", type=float, nargs="+", default=[1e-3])
    ap.add_argument("--n-eval", type=int, default=1000)
    ap.add_argument("--eval-seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("results/benchmarks/disentangle_sweep.csv"))
    ap.add_argument("--figure", type=Path, default=None, help="also plot the curves to this PNG")
    args = ap.parse_args(argv)
    args.milestones = sorted(set(args.milestones))
    torch.set_num_threads(1)
    done = pd.read_csv(args.out) if args.out.exists() else pd.DataFrame(columns=KEYS + ["step"])
    for column, value in (
        ("dataset", "procedural"),
        ("image_size", 32),
        ("object_scale", 1.0),
        ("lr", 1e-3),
    ):  # files written before these were sweep dimensions
        if column not in done:
            done.insert(0, column, value)
    grid = [
        (d, i, o, n, lr, w, s)
        for d in args.datasets
        for i in args.image_sizes
        for o in args.object_scales
        for n in args.n_images
        for lr in args.lrs
        for w in args.widths
        for s in args.seeds
    ]
    for dataset, image_size, object_scale, n_images, lr, width, seed in grid:
        key = dict(image_size=image_size, object_scale=object_scale, n_images=n_images, lr=lr, width=width, seed=seed)
        mine = np.logical_and.reduce(
            [done["dataset"] == dataset] + [np.isclose(done[k].astype(float), v) for k, v in key.items()]
        )
        if mine.any() and done.loc[mine, "step"].max() >= max(args.milestones):
            print(f"# skip {key}: in {args.out}", flush=True)
            continue
        rows = pd.DataFrame(run_setting(args, dataset, image_size, object_scale, n_images, lr, width, seed))
        done = pd.concat([done[~mine], rows], ignore_index=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".tmp")
        done.to_csv(tmp, index=False)
        os.replace(tmp, args.out)
    curves = curve_table(done)
    if args.figure is not None:
        curve_figure(curves, args.figure)
    pd.set_option("display.width", 200)
    print("\n# curves: mean over seeds (AE training wall seconds on 1 thread, cumulative)")
    print(curves.astype({"lr": str}).round(3).to_string(index=False))
    index = ["dataset", "image_size", "object_scale", "n_images", "lr", "step"]
    base = curves[(curves["width"] == 1.0) & (curves["variant"] == "ae")].set_index(index)["train_seconds"]
    if not base.empty:
        ae = curves[curves["variant"] == "ae"].set_index(index)
        ratio = (ae["train_seconds"] / base.reindex(ae.index)).rename("train_time_vs_width1")
        print("\n# training time relative to width 1, same run")
        table = pd.concat([ae["width"], ratio], axis=1).reset_index()
        print(table.astype({"lr": str}).round(2).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
