"""Sweep of the demo's image, model and training settings: does the MAE see the biology, and
at what cost?

For each setting (overrides of config.yaml, dotted keys), the demo screen is simulated (cached
per demo section), one MAE is trained on it with ``phenoica.models.train_mae``, every image is
embedded (the workflow's preprocessing: scale, per-image per-channel instance normalization,
non-overlapping crops, mean over crops) and the held-out linear-probe R^2 of the gene-shifted
true factors is computed from the embeddings (``phenoica.identifiability.probe_r2``: ridge, 5-fold
CV on z-scored emb_* columns; the factors from ``phenoica.report.shifted_factors``). The
baseline, measured in the same run for each setting, is the same encoder at its random
initialization (0 training steps): the ratio says what training added. Prints one row per
setting as it finishes (probe R^2 trained / random init, train and embed wall seconds) and
writes every row, with per-factor R^2, to ``--out`` (CSV).

    python benchmarks/demo_sweep.py --list                       # the built-in settings
    OMP_NUM_THREADS=1 python benchmarks/demo_sweep.py --threads 1 --settings base crop16 ...
    python benchmarks/demo_sweep.py --set "mine:train.steps=500,models.patch_size=4"

Keys: ``demo.*``, ``train.*``, ``embed.crop_size`` and ``models.*`` (applied to the one model).
Wall times are for one model on ``--threads`` torch threads; the default workflow trains two
models at once on two cores.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import yaml

from phenoica.contract import open_plate, validate_config
from phenoica.identifiability import probe_r2
from phenoica.models import TrainOptions, build_feature_extractor, embed_crops, train_mae
from phenoica.report import shifted_factors
from phenoica.screen import DemoOptions, prepare
from phenoica.screen.demo import gene_truth, simulate_screen

REPO = Path(__file__).resolve().parents[1]

#: Named settings: overrides of config.yaml. One knob at a time from the default, plus the
#: combinations the single knobs pointed to.
SETTINGS: dict[str, dict[str, Any]] = {
    "base": {},
    "previous_default": {"models.img_size": 32, "models.patch_size": 8, "models.embed_dim": 96, "models.num_heads": 4},
    "patch4": {"models.patch_size": 4},
    "crop8": {"models.img_size": 8},
    "crop32": {"models.img_size": 32},
    "width96": {"models.embed_dim": 96, "models.num_heads": 4},
    "depth2": {"models.depth": 2},
    "depth6": {"models.depth": 6},
    "steps250": {"train.steps": 250},
    "steps2000": {"train.steps": 2000},
    "mask50": {"train.mask_ratio": 0.5},
    "mask90": {"train.mask_ratio": 0.9},
    "lr0.5x": {"train.lr": 0.00075},
    "lr2x": {"train.lr": 0.003},
    "image96": {"demo.image_size": 96},
}


def parse_value(text: str) -> Any:
    return yaml.safe_load(text)


def parse_setting(text: str) -> tuple[str, dict[str, Any]]:
    """``name:key=value,key=value`` -> (name, overrides)."""
    name, _, body = text.partition(":")
    if not body:
        raise SystemExit(f"--set {text!r}: expected name:key=value[,key=value]")
    out = {}
    for item in body.split(","):
        key, _, value = item.partition("=")
        out[key.strip()] = parse_value(value)
    return name, out


def apply(config: dict[str, Any], overrides: dict[str, Any], model: str) -> dict[str, Any]:
    """A validated copy of ``config`` with dotted-key ``overrides`` (models.* -> the one model)."""
    cfg = copy.deepcopy(config)
    for key, value in overrides.items():
        section, _, rest = key.partition(".")
        if section == "models":
            cfg["models"][model][rest] = value
        elif section in ("demo", "train", "embed") and rest:
            cfg[section][rest] = value
        else:
            raise SystemExit(f"unknown sweep key {key!r}; expected demo.*, train.*, embed.* or models.*")
    return validate_config(cfg)


def simulated(demo: DemoOptions, cache: Path, log: logging.Logger) -> Path:
    """The demo screen under ``cache`` (simulated once per demo settings, seed and simulator code)."""
    code = "".join(p.read_text() for p in sorted((REPO / "src" / "phenoica" / "screen" / "demo").glob("*.py")))
    digest = hashlib.sha256(json.dumps([demo._asdict(), code], sort_keys=True).encode()).hexdigest()[:12]
    out = cache / f"screen-{digest}"
    if not (out / "metadata.parquet").exists():
        t0 = time.perf_counter()
        simulate_screen(demo, out)
        gene_truth(demo).to_parquet(out / "truth.parquet")
        log.info("simulated screen %s in %.1f s", out.name, time.perf_counter() - t0)
    return out


def embed_screen(model: torch.nn.Module, screen_dir: Path, plates: list[str], crop: int, batch_size: int) -> np.ndarray:
    """Embeddings (n_images, D) of every plate in order, as the embed rule computes them."""
    out = []
    for plate in plates:
        tiles = np.asarray(open_plate(screen_dir / "plates" / f"{plate}.zarr")[:])
        for start in range(0, len(tiles), 256):
            crops = prepare(tiles[start : start + 256], crop)
            out.append(embed_crops(model, crops, batch_size, torch.device("cpu")).numpy())
    return np.concatenate(out)


def factors_of(screen_dir: Path, plates: list[str]) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(screen_dir / "factors" / f"{p}.parquet") for p in plates], ignore_index=True)


def run_setting(name: str, cfg: dict[str, Any], model: str, cache: Path, log: logging.Logger) -> dict[str, Any]:
    seed = int(cfg["seed"])
    demo, spec, train = cfg["demo"], cfg["models"][model], cfg["train"]
    crop = int(cfg["embed"]["crop_size"] or spec["img_size"])
    demo_options = DemoOptions.from_config(cfg)
    screen_dir = simulated(demo_options, cache, log)
    plates = [p for _, p in demo_options.plates()]
    shifted = shifted_factors(pd.read_parquet(screen_dir / "truth.parquet"))
    factors = factors_of(screen_dir, plates)
    target = factors[shifted].to_numpy()
    in_chans = len(demo["channels"])

    baseline = build_feature_extractor(spec, in_chans)  # random init, the same seed as training
    t0 = time.perf_counter()
    emb0 = embed_screen(baseline, screen_dir, plates, crop, int(cfg["embed"]["batch_size"]))
    embed_s = time.perf_counter() - t0
    r2_init = probe_r2(emb0, target, seed=seed)

    stores = [screen_dir / "plates" / f"{p}.zarr" for p in plates][: int(train["max_plates"])]
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / "encoder.safetensors"
        t0 = time.perf_counter()
        options = TrainOptions.from_config(cfg, model=model)._replace(device="cpu")
        summary = train_mae(stores, options, ckpt, log=log)
        train_s = time.perf_counter() - t0
        trained = build_feature_extractor(spec, in_chans, ckpt)
    emb = embed_screen(trained, screen_dir, plates, crop, int(cfg["embed"]["batch_size"]))
    r2 = probe_r2(emb, target, seed=seed)
    row = {
        "setting": name,
        "image_size": demo["image_size"],
        "crop": crop,
        "patch": spec["patch_size"],
        "width": spec["embed_dim"],
        "depth": spec["depth"],
        "steps": train["steps"],
        "batch": train["batch_size"],
        "mask": train["mask_ratio"],
        "lr": train["lr"],
        "n_images": len(emb),
        "n_shifted": len(shifted),
        "probe_r2": float(r2.mean()),
        "probe_r2_init": float(r2_init.mean()),
        "ratio_vs_init": float(r2.mean() / r2_init.mean()) if r2_init.mean() > 0 else float("nan"),
        "final_loss": summary["final_loss"],
        "train_s": train_s,
        "embed_s": embed_s,
    }
    row.update({f"r2_{f}": float(v) for f, v in zip(shifted, r2)})
    row.update({f"r2init_{f}": float(v) for f, v in zip(shifted, r2_init)})
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=REPO / "config.yaml", help="base config (default: config.yaml)")
    ap.add_argument("--model", default=None, help="model entry of the base config (default: the first)")
    ap.add_argument("--settings", nargs="*", default=None, help="built-in settings to run (default: all)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME:KEY=VALUE,...", help="an extra setting")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "phenoica-demo-sweep")
    ap.add_argument("--out", type=Path, default=Path("demo_sweep.csv"))
    ap.add_argument("--list", action="store_true", help="print the built-in settings and exit")
    args = ap.parse_args()
    if args.list:
        for name, overrides in SETTINGS.items():
            print(f"{name:12s} {overrides}")
        return

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    log = logging.getLogger("demo_sweep")
    log.setLevel(logging.INFO)
    torch.set_num_threads(args.threads)
    config = validate_config(yaml.safe_load(args.config.read_text()))
    model = args.model or next(iter(config["models"]))
    chosen = {name: SETTINGS[name] for name in (args.settings if args.settings is not None else SETTINGS)}
    chosen.update(parse_setting(s) for s in args.set)
    args.cache.mkdir(parents=True, exist_ok=True)

    rows = []
    cols = [
        "setting",
        "image_size",
        "crop",
        "patch",
        "width",
        "depth",
        "steps",
        "mask",
        "lr",
        "probe_r2",
        "probe_r2_init",
        "ratio_vs_init",
        "train_s",
        "embed_s",
    ]
    print(" ".join(f"{c:>13s}" for c in cols), flush=True)
    for name, overrides in chosen.items():
        cfg = apply(config, overrides, model)
        row = run_setting(name, cfg, model, args.cache, log)
        rows.append(row)
        print(
            " ".join(f"{row[c]:>13.4g}" if isinstance(row[c], float) else f"{row[c]!s:>13s}" for c in cols), flush=True
        )
        pd.DataFrame(rows).to_csv(args.out, index=False)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
