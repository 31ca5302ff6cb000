"""Benchmark: how the cost of the post-embedding path grows with the screen.

The positive control's screen (``phenoica.screen.known_truth``, shipped design: 12 genes,
2 guides each, 3 batches of one plate, 16 control wells and 2 wells per guide per plate, 16 cells
per well, 48 dims) is written at 1x, 4x and 16x its guides. A screen of scale ``k`` has ``k``
times the genes (8k with an effect, 4k without) on ``k`` plates per batch: every plate keeps
its own 16 control wells and holds a block of 24 guides, so the controls' share of the wells
(a quarter) stays the shipped screen's, as when a real screen adds plates. Rows, guides and
controls all grow ``k``-fold.

Then the library functions the workflow's scripts call run in order, each stage in a fresh
Python process on that scale's files, with the positive control's own config
(``config.yaml`` merged with ``config/scenarios/positive_control.yaml``, as Snakemake merges
them; its one model ``ext``, ``classify.num_boost_round`` 50, ``n_shards`` 1), except three
settings that multiply a stage's cost by the same factor at every scale and so leave its growth
as it is, chosen so that 16x runs in minutes on 2 cores:

- the variants (``--variants``, default ``pca_ica`` alone; the scenario runs four, each
  repeating the same work on its own copy of the rows);
- ``classify.concentration`` (``--concentration``, default off: the full model per (guide,
  fold); on, the scenario's setting, adds the top-25% and rest models, trained on the same rows);
- ``classify.n_null_guides`` (``--null-guides``, default 8 pseudo-guides: a config value, the
  same at every scale, so a fixed cost within classify).

``--controls fixed`` keeps the shipped screen's 16 control wells per batch at every scale
(16/scale per plate) instead: a check of how much of classify's growth the growing control set
makes.

The stages, each in a fresh Python process on that scale's files:

    gather     profiles.gather.write_profiles             (rule gather_profiles)
    fit        transforms.fit.fit_transforms                (rule fit_transforms)
    apply      transforms.apply.apply_transform_file        (rule apply_transform, every variant)
    splits     classify.splits.make_folds + folds_table   (rule splits)
    classify   classify.engine.classify_shard             (rule classify, every variant and shard)
    map        classify.map_readout.guide_map             (rule map_readout, every variant)
    hits       hits.calls.screen_calls                    (rule call_hits)
    gene_map   biomap.aggregate.aggregate_profiles + biomap.gene_map.gene_map + the heatmap
               (rules biomap_profiles and biomap, every variant)
    batch      biomap.batch_metrics                       (rule batch_metrics, every variant)

Each process reports the stage's wall seconds and CPU seconds (``time.process_time``, all its
threads), and its peak resident memory (``resource.getrusage(RUSAGE_SELF).ru_maxrss``, read by
the stage's own fresh process at its end) and the peak once its imports are done; the stage's
working set is the difference. The screens are written by processes of their own too: Linux
carries a parent's resident size into a child's ``ru_maxrss``, so the driver stays small (its
resident size is printed; it must stay below the stages' import floor). The children run with
``--threads`` (default 1) BLAS/OpenMP threads; LightGBM uses the config's ``num_threads`` (1).

Printed: a table of stage x scale (CPU s, wall s, peak MB, working-set MB) and per stage the
growth exponent, the log-log slope from the smallest to the largest scale (1: linear; the cost
a stage has at any size pulls it below 1), and the verdict: linear when the CPU-time slope is at
most 1.15, else the stage is named as growing faster.

    python benchmarks/pipeline_growth.py                       # scales 1 4 16 (minutes on 2 cores)
    python benchmarks/pipeline_growth.py --controls fixed --stages classify   # classify without growing controls
    python benchmarks/pipeline_growth.py --scales 1 2 --variants pca_ica --rounds 10
    python benchmarks/pipeline_growth.py --tiny --json out.json   # scales 1 2, 5 rounds: a check, not a measurement
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "config" / "scenarios" / "positive_control.yaml"
#: A stage whose CPU time grows with a log-log slope above this is not linear.
LINEAR_SLOPE = 1.15
LOG = logging.getLogger("pipeline_growth")


def peak_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def resident_mb() -> float:
    """This process's resident memory now, in MB (Linux ``/proc``; NaN elsewhere). Not its
    ``ru_maxrss``: that starts at the resident size of the process it was started from."""
    status = Path("/proc/self/status")
    if not status.exists():
        return float("nan")
    line = next(x for x in status.read_text().splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def screen_config(args: argparse.Namespace) -> dict[str, Any]:
    """The positive control's config as the workflow sees it (config.yaml, then the scenario,
    merged key by key; models resolved; validated), with this run's overrides."""
    from phenoica.contract import deep_merge, read_yaml, run_models, validate_config

    merged = deep_merge(read_yaml(REPO / "config.yaml"), read_yaml(SCENARIO))
    overrides: dict[str, Any] = {
        "classify": {"n_null_guides": args.null_guides, "concentration": args.concentration == "on"}
    }
    if args.rounds is not None:
        overrides["classify"]["num_boost_round"] = args.rounds
    if args.map_null_size is not None:
        overrides["classify"]["map_null_size"] = args.map_null_size
    if args.variants:
        overrides["transforms"] = {"variants": list(args.variants)}
    return validate_config(run_models(deep_merge(merged, overrides)))


