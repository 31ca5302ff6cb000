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
