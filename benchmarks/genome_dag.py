"""Dry run of a genome-scale screen: job count and DAG build time.

Baseline in the same run: the dry run of the tiny test config (config/scenarios/demo.yaml), so the
printed ratio says how much the DAG cost grows from a toy screen to a genome-wide one.

    python benchmarks/genome_dag.py [--config benchmarks/genome_scale.yaml]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def dry_run(config: Path) -> tuple[float, dict[str, int]]:
    """Seconds and per-rule job counts of `snakemake -n` on ``config`` in a fresh folder."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(config, Path(tmp) / "config.yaml")
        start = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "snakemake",
                "-s",
                str(REPO / "Snakefile"),
                "--directory",
                tmp,
                "--configfile",
                str(Path(tmp) / "config.yaml"),
                "--cores",
                "2",
                "-n",
                "--quiet",
                "rules",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        seconds = time.perf_counter() - start
    counts = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^\s*([A-Za-z_]\w*)\s+(\d+)\s*$", line)
        if m:
            counts[m.group(1)] = int(m.group(2))
    return seconds, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=REPO / "benchmarks" / "genome_scale.yaml")
    args = parser.parse_args()
    tiny_s, tiny = dry_run(REPO / "config" / "scenarios" / "demo.yaml")
    big_s, big = dry_run(args.config)
    print(f"tiny screen   : {tiny.get('total', 0):6d} jobs, dry run {tiny_s:6.1f} s")
    print(
        f"genome screen : {big.get('total', 0):6d} jobs, dry run {big_s:6.1f} s  (goal: low thousands of jobs, < 60 s)"
    )
    print(f"ratio genome / tiny dry-run time: {big_s / tiny_s:.2f}")
    for rule, n in sorted(big.items(), key=lambda kv: -kv[1]):
        if rule != "total":
            print(f"  {rule:24s} {n:6d}")


if __name__ == "__main__":
    main()
