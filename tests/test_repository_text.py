"""The repository speaks for itself: code, comments, error messages, tests, docs, benchmarks,
configs and CI say what the project does and why. A reference to a tracker's issue number, or to
who did a piece of work, means nothing to a user or a new maintainer, so none may appear there.

The patterns use ``\\s+`` and ``\\d`` where the text they catch has a space or a digit, so this
file's own source does not match them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO

# What is scanned: every text file under these paths (folders) or at them (files).
SCANNED = (
    "src",
    "scripts",
    "rules",
    "Snakefile",
    "tests",
    "docs",
    "benchmarks",
    "config",
    "config.yaml",
    "envs",
    "profiles",
    "README.md",
    ".ci",
)
# Build outputs, caches and run outputs (see .gitignore): not the repository's own text.
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", "_build", "build", "out", "results", ".snakemake"}

# (what it is, pattern): each names a tracker item or who did the work.
FORBIDDEN = (
    ("an issue number", re.compile(r"\bissues?[\s\-]*#?\s*\d+", re.IGNORECASE)),
    ("who did the work", re.compile(r"\b(?:lead|helper)\s+engineers?\b", re.IGNORECASE)),
    ("who did the work", re.compile(r"\bhelper-\d+", re.IGNORECASE)),
    (
        "who did the work",
        re.compile(
            r"\b(?:this|that|an\s+earlier|the\s+earlier|a\s+previous|the\s+previous)\s+session\b", re.IGNORECASE
        ),
    ),
    ("who did the work", re.compile(r"\bissue'?s\s+reporter\b", re.IGNORECASE)),
)


def scanned_files(root: Path = REPO) -> list[Path]:
    """The text files under :data:`SCANNED`, build outputs and caches left out."""
    files: list[Path] = []
    for name in SCANNED:
        top = root / name
        if top.is_file():
            files.append(top)
        elif top.is_dir():
            files += [
                p
                for p in top.rglob("*")
                if p.is_file()
                and not SKIPPED_DIRS.intersection(p.relative_to(top).parts[:-1])
                and not any(part.endswith(".egg-info") for part in p.parts)
            ]
    return sorted(files)


def forbidden_words(path: Path, root: Path = REPO) -> list[str]:
    """One line per hit: ``file:line: what (the words): the line``; a binary file has none."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return []
    hits = []
    for number, line in enumerate(text.splitlines(), start=1):
        for what, pattern in FORBIDDEN:
            for match in pattern.finditer(line):
                hits.append(f"{path.relative_to(root)}:{number}: {what} ({match.group(0)!r}): {line.strip()[:160]}")
    return hits


# Lines of the kind that once stood in this repository (built so this source holds none of them).
FLAGGED = [
    f"truth table: no 'complex' column (written by gene_truth since issue {15})",
    f"Review mends: pooled recall (issues {30}, 31)",
    f"# House habits (Issue {13}): lint and format checks",
    f"drawn after the issue-{11} draws",
    f"in a fresh clone, run by the lead{' '}engineer on the quiet 2-core machine",
    f"commit 1546c6e, run by a helper{' '}engineer on the quiet 2-core machine",
    f"as helper-{11} found",
    f"estimated from the earlier{' '}session's forward rate",
    f"the others this{' '}session may be the first in weeks to run",
    f"at commit 4c18ab8, by the issue's{' '}reporter",
]
# Legitimate words that must stay allowed.
ALLOWED = [
    "A headless Chromium session with a fresh profile",
    '@pytest.fixture(scope="session")',
    "except Exception as exc:  # a private helper: report, do not stop",
    "One seed helper (phenoica.utils._seeding)",
    "a page is a title, lead paragraphs and sections",
    "tissue 5 of the atlas",
    "a known issue of torch's inductor; issues are reported upstream",
    'fill="#555"',
    "issue numbers mean nothing to a user",
]


@pytest.mark.parametrize("line", FLAGGED)
def test_the_check_flags_issue_numbers_and_who_did_the_work(tmp_path, line):
    path = tmp_path / "page.md"
    path.write_text(f"A first line.\n{line}\n")
    hits = forbidden_words(path, root=tmp_path)
    assert len(hits) == 1 and hits[0].startswith("page.md:2: "), hits


@pytest.mark.parametrize("line", ALLOWED)
def test_the_check_leaves_ordinary_words_alone(tmp_path, line):
    path = tmp_path / "page.md"
    path.write_text(line + "\n")
    assert forbidden_words(path, root=tmp_path) == []


def test_the_scan_covers_the_repository_and_skips_build_outputs(tmp_path):
    files = {p.relative_to(REPO).as_posix() for p in scanned_files()}
    for expected in ("Snakefile", "README.md", ".ci/run", "envs/phenoica.yaml", "tests/test_repository_text.py"):
        assert expected in files
    assert any(f.startswith("src/phenoica/") and f.endswith(".py") for f in files)
    assert any(f.startswith("docs/") and f.endswith(".md") for f in files)
    (tmp_path / "docs" / "_build").mkdir(parents=True)
    (tmp_path / "docs" / "_build" / "old.html").write_text("built before")
    (tmp_path / "docs" / "page.md").write_text("text")
    assert [p.relative_to(tmp_path).as_posix() for p in scanned_files(tmp_path)] == ["docs/page.md"]


def test_the_repository_names_no_issue_numbers_and_no_one_who_did_the_work():
    hits = [hit for path in scanned_files() for hit in forbidden_words(path)]
    assert not hits, (
        "say what the code does and why, not which issue asked for it or who did it; "
        "a measured figure states its command, commit and machine:\n" + "\n".join(hits)
    )
