"""Digest of every output table of every checked-in scenario: what a refactor must leave unchanged.

Runs each scenario of ``config/scenarios/`` (and, with ``--default``, the embedded default run)
in one fresh working folder (the scenarios' inputs written there first) with ``snakemake --cores N``, then writes one JSON mapping
``scenario -> {table path: sha256}`` for every Parquet, CSV and TSV table under its results
(logs, benchmark files and figures are not tables). ``--against`` compares with an earlier
digest and prints each table that changed, appeared or went missing; the exit status is 1 when
any did. Run from the repository root:

    python benchmarks/scenario_tables.py --json before.json             # at the old commit
    python benchmarks/scenario_tables.py --json after.json --against before.json
    python benchmarks/scenario_tables.py --only arrayed --only zarr --json x.json
    python benchmarks/scenario_tables.py --only arrayed --work kept/ --json x.json   # keep the results

Each scenario's wall seconds are printed, so the cost of the check is visible too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phenoica.contract import read_yaml  # noqa: E402
from phenoica.screen import SCENARIOS  # noqa: E402

#: Suffixes of the files compared: tables, not logs or figures.
TABLE_SUFFIXES = (".parquet", ".csv", ".tsv")


def table_digests(results: Path) -> dict[str, str]:
    """sha256 of every table under ``results`` (paths relative to it), logs and benchmarks left out."""
    out = {}
    for path in sorted(results.rglob("*")):
        rel = path.relative_to(results)
        if path.suffix not in TABLE_SUFFIXES or rel.parts[0] in ("logs", "benchmarks"):
            continue
        out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def prepare_folder(work: Path) -> None:
    """Copy the workflow and its shipped data (``data/``: the real screen some scenarios read) into
    ``work`` and write the simulated scenarios' inputs (``scenario_data/``) there."""
    for item in ("Snakefile", "rules", "scripts", "config", "config.yaml", "envs", "profiles", "data"):
        src = REPO / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, work / item)
    subprocess.run([sys.executable, "-m", "phenoica.screen.scenarios"], cwd=work, check=True, capture_output=True)


def run_scenario(work: Path, name: str | None, cores: int) -> tuple[dict[str, str], float]:
    """Run scenario ``name`` (None: the default config) in ``work``; its table digests and wall seconds."""
    cmd = ["snakemake", "--cores", str(cores), "--quiet", "all"]
    config = work / "config.yaml"
    if name is not None:
        config = work / "config" / "scenarios" / f"{name}.yaml"
        cmd += ["--configfile", str(config)]
    results = work / str(read_yaml(config).get("results", "results"))
    if results.exists():
        shutil.rmtree(results)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"scenario {name or 'default'} failed (rc {done.returncode}):\n{done.stderr[-4000:]}")
    return table_digests(results), seconds


def compare(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> list[str]:
    """Lines naming every table that differs between two digests (scenarios in both only)."""
    lines = []
    for name in sorted(set(before) & set(after)):
        old, new = before[name], after[name]
        lines += [f"{name}: changed {t}" for t in sorted(set(old) & set(new)) if old[t] != new[t]]
        lines += [f"{name}: missing {t}" for t in sorted(set(old) - set(new))]
        lines += [f"{name}: new {t}" for t in sorted(set(new) - set(old))]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, type=Path, help="where to write the digests")
    parser.add_argument("--against", type=Path, help="an earlier digest to compare with")
    parser.add_argument("--only", action="append", help="a scenario to run (repeatable; default: all)")
    parser.add_argument("--default", action="store_true", help="also run the embedded default (the demo screen)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--work", type=Path, help="run in this folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    names: list[str | None] = list(args.only or SCENARIOS)
    if args.default:
        names.append(None)
    digests = {}
    with tempfile.TemporaryDirectory(prefix="phenoica-tables-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        prepare_folder(work)
        for name in names:
            label = name or "default"
            digests[label], seconds = run_scenario(work, name, args.cores)
            print(f"{label}: {len(digests[label])} tables, {seconds:.0f} s", flush=True)
            args.json.write_text(json.dumps(digests, indent=1, sort_keys=True))
    if args.against is None:
        return 0
    lines = compare(json.loads(args.against.read_text()), digests)
    print("\n".join(lines) if lines else "every table identical")
    return 1 if lines else 0


if __name__ == "__main__":
    raise SystemExit(main())