def write_scaled_screen(folder: Path, scale: int, seed: int, controls: str = "per-plate") -> dict[str, Any]:
    """The positive control at ``scale`` x its guides: ``scale`` x the genes on ``scale`` plates
    per batch, each plate with the shipped screen's control wells (``controls`` "per-plate"), or
    with 1/``scale`` of them, so that a batch holds the shipped screen's controls ("fixed": a
    check of what the growing control set costs)."""
    from phenoica.screen import SCREENS, write_known_truth_screen

    base = SCREENS["positive_control"]
    control_wells = base.control_wells
    if controls == "fixed":
        if base.control_wells % scale:
            raise ValueError(f"--controls fixed: scale {scale} must divide the {base.control_wells} control wells")
        control_wells //= scale
    design = dataclasses.replace(
        base,
        n_effect_genes=base.n_effect_genes * scale,
        n_null_genes=base.n_null_genes * scale,
        plates_per_batch=base.plates_per_batch * scale,
        control_wells=control_wells,
    )
    return write_known_truth_screen(folder, seed=seed, design=design)


# --------------------------------------------------------------------------- the stages (child side)


class Work:
    """One scale's files, laid out as the workflow's results (one model)."""

    def __init__(self, root: Path, cfg: dict[str, Any]) -> None:
        self.root, self.cfg = root, cfg
        self.model = next(iter(cfg["models"]))
        self.variants = list(cfg["transforms"]["variants"])
        self.profiles = root / "profiles.parquet"
        self.transforms = root / "transforms"
        self.folds = root / "folds.parquet"
        for sub in ("variants", "scores", "maps", "hits", "biomap"):
            (root / sub).mkdir(parents=True, exist_ok=True)

    def variant(self, v: str) -> Path:
        return self.root / "variants" / f"{v}.parquet"


def stage_gather(w: Work) -> dict[str, Any]:
    from phenoica.profiles import GatherOptions, write_profiles

    files = sorted((w.root / "data" / "embeddings").glob("*.parquet"))
    options = GatherOptions.from_config(w.cfg)
    rows = write_profiles(
        files, w.profiles, options.level, options.embedding_column, options.batch_rows, options.selection
    )
    return {"rows": rows}


def stage_fit(w: Work) -> dict[str, Any]:
    from phenoica.transforms import TransformOptions, fit_transforms

    fit_transforms(w.profiles, TransformOptions.from_config(w.cfg), w.transforms, log=LOG)
    return {"rows": _rows(w.profiles)}


def stage_apply(w: Work) -> dict[str, Any]:
    from phenoica.transforms import ApplyTransformOptions, apply_transform_file

    batch_rows = ApplyTransformOptions.from_config(w.cfg).batch_rows
    rows = sum(
        apply_transform_file(w.profiles, w.transforms / f"{v}.npz", w.variant(v), batch_rows) for v in w.variants
    )
    return {"rows": rows}


def stage_splits(w: Work) -> dict[str, Any]:
    import pandas as pd

    from phenoica.classify import SplitOptions, folds_table, make_folds
    from phenoica.utils import write_parquet

    profiles = pd.read_parquet(w.profiles)
    folds = make_folds(profiles, SplitOptions.from_config(w.cfg))
    write_parquet(folds_table(profiles, folds), w.folds)
    return {"rows": len(profiles), "folds": len(folds)}


