"""Benchmark: the whole workflow's cost per stage on a real-width arrayed per-well screen, grown
along the plates and along the guides.

The screen is :mod:`phenoica.screen.arrayed` (one well per guide per plate, 16 control wells per
plate, 300 correlated CellProfiler-style features, 2 batches) at the width of a real screen of
per-well profiles: at 1x, 4 replicate plates per batch of 288 wells (``--effect-genes`` 96 and
``--null-genes`` 40, 2 guides each, + 16 controls), 2,304 wells x 300 features. Two axes grow it:

- ``--plates k``: ``k`` times the replicate plates per batch; wells, controls and each guide's
  replicates grow ``k``-fold, the guides stay (40x: 92,160 wells, a JUMP set's well count);
- ``--guides k``: ``k`` times the genes (effect and null alike) on ``k`` plate maps, each map on
  the same 4 replicate plates per batch; wells and guides grow ``k``-fold, each guide's
  replicates stay (16x: 4,352 guides, 36,864 wells): the axis along which JUMP-scale sets grow,
  where the classifier's jobs, the null's share and the mAP readout grow with the guides.

Each scale runs ``snakemake --cores N`` (default 2) on the arrayed scenario's config
(``config/scenarios/arrayed.yaml``: the schema's defaults, the sweep on), pointed at that scale's
profiles, in a folder of its own (``x1``, ``plates_x8``, ``guides_x4``); ``--set
section.key=value`` (YAML values) changes the config at every scale alike. A scale's figures are
saved in its folder (``cost.json``) as soon as it finishes; with ``--dir`` a later call reads a
finished scale from there instead of running it again, so the scales can be run one at a time.

It prints, per axis, per rule: jobs, the jobs' own CPU seconds at each scale (the CPU marks each
job logs), the longest job's wall seconds and the largest peak RSS of a job at the largest
scale, and the growth exponent of the rule's CPU (the least-squares slope of log CPU on log
wells: 1 = linear in the wells); then the run's wall seconds, the CPU of every process the run
started (Snakemake included: ``/usr/bin/time -v``, read as ``benchmarks/run_cost.py`` reads it)
and the largest RSS of any one of them.

    python benchmarks/arrayed_run_cost.py [--plates 1 4] [--guides 1 4 16] [--dir work] [--set sweep.points=2] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from phenoica.screen import ArrayedDesign, write_arrayed_screen
from phenoica.utils import write_json

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from run_cost import RuleCost, rule_costs, time_v_cpu  # noqa: E402

#: The axes a screen grows along: name -> the design at ``k`` times the base.
AXES = ("plates", "guides")


def scale_design(base: ArrayedDesign, scale: int, axis: str = "plates") -> ArrayedDesign:
    """The design at ``scale`` times ``base`` along ``axis``: ``plates`` (the replicate plates per
    batch: wells and controls grow, guides stay) or ``guides`` (the genes, on as many plate maps:
    wells and guides grow, each guide's replicates stay)."""
    if axis == "plates":
        return dataclasses.replace(base, plates_per_batch=base.plates_per_batch * scale)
    if axis == "guides":
        return dataclasses.replace(
            base,
            n_effect_genes=base.n_effect_genes * scale,
            n_null_genes=base.n_null_genes * scale,
            plate_maps=base.plate_maps * scale,
        )
    raise ValueError(f"axis {axis!r}: expected one of {AXES}")


def scenario_config(profiles: Path, results: Path, changes: dict[str, Any]) -> dict[str, Any]:
    """The arrayed scenario's config, reading ``profiles`` and writing under ``results``."""
    cfg = yaml.safe_load((REPO / "config" / "scenarios" / "arrayed.yaml").read_text())
    cfg["results"] = str(results)
    cfg["screen"]["embeddings"] = str(profiles / "*.parquet")
    for dotted, value in changes.items():
        node = cfg
        *path, key = dotted.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[key] = value
    return cfg


def longest_jobs(results: Path) -> dict[str, dict[str, float]]:
    """Per rule, its longest job's wall seconds and CPU seconds (Snakemake's benchmark files)."""
    out: dict[str, dict[str, float]] = {}
    for tsv in sorted((results / "benchmarks").rglob("*.tsv")):
        rule, *job = tsv.relative_to(results / "benchmarks").with_suffix("").parts  # a rule of one job: its file
        row = pd.read_csv(tsv, sep="\t").iloc[-1]
        if float(row["s"]) > out.get(rule, {}).get("wall_s", -1.0):
            out[rule] = {"wall_s": float(row["s"]), "cpu_s": float(row["cpu_time"]), "job": "/".join(job) or rule}
    return out


def run_scale(work: Path, design: ArrayedDesign, seed: int, changes: dict[str, Any], cores: int) -> dict[str, Any]:
    """Write the screen, run the workflow on it; its figures (saved as ``work/cost.json``)."""
    paths = write_arrayed_screen(work / "screen", seed, design)
    cfg = scenario_config(paths["profiles"], work / "results", changes)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    timing = work / "run.time"
    proc = subprocess.run(
        ["/usr/bin/time", "-v", "-o", str(timing), sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]
        + ["--directory", str(work), "--configfile", str(work / "config.yaml"), "--cores", str(cores)]
        + ["--quiet", "rules"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the workflow failed in {work}:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    run = time_v_cpu(timing)  # Snakemake and every process it started
    figures = {
        "wells": design.n_wells,
        "guides": design.n_guides,
        "features": design.n_features,
        "wall_s": run["wall_s"],
        "run_cpu_s": run["user_s"] + run["system_s"],
        "largest_process_rss_mb": run["max_rss_mb"],
        "cores": cores,
        "rules": [dataclasses.asdict(r) for r in rule_costs(work / "results")],
        "longest_jobs": longest_jobs(work / "results"),
    }
    write_json(figures, work / "cost.json")
    return figures


def growth_exponent(wells: list[float], cost: list[float]) -> float:
    """The least-squares slope of log ``cost`` on log ``wells`` (NaN with fewer than two finite
    positive points): 1 = the cost grows as the wells."""
    pairs = [(w, c) for w, c in zip(wells, cost) if c > 0 and math.isfinite(c)]
    if len(pairs) < 2:
        return math.nan
    x, y = np.log([p[0] for p in pairs]), np.log([p[1] for p in pairs])
    return float(np.polyfit(x, y, 1)[0])


def print_axis(axis: str, scales: list[int], runs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The per-rule table of one axis; returns its figures (rule -> CPU per scale, exponent)."""
    wells = [runs[s]["wells"] for s in scales]
    costs = {s: {r["rule"]: RuleCost(**r) for r in runs[s]["rules"]} for s in scales}
    hi = max(scales)
    print(f"\n{axis}: " + ", ".join(f"{s}x {runs[s]['wells']:,} wells / {runs[s]['guides']:,} guides" for s in scales))
    print(
        f"{'rule':<24} {'jobs':>5} "
        + " ".join(f"{f'CPU s {s}x':>11}" for s in scales)
        + f" {'longest job s':>13} {'peak RSS MB':>11} {'exponent':>8}"
    )
    out: dict[str, Any] = {}
    for rule in sorted(costs[hi], key=lambda r: -costs[hi][r].logged_cpu_s):
        per = [costs[s][rule].logged_cpu_s if rule in costs[s] else math.nan for s in scales]
        exponent = growth_exponent(wells, per)
        longest = runs[hi]["longest_jobs"].get(rule, {}).get("wall_s", math.nan)
        rss = costs[hi][rule].max_rss_mb
        print(
            f"{rule:<24} {costs[hi][rule].jobs:>5} "
            + " ".join(f"{v:11.1f}" for v in per)
            + f" {longest:13.1f} {rss:11.0f} {exponent:8.2f}"
        )
        out[rule] = {"cpu_s": per, "jobs": costs[hi][rule].jobs, "exponent": exponent}
    jobs_cpu = [sum(r.logged_cpu_s for r in costs[s].values()) for s in scales]
    run_cpu = [runs[s]["run_cpu_s"] for s in scales]
    walls = [runs[s]["wall_s"] for s in scales]
    for name, values in (("jobs' CPU s", jobs_cpu), ("run CPU s", run_cpu), ("wall s", walls)):
        print(
            f"{name:<30} " + " ".join(f"{v:11.1f}" for v in values) + f" {'':>25} {growth_exponent(wells, values):8.2f}"
        )
    print(f"{'largest process RSS MB':<30} " + " ".join(f"{runs[s]['largest_process_rss_mb']:11.0f}" for s in scales))
    out["run"] = {"jobs_cpu_s": jobs_cpu, "run_cpu_s": run_cpu, "wall_s": walls, "wells": wells}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plates", type=int, nargs="*", default=[1, 4], help="scales of the replicate plates")
    parser.add_argument("--guides", type=int, nargs="*", default=[], help="scales of the guides (on plate maps)")
    parser.add_argument("--effect-genes", type=int, default=96)
    parser.add_argument("--null-genes", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--set", nargs="*", default=[], help="config changes, section.key=value (YAML values)")
    parser.add_argument(
        "--dir", type=Path, default=None, help="work folder, kept; finished scales are read back (default: temporary)"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    changes = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.set)}
    base = ArrayedDesign(n_effect_genes=args.effect_genes, n_null_genes=args.null_genes)
    axes = {axis: sorted(set(scales)) for axis, scales in (("plates", args.plates), ("guides", args.guides)) if scales}
    with tempfile.TemporaryDirectory(prefix="arrayed_cost_") as tmp:
        root = args.dir or Path(tmp)
        runs: dict[tuple[str, int], dict[str, Any]] = {}
        for axis, scales in axes.items():
            for scale in scales:
                work = root / ("x1" if scale == 1 else f"{axis}_x{scale}")
                key = ("plates", 1) if scale == 1 else (axis, scale)
                if key in runs:
                    continue
                design = scale_design(base, scale, axis)
                if (work / "cost.json").exists():
                    runs[key] = json.loads((work / "cost.json").read_text())
                    print(f"{axis} {scale}x: read from {work / 'cost.json'}", flush=True)
                    continue
                print(f"{axis} {scale}x: {design.n_wells:,} wells x {design.n_features} features ...", flush=True)
                runs[key] = run_scale(work, design, args.seed, changes, args.cores)
                print(f"  {runs[key]['wall_s']:.0f} s wall, {runs[key]['run_cpu_s']:.0f} CPU s", flush=True)
    figures = {
        axis: print_axis(axis, scales, {s: runs[("plates", 1) if s == 1 else (axis, s)] for s in scales})
        for axis, scales in axes.items()
    }
    if args.json:
        write_json({"axes": figures, "runs": {f"{a}_x{s}": r for (a, s), r in runs.items()}}, args.json)


if __name__ == "__main__":
    main()
