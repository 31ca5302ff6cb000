"""Benchmark: what a finished run cost, per rule, in one line each.

Reads a finished run's ``results/benchmarks/`` files (Snakemake's per-job measurements: wall
seconds ``s``, ``cpu_time``, ``max_rss``) and its ``results/logs/`` (the CPU seconds each job's
script logs through ``phenoica.utils.rule_logger`` / ``log_job_cpu``: at ``start``, the
interpreter and Snakemake's script preamble; at ``work``, just before the library call, so
start-up, imports and reading inputs; at ``end``, the whole process). Prints per rule:

- jobs, CPU seconds (the benchmark files' ``cpu_time``), wall seconds (summed over jobs),
  the largest peak RSS;
- the jobs' own CPU seconds from their logs (``end``) and the share outside the library call
  (``work / end``: what a job costs before its library starts working, paid once per job);
- the sum over rules; with ``--time`` (the output of ``/usr/bin/time -v snakemake ...``), the
  run's whole CPU (user + system) and what lies outside every job: Snakemake's own process and
  the jobs' shells.

The fixed cost of a job is the smallest ``work`` mark of the run (a job that reads next to
nothing); ``--against`` another finished run prints each rule's CPU ratio, this run over that
one, so a regression in any stage shows in its line.

    python benchmarks/run_cost.py [--results results] [--time run.time] [--against other/results] [--json out.json]
"""

from __future__ import annotations

import argparse
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from phenoica.utils import JOB_CPU, write_json

#: A ``log_job_cpu`` line: ``... job cpu <point>: <seconds> s``.
CPU_LINE = re.compile(rf"{JOB_CPU} (\w+): ([0-9.]+) s")


@dataclass(frozen=True)
class RuleCost:
    """One rule's cost over its jobs."""

    rule: str
    jobs: int
    cpu_s: float  # Snakemake's benchmark files, cpu_time
    wall_s: float
    max_rss_mb: float
    logged_cpu_s: float  # the jobs' own processes, "end" mark (NaN where no job logged it)
    outside_s: float  # the "work" marks: start-up, imports, reading inputs

    @property
    def outside_share(self) -> float:
        return self.outside_s / self.logged_cpu_s if self.logged_cpu_s > 0 else float("nan")


def job_marks(log: Path) -> dict[str, float]:
    """The CPU marks of the last run a job's log holds (a resumed job's log keeps earlier runs)."""
    marks: dict[str, float] = {}
    if not log.exists():
        return marks
    for line in log.read_text(errors="replace").splitlines():
        m = CPU_LINE.search(line)
        if m:
            if m.group(1) == "start":
                marks = {}
            marks[m.group(1)] = float(m.group(2))
    return marks


def rule_costs(results: Path) -> list[RuleCost]:
    """Per rule, the cost of its jobs in the finished run under ``results``."""
    bench = results / "benchmarks"
    if not bench.is_dir():
        raise SystemExit(f"{bench}: no benchmark files; is {results} a finished run's results folder?")
    by_rule: dict[str, list[tuple[pd.Series, dict[str, float]]]] = {}
    for tsv in sorted(bench.rglob("*.tsv")):
        rel = tsv.relative_to(bench).with_suffix("")
        rule = rel.parts[0]
        measured = pd.read_csv(tsv, sep="\t").iloc[-1]
        by_rule.setdefault(rule, []).append((measured, job_marks(results / "logs" / rel.with_suffix(".log"))))
    out = []
    for rule, jobs in by_rule.items():
        logged = [m for _, m in jobs if "end" in m and "work" in m]
        out.append(
            RuleCost(
                rule=rule,
                jobs=len(jobs),
                cpu_s=float(sum(b["cpu_time"] for b, _ in jobs)),
                wall_s=float(sum(b["s"] for b, _ in jobs)),
                max_rss_mb=float(max(b["max_rss"] for b, _ in jobs)),
                logged_cpu_s=float(sum(m["end"] for m in logged)) if logged else float("nan"),
                outside_s=float(sum(m["work"] for m in logged)) if logged else float("nan"),
            )
        )
    return sorted(out, key=lambda r: -r.cpu_s)


