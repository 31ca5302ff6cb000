"""A change of the demo against the truth check's floors: the shipped config with the second seed,
both seeds scored (``tests/test_demo_truth.py``'s config), with ``--set`` overrides, run end to
end by ``snakemake --cores 2`` in ``--dir`` (a finished run there is read back), and read with the
test's own functions: each model's probe R^2, the separation of effect from no-effect guides, the
guide calls at q < 0.1, the pooled recall and FDR, and the floors it misses.

    python benchmarks/demo_truth_floors.py --dir /tmp/batch32 --set train.batch_size=32
    python benchmarks/demo_truth_floors.py --dir /tmp/asis             # the demo as it is

Values are read as YAML (``--set demo.sites_per_well=2``, ``--set classify.n_null_guides=auto``).
Prints the run's wall and CPU seconds (its own and its jobs'); the comparison of two changes is
their rows side by side, run on the same machine.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.test_demo_truth import truth_check_config, truth_readings  # noqa: E402


def parse_sets(pairs: list[str]) -> dict[str, object]:
    """``key=value`` pairs, each value read as YAML."""
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set {pair!r}: expected dotted.key=value")
        out[key] = yaml.safe_load(value)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, required=True, help="working folder (its config.yaml and results/)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="dotted.key=value, repeatable")
    ap.add_argument("--cores", type=int, default=2)
    args = ap.parse_args()
    overrides = parse_sets(args.sets)
    args.dir.mkdir(parents=True, exist_ok=True)
    (args.dir / "config.yaml").write_text(yaml.safe_dump(truth_check_config(overrides), sort_keys=False))
    start = time.time()
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--configfile", "config.yaml"]
    proc = subprocess.run([*cmd, "--cores", str(args.cores)], cwd=args.dir, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"snakemake failed:\n{proc.stderr[-4000:]}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"overrides {overrides or 'none'}: {time.time() - start:.0f} s wall, {usage.ru_utime + usage.ru_stime:.0f} CPU s"
    )
    readings = truth_readings(args.dir / "results")
    print("probe R^2, raw embedding:", readings.probe_base.round(3).to_dict())
    cols = ["mannwhitney_p", "separation_lo"]
    print(readings.separation.loc[(slice(None), ["pca", "pca_ica"]), cols].round(4).to_string())
    print(readings.pooled[["model", "variant", "n_called", "true_positives", "false_positives", "recall"]].to_string())
    failed = readings.failed()
    print(
        f"pooled recall {readings.recall:.3f}, FDR {readings.fdr:.3f}; floors: {'met' if not failed else '; '.join(failed)}"
    )


if __name__ == "__main__":
    main()
