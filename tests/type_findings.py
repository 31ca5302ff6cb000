"""The library's type check: mypy on ``src/phenoica`` (its settings: ``[tool.mypy]`` in
pyproject.toml), whose findings may not grow past the baseline ``tests/type_findings.txt``.

A finding is its file, message and error code, without its line number (so an edit above it does
not move it); the baseline holds each finding once per occurrence. A finding not in the baseline
fails the check, and so does a baseline finding that is gone: the baseline only shrinks, rewritten
when findings are fixed. Run from the repository root (``.ci/run`` runs the check):

    python tests/type_findings.py            # check: exit 1 when the findings differ from the baseline
    python tests/type_findings.py --update   # rewrite the baseline (only after fixing findings)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: The checked-in findings the library still has.
BASELINE = REPO / "tests" / "type_findings.txt"

#: One error line of mypy's output: ``path:line: error: message  [code]``.
ERROR = re.compile(r"^(?P<path>[^:\n]+):\d+(?::\d+)?: error: (?P<message>.*?)\s+\[(?P<code>[a-z-]+)\]$", re.M)


def findings(output: str) -> Counter[str]:
    """Each error of mypy's ``output`` as ``path: [code] message``, counted (notes left out)."""
    return Counter(f"{m['path']}: [{m['code']}] {m['message']}" for m in ERROR.finditer(output))


def differences(found: Counter[str], baseline: Counter[str]) -> tuple[list[str], list[str]]:
    """The findings in ``found`` beyond ``baseline`` (new) and those of ``baseline`` no longer
    found (fixed), each repeated once per occurrence."""
    return sorted((found - baseline).elements()), sorted((baseline - found).elements())


def run_mypy() -> str:
    """mypy's output on the library, run with this interpreter from the repository root."""
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True)
    if done.returncode not in (0, 1) or ("error: " not in done.stdout and "Success" not in done.stdout):
        raise SystemExit(f"mypy failed (rc {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done.stdout


def read_baseline(path: Path = BASELINE) -> Counter[str]:
    """The baseline's findings, counted (its comment lines left out)."""
    return Counter(line for line in path.read_text().splitlines() if line and not line.startswith("#"))


def write_baseline(found: Counter[str], path: Path = BASELINE) -> None:
    head = "# mypy's findings on src/phenoica that remain (tests/type_findings.py): fix them, never add one.\n"
    path.write_text(head + "".join(f"{line}\n" for line in sorted(found.elements())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite the baseline with the findings of now")
    args = parser.parse_args(argv)
    found = findings(run_mypy())
    if args.update:
        write_baseline(found)
        print(f"{BASELINE.relative_to(REPO)}: {sum(found.values())} findings")
        return 0
    new, fixed = differences(found, read_baseline())
    for line in new:
        print(f"new finding: {line}")
    if fixed:
        print(f"{len(fixed)} findings of the baseline are gone: run python tests/type_findings.py --update")
    print(f"type check: {sum(found.values())} findings, {len(new)} new, {len(fixed)} fixed")
    return 1 if new or fixed else 0


if __name__ == "__main__":
    raise SystemExit(main())