def time_v_cpu(path: Path) -> dict[str, float]:
    """User and system CPU seconds, wall seconds and peak RSS from ``/usr/bin/time -v`` output."""
    text = path.read_text(errors="replace")

    def field(name: str) -> float:
        m = re.search(rf"{re.escape(name)}: ([0-9.:]+)", text)
        if not m:
            raise SystemExit(f"{path}: no '{name}' line; expected the output of /usr/bin/time -v")
        value = m.group(1)
        if ":" in value:  # h:mm:ss or m:ss.ss
            seconds = 0.0
            for part in value.split(":"):
                seconds = seconds * 60 + float(part)
            return seconds
        return float(value)

    return {
        "user_s": field("User time (seconds)"),
        "system_s": field("System time (seconds)"),
        "wall_s": field("Elapsed (wall clock) time (h:mm:ss or m:ss)"),
        "max_rss_mb": field("Maximum resident set size (kbytes)") / 1024,
    }


def fixed_job_cost(results: Path) -> float:
    """The smallest ``work`` mark of the run: what a job costs before doing anything."""
    marks = [job_marks(p).get("work") for p in (results / "logs").rglob("*.log")]
    values = [m for m in marks if m is not None]
    return min(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=Path("results"), help="a finished run's results folder")
    parser.add_argument("--time", type=Path, help="the run's /usr/bin/time -v output")
    parser.add_argument("--against", type=Path, help="another finished run's results folder: CPU ratios per rule")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()

    costs = rule_costs(args.results)
    base = {r.rule: r for r in rule_costs(args.against)} if args.against else {}
    header = f"{'rule':<24} {'jobs':>4} {'CPU s':>8} {'wall s':>8} {'RSS MB':>7} {'own CPU s':>9} {'outside':>8}"
    if base:
        header += f" {'CPU ratio':>9}"
    print(header)

    def line(name: str, jobs: int, cpu: float, wall: float, rss: float, own: float, outside: float, ratio: str) -> str:
        share = f"{outside / own:7.0%}" if own > 0 else f"{'-':>7}"
        own_s = f"{own:9.1f}" if own == own else f"{'-':>9}"
        return f"{name:<24} {jobs:>4} {cpu:8.1f} {wall:8.1f} {rss:7.0f} {own_s} {share:>8}{ratio}"

    for r in costs:
        ratio = f" {r.cpu_s / base[r.rule].cpu_s:9.2f}" if r.rule in base and base[r.rule].cpu_s > 0 else ""
        print(line(r.rule, r.jobs, r.cpu_s, r.wall_s, r.max_rss_mb, r.logged_cpu_s, r.outside_s, ratio))
    logged = [r for r in costs if r.logged_cpu_s == r.logged_cpu_s]
    total = {
        "jobs": sum(r.jobs for r in costs),
        "cpu_s": sum(r.cpu_s for r in costs),
        "wall_s": sum(r.wall_s for r in costs),
        "logged_cpu_s": sum(r.logged_cpu_s for r in logged),
        "outside_s": sum(r.outside_s for r in logged),
    }
    base_total = sum(r.cpu_s for r in base.values())
    ratio = f" {total['cpu_s'] / base_total:9.2f}" if base_total > 0 else ""
    print(
        line(
            "sum",
            total["jobs"],
            total["cpu_s"],
            total["wall_s"],
            max(r.max_rss_mb for r in costs),
            total["logged_cpu_s"] if logged else float("nan"),
            total["outside_s"],
            ratio,
        )
    )
    fixed = fixed_job_cost(args.results)
    if fixed == fixed:
        print(
            f"fixed cost of a job (smallest 'work' mark): {fixed:.2f} CPU s; x {total['jobs']} jobs = "
            f"{fixed * total['jobs']:.0f} CPU s"
        )
    else:
        print("no job logged its CPU marks (a run before the scripts logged them): own CPU and outside share unknown")
    result: dict[str, object] = {"rules": [asdict(r) for r in costs], "sum": total, "fixed_job_cpu_s": fixed}
    if args.time:
        run = time_v_cpu(args.time)
        whole = run["user_s"] + run["system_s"]
        jobs_cpu = total["logged_cpu_s"] if logged else total["cpu_s"]
        print(
            f"whole run: {run['wall_s']:.0f} s wall, {run['user_s']:.0f} s user + {run['system_s']:.0f} s system = "
            f"{whole:.0f} CPU s, peak RSS {run['max_rss_mb']:.0f} MB; outside the jobs' processes (Snakemake, the "
            f"jobs' shells): {whole - jobs_cpu:.0f} CPU s ({(whole - jobs_cpu) / whole:.0%})"
        )
        result["run"] = {**run, "cpu_s": whole, "outside_jobs_cpu_s": whole - jobs_cpu}
    if args.json:
        write_json(result, args.json)


if __name__ == "__main__":
    main()