def stage_classify(w: Work) -> dict[str, Any]:
    import pandas as pd

    from phenoica.classify import ClassifyOptions, classify_shard, read_folds
    from phenoica.utils import write_parquet

    options = ClassifyOptions.from_config(w.cfg)
    n_shards, rows = options.n_shards, 0
    for v in w.variants:
        table = pd.read_parquet(w.variant(v))
        folds = read_folds(w.folds, table)
        for shard in range(n_shards):
            scores = classify_shard(table, shard, folds, options, variant=v, model=w.model, log=LOG)
            write_parquet(scores, w.root / "scores" / f"{v}_{shard}.parquet")
            rows += len(scores)
    return {"rows": rows}


def stage_map(w: Work) -> dict[str, Any]:
    import pandas as pd

    from phenoica.classify import guide_map
    from phenoica.utils import write_parquet

    if not w.cfg["classify"]["map_readout"]:
        return {"rows": 0}
    rows = 0
    for v in w.variants:
        out = guide_map(
            pd.read_parquet(w.variant(v)),
            variant=v,
            model=w.model,
            seed=w.cfg["seed"],
            null_size=w.cfg["classify"]["map_null_size"],
            log=LOG,
        )
        write_parquet(out, w.root / "maps" / f"{v}.parquet")
        rows += len(out)
    return {"rows": rows}


def stage_hits(w: Work) -> dict[str, Any]:
    import pandas as pd

    from phenoica.hits import HitOptions, screen_calls
    from phenoica.utils import write_parquet

    options = HitOptions.from_config(w.cfg)
    rows = pd.concat([pd.read_parquet(f) for f in sorted((w.root / "scores").glob("*.parquet"))], ignore_index=True)
    map_files = sorted((w.root / "maps").glob("*.parquet"))
    maps = pd.concat([pd.read_parquet(f) for f in map_files], ignore_index=True) if map_files else None
    out = screen_calls(rows, maps, options.null_model, options.q_threshold, with_null=options.with_null)
    for name in ("guides", "genes", "hits", "null"):
        write_parquet(out[name], w.root / "hits" / f"{name}.parquet")
    return {"rows": len(rows), "guides": len(out["guides"])}


def stage_gene_map(w: Work) -> dict[str, Any]:
    import pandas as pd

    from phenoica.biomap import GeneMapOptions, MapInputs, ProfileOptions, aggregate_profiles, gene_map
    from phenoica.contract import GENE
    from phenoica.report import heatmap_figure
    from phenoica.screen import load_sources

    options = GeneMapOptions.from_config(w.cfg)
    center = ProfileOptions.from_config(w.cfg).center_on_controls
    calls_all = pd.read_parquet(w.root / "hits" / "genes.parquet")
    sources, genes_mapped = load_sources(options.annotation_sources()), 0
    for v in w.variants:
        guides, genes = aggregate_profiles(w.variant(v), center_on_controls=center, log=LOG)
        calls = calls_all[(calls_all["model"] == w.model) & (calls_all["variant"] == v)]
        inputs = MapInputs(guides, genes, calls, sources, None)
        _tables, chosen, q, note = gene_map(inputs, options, model=w.model, variant=v, log=LOG)
        features = [c for c in chosen.columns if not str(c).startswith("Metadata_")]
        heatmap_figure(
            chosen[features].to_numpy(),
            chosen[GENE].tolist(),
            q,
            w.root / "biomap" / f"{v}_heatmap.png",
            max_genes=options.heatmap_max_genes,
            title=f"{w.model} / {v}\n{note}",
        )
        genes_mapped += len(genes)
    return {"rows": genes_mapped}


def stage_batch(w: Work) -> dict[str, Any]:
    from phenoica.biomap import BatchMetricsOptions, batch_metrics, well_profile_table

    options, wells_seen = BatchMetricsOptions.from_config(w.cfg), 0
    for v in w.variants:
        wells = well_profile_table(str(w.variant(v)))
        batch_metrics(wells, options, model=w.model, variant=v, log=LOG)
        wells_seen += len(wells)
    return {"rows": wells_seen}


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


#: The stages in the workflow's order.
STAGES: dict[str, Callable[[Work], dict[str, Any]]] = {
    "gather": stage_gather,
    "fit": stage_fit,
    "apply": stage_apply,
    "splits": stage_splits,
    "classify": stage_classify,
    "map": stage_map,
    "hits": stage_hits,
    "gene_map": stage_gene_map,
    "batch": stage_batch,
}


