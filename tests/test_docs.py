"""The README documents every config key: its table is the one generated from the schema."""

from __future__ import annotations

from phenoica.config import config_reference
from tests.conftest import REPO


def test_readme_config_table_matches_schema():
    text = (REPO / "README.md").read_text()
    start, end = "<!-- config-reference:start -->\n", "<!-- config-reference:end -->"
    assert start in text and end in text
    block = text.split(start, 1)[1].split(end, 1)[0]
    assert block == config_reference(), "README config table is stale: regenerate with python -m phenoica.config"


def test_readme_has_the_two_setup_commands_and_ci_runs_the_test_one():
    text = (REPO / "README.md").read_text()
    test_cmd = 'python -m pytest -m "slow or not slow" -n 2 --dist loadfile -q'
    assert "snakemake --cores 2" in text and test_cmd in text
    assert test_cmd in (REPO / ".ci" / "run").read_text()


def test_readme_module_map_has_one_line_per_module():
    """The README's architecture notes list every module of the library, one line each."""
    text = (REPO / "README.md").read_text()
    block = text.split("The library, one line per module", 1)[1].split("```", 2)[1]
    listed = [line.split()[0] for line in block.strip().splitlines()]
    src = REPO / "src" / "phenoica"
    modules = sorted(
        str(p.relative_to(src))
        for p in src.rglob("*.py")
        if p.name != "__init__.py" or p.parent.name in ("models", "variants")
    )
    assert sorted(m for m in listed if m.endswith(".py")) == modules
    assert len(listed) == len(set(listed))
