"""Benchmark: the whole workflow's cost per stage on a real-width arrayed per-well screen, at 1x
and 4x its wells.

The screen is :mod:`phenoica.screen.arrayed` (one well per guide per plate, 16 control wells per
plate, 300 correlated CellProfiler-style features, 2 batches) at the width of a real screen of
per-well profiles: at 1x, 4 replicate plates per batch of 288 wells (``--effect-genes`` 96 and
``--null-genes`` 40, 2 guides each, + 16 controls), 2,304 wells x 300 features; at scale ``k``,
``k`` times the plates per batch, so wells, controls and each guide's replicates grow ``k``-fold
and the guides stay the same. Each scale runs ``snakemake --cores 2`` on the arrayed scenario's
config (``config/scenarios/arrayed.yaml``: the schema's defaults, the layout they are chosen
for), pointed at that scale's profiles, in a folder of its own; ``--set section.key=value`` (YAML
values) changes the config at every scale alike. Then, as ``benchmarks/run_cost.py`` reads a
finished run, it prints per rule the jobs' own CPU seconds at each scale (the CPU marks each job
logs), the share before the library call at 1x, and the growth ratio of the largest scale over
the smallest: the stages whose cost grows with the wells (the component sweep, the classifier)
stand out from those that do not.

    python benchmarks/arrayed_run_cost.py [--scales 1 4] [--dir work] [--set sweep.points=2] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from phenoica.screen.arrayed import ArrayedDesign, write_screen
from phenoica.utils.io import write_json

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from run_cost import RuleCost, rule_costs  # noqa: E402


def scale_design(base: ArrayedDesign, scale: int) -> ArrayedDesign:
    """``scale`` times the replicate plates per batch: wells and controls grow, guides stay."""
    return dataclasses.replace(base, plates_per_batch=base.plates_per_batch * scale)


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


def run_scale(work: Path, design: ArrayedDesign, seed: int, changes: dict[str, Any]) -> tuple[list[RuleCost], float]:
    """Write the screen, run the workflow on it; (its per-rule costs, wall seconds)."""
    paths = write_screen(work / "screen", seed, design)
    cfg = scenario_config(paths["profiles"], work / "results", changes)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(work)]
        + ["--configfile", str(work / "config.yaml"), "--cores", "2", "--quiet", "rules"],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"the workflow failed in {work}:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return rule_costs(work / "results"), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--effect-genes", type=int, default=96)
    parser.add_argument("--null-genes", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", nargs="*", default=[], help="config changes, section.key=value (YAML values)")
    parser.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    changes = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.set)}
    base = ArrayedDesign(n_effect_genes=args.effect_genes, n_null_genes=args.null_genes)
    with tempfile.TemporaryDirectory(prefix="arrayed_cost_") as tmp:
        root = args.dir or Path(tmp)
        costs: dict[int, dict[str, RuleCost]] = {}
        walls: dict[int, float] = {}
        for scale in args.scales:
            design = scale_design(base, scale)
            wells = design.n_batches * design.plates_per_batch * design.wells_per_plate
            print(f"scale {scale}: {wells} wells x {design.n_features} features ...", flush=True)
            found, walls[scale] = run_scale(root / f"x{scale}", design, args.seed, changes)
            costs[scale] = {r.rule: r for r in found}
            print(
                f"  {walls[scale]:.0f} s wall, {sum(r.logged_cpu_s for r in found):.0f} CPU s in the jobs", flush=True
            )
    lo, hi = min(args.scales), max(args.scales)
    rules = sorted(costs[hi], key=lambda r: -costs[hi][r].logged_cpu_s)
    print(
        f"{'rule':<24} {'jobs':>4} "
        + " ".join(f"{f'CPU s {s}x':>10}" for s in args.scales)
        + f" {'outside ' + str(lo) + 'x':>11} {f'{hi}x / {lo}x':>8}"
    )
    for rule in rules:
        per = [costs[s][rule].logged_cpu_s if rule in costs[s] else float("nan") for s in args.scales]
        first = costs[lo].get(rule)
        share = first.outside_share if first else float("nan")
        ratio = per[-1] / per[0] if per[0] > 0 else float("nan")
        print(
            f"{rule:<24} {costs[hi][rule].jobs:>4} "
            + " ".join(f"{v:10.1f}" for v in per)
            + f" {share:11.0%} {ratio:8.2f}"
        )
    totals = [sum(r.logged_cpu_s for r in costs[s].values()) for s in args.scales]
    print(f"{'sum':<24} {'':>4} " + " ".join(f"{v:10.1f}" for v in totals) + f" {'':>11} {totals[-1] / totals[0]:8.2f}")
    if args.json:
        write_json(
            {
                "scales": args.scales,
                "wall_s": walls,
                "rules": {s: [dataclasses.asdict(r) for r in costs[s].values()] for s in args.scales},
            },
            args.json,
        )


if __name__ == "__main__":
    main()