def child_screen(root: Path) -> dict[str, Any]:
    """Write one scale's screen (in a process of its own, so that the driver stays small: a
    child started from a large parent would report the parent's peak as its own)."""
    job = json.loads((root / "screen.json").read_text())
    d = write_scaled_screen(root / "data", job["scale"], job["seed"], job["controls"])["design"]
    guides = d.n_genes * d.guides_per_gene
    return {
        "genes": d.n_genes,
        "guides": guides,
        "batches": d.n_batches,
        "plates_per_batch": d.plates_per_batch,
        "control_wells": d.control_wells,
    }


def child(stage: str, root: Path) -> dict[str, Any]:
    """Run one stage in this (fresh) process: its imports first (the floor), then the stage."""
    from phenoica.biomap import gene_map  # noqa: F401  (the package's heavy imports, the same floor for every stage)
    from phenoica.classify import classify_guides  # noqa: F401
    from phenoica.hits import screen_calls  # noqa: F401
    from phenoica.transforms import fit_transforms  # noqa: F401

    cfg = json.loads((root.parent / "config.json").read_text())
    work = Work(root, cfg)
    floor = peak_mb()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    info = STAGES[stage](work)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    peak = peak_mb()
    return {"stage": stage, "wall_s": wall, "cpu_s": cpu, "import_mb": floor, "peak_mb": peak, **info}


# --------------------------------------------------------------------------- the driver (parent side)


def run_child(stage: str, root: Path, threads: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    env.update({k: str(threads) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    cmd = [sys.executable, __file__, "--child", stage, "--dir", str(root)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"stage {stage} at {root.name} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def slope(small: float, large: float, s0: int, s1: int) -> float:
    """Log-log growth exponent between two scales (1 = linear)."""
    return math.log(max(large, 1e-9) / max(small, 1e-9)) / math.log(s1 / s0)


def summarise(results: dict[str, dict[int, dict[str, Any]]], scales: list[int]) -> dict[str, dict[str, Any]]:
    """Per stage: the CPU, wall and working-set slopes from the smallest to the largest scale,
    and the verdict on the CPU slope."""
    s0, s1 = scales[0], scales[-1]
    out = {}
    for stage, by_scale in results.items():
        lo, hi = by_scale[s0], by_scale[s1]
        work_lo, work_hi = (max(r["peak_mb"] - r["import_mb"], 1.0) for r in (lo, hi))
        cpu = slope(lo["cpu_s"], hi["cpu_s"], s0, s1)
        out[stage] = {
            "cpu_slope": cpu,
            "wall_slope": slope(lo["wall_s"], hi["wall_s"], s0, s1),
            "working_set_slope": slope(work_lo, work_hi, s0, s1),
            "linear": cpu <= LINEAR_SLOPE,
        }
    return out


def print_table(results: dict[str, dict[int, dict[str, Any]]], summary: dict[str, dict[str, Any]], scales: list[int]):
    cols = " ".join(f"{f'{s}x':>8s}" for s in scales)
    print(f"\n{'stage':9s} {'measure':14s} {cols}   slope  verdict")
    for stage, by_scale in results.items():
        s = summary[stage]
        lines = [
            ("rows", [r["rows"] for r in by_scale.values()], "{:8d}", None, ""),
            (
                "CPU s",
                [r["cpu_s"] for r in by_scale.values()],
                "{:8.2f}",
                s["cpu_slope"],
                "linear" if s["linear"] else "NOT LINEAR",
            ),
            ("wall s", [r["wall_s"] for r in by_scale.values()], "{:8.2f}", s["wall_slope"], ""),
            ("peak MB", [r["peak_mb"] for r in by_scale.values()], "{:8.0f}", None, ""),
            (
                "working-set MB",
                [r["peak_mb"] - r["import_mb"] for r in by_scale.values()],
                "{:8.0f}",
                s["working_set_slope"],
                "",
            ),
        ]
        for i, (name, values, fmt, sl, verdict) in enumerate(lines):
            slope_text = f"{sl:6.2f}" if sl is not None else " " * 6
            print(
                f"{stage if i == 0 else '':9s} {name:14s} {' '.join(fmt.format(v) for v in values)}   {slope_text}  {verdict}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 4, 16], help="multiples of the guides")
    parser.add_argument(
        "--variants",
        nargs="+",
        default=["pca_ica"],
        help="transforms.variants (each variant repeats the same work; the scenario runs base pca pca_ica pca_rand)",
    )
    parser.add_argument("--null-guides", type=int, default=8, help="classify.n_null_guides (the same at every scale)")
    parser.add_argument("--rounds", type=int, default=None, help="classify.num_boost_round (default: the scenario's)")
    parser.add_argument(
        "--map-null-size", type=int, default=None, help="classify.map_null_size (default: the config's)"
    )
    parser.add_argument("--stages", nargs="+", default=list(STAGES), choices=list(STAGES), help="stop after the last")
    parser.add_argument(
        "--controls",
        choices=("per-plate", "fixed"),
        default="per-plate",
        help="per-plate: every plate keeps 16 control wells (the controls grow with the screen); fixed: the screen "
        "keeps the shipped screen's 16 control wells per batch (what the growing control set costs)",
    )
    parser.add_argument(
        "--concentration",
        choices=("on", "off"),
        default="off",
        help="classify.concentration (the scenario's: on, 3 models per guide; off: the full model only)",
    )
    parser.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads of each stage's process")
    parser.add_argument("--seed", type=int, default=0, help="the screen's seed (the config's seed stays)")
    parser.add_argument("--tiny", action="store_true", help="scales 1 2, 5 rounds, 4 pseudo-guides: a check")
    parser.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.child:
        print(json.dumps(child_screen(args.dir) if args.child == "screen" else child(args.child, args.dir)))
        return
    if args.tiny:
        args.scales, args.rounds, args.null_guides = [1, 2], 5, 4
        args.map_null_size = args.map_null_size or 1000
    scales = sorted(set(args.scales))
    if len(scales) < 2 or scales[0] < 1:
        parser.error("--scales: at least two positive scales")
    stages = list(STAGES)[: max(list(STAGES).index(s) for s in args.stages) + 1]
    owned = args.dir is None
    root = Path(args.dir or tempfile.mkdtemp(prefix="phenoica-growth-"))
    try:
        measure(args, scales, stages, root)
    finally:
        if owned:
            shutil.rmtree(root, ignore_errors=True)


def measure(args: argparse.Namespace, scales: list[int], stages: list[str], root: Path) -> None:
    cfg = screen_config(args)
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(cfg, default=str))
    c = cfg["classify"]
    print(
        f"positive control at {', '.join(f'{s}x' for s in scales)} its guides; model {next(iter(cfg['models']))}, "
        f"variants {cfg['transforms']['variants']}, num_boost_round {c['num_boost_round']}, n_null_guides "
        f"{c['n_null_guides']}, concentration {c['concentration']}, n_shards {c['n_shards']}, map_readout {c['map_readout']}; {args.threads} BLAS "
        f"thread(s) per stage; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    results: dict[str, dict[int, dict[str, Any]]] = {s: {} for s in stages}
    t0 = time.perf_counter()
    for scale in scales:
        folder = root / f"x{scale}"
        folder.mkdir(parents=True, exist_ok=True)
        job = {"scale": scale, "seed": args.seed, "controls": args.controls}
        (folder / "screen.json").write_text(json.dumps(job))
        d = run_child("screen", folder, args.threads)
        print(
            f"{scale}x: {d['genes']} genes, {d['guides']} guides, {d['batches']} x {d['plates_per_batch']} plates, "
            f"{d['control_wells']} control wells per plate",
            flush=True,
        )
        for stage in stages:
            r = run_child(stage, folder, args.threads)
            results[stage][scale] = r
            print(f"  {stage:9s} {r['cpu_s']:8.2f} CPU s {r['wall_s']:8.2f} wall s {r['peak_mb']:7.0f} MB", flush=True)
        shutil.rmtree(folder, ignore_errors=True)
    summary = summarise(results, scales)
    print_table(results, summary, scales)
    worst = max(summary, key=lambda s: summary[s]["cpu_slope"])
    off = [s for s in stages if not summary[s]["linear"]]
    print(
        f"\ngrows worst: {worst} (CPU slope {summary[worst]['cpu_slope']:.2f}); "
        + (
            f"not linear (slope > {LINEAR_SLOPE}): {', '.join(off)}"
            if off
            else f"every stage linear (slope <= {LINEAR_SLOPE})"
        )
    )
    print(f"whole run {time.perf_counter() - t0:.0f} s; driver resident {resident_mb():.0f} MB")
    if args.json:
        payload = {"scales": scales, "driver_mb": resident_mb(), "controls": args.controls}
        payload |= {"config": {"classify": c, "variants": cfg["transforms"]["variants"]}}
        payload |= {"results": {s: {str(k): v for k, v in r.items()} for s, r in results.items()}, "summary": summary}
        args.json.write_text(json.dumps(payload, indent=2, default=str))


if __name__ == "__main__":
    main()
