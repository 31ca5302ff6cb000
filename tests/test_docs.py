"""The documentation: a short README over pages in docs/, built strictly, that stand alone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from phenoica.workflow.config_reference import config_reference
from tests.conftest import REPO

DOCS = REPO / "docs"
TEST_CMD = 'python -m pytest -m "slow or not slow" -n 2 --dist loadfile -q'
#: Documents that live outside this repository; no file in it may point at them.
OUTSIDE = re.compile(r"PAPER\.md|DESIGN\.md|FIELD\.md|STYLE\.md|\.\./shared")


def _tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    suffixes = {".py", ".md", ".smk", ".yaml", ".yml", ".rst", ".toml", ".txt", ""}
    return [REPO / f for f in out.splitlines() if Path(f).suffix in suffixes and (REPO / f).is_file()]


def test_config_reference_page_matches_schema():
    text = (DOCS / "configuration.md").read_text()
    start, end = "<!-- config-reference:start -->\n", "<!-- config-reference:end -->"
    assert start in text and end in text
    block = text.split(start, 1)[1].split(end, 1)[0]
    assert block == config_reference(), (
        "docs/configuration.md is stale: regenerate with python -m phenoica.workflow.config_reference"
    )
    # every row keeps its four cells: a pipe or a tab among a key's allowed values is escaped
    rows = [line for line in block.splitlines() if line.startswith("| `")]
    assert rows and all(len(re.split(r"(?<!\\)\|", row)) == 6 for row in rows)
    assert "\t" not in block and '"\\t", \\|, null.' in block  # screen.separator's tab and pipe


def test_readme_is_short_and_has_the_two_setup_commands_that_ci_runs():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    install = re.search(r"^python3 -m venv .*pip install -e \"\.\[([a-z,]+)\]\" && snakemake --cores 2$", readme, re.M)
    assert install, "README command 1 (install + demo) not found"
    assert TEST_CMD in readme
    ci = (REPO / ".ci" / "run").read_text()
    assert TEST_CMD in ci
    # command 1 installs exactly the extras CI installs, so command 2 runs what CI runs
    ci_extras = re.search(r'pip install --quiet -e "\.\[([a-z,]+)\]"', ci)
    assert ci_extras and set(install.group(1).split(",")) == set(ci_extras.group(1).split(","))


def test_readme_links_resolve_to_files_in_the_repository():
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert links
    missing = [link for link in links if "://" not in link and not (REPO / link).exists()]
    assert not missing


def test_layer_map_lists_every_package_in_its_layer():
    """docs/architecture.md lists the library's packages layer by layer, as tests/test_layout.py declares them."""
    from tests.test_layout import LAYERS

    text = (DOCS / "architecture.md").read_text()
    block = text.split("The library's packages, one layer per line", 1)[1].split("```", 2)[1]
    listed = []
    for line in block.strip().splitlines():
        words = line.split()
        assert words[0] == "layer" and int(words[1]) == len(listed), line
        packages = {p for layer in LAYERS for p in layer}
        leading = [w for w in words[2:]]
        names = []
        while leading and leading[0] in packages:  # the layer's packages, then what they hold
            names.append(leading.pop(0))
        listed.append(tuple(names))
    assert tuple(listed) == LAYERS


def test_no_file_refers_to_documents_outside_the_repository():
    hits = [
        str(p.relative_to(REPO))
        for p in _tracked_text_files()
        if p.name != "test_docs.py" and OUTSIDE.search(p.read_text(errors="replace"))
    ]
    assert not hits


def test_docs_build_in_strict_mode(tmp_path):
    """Every page is in the table of contents, every link and anchor resolves (warnings are errors)."""
    res = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-n", "--keep-going", "-q", "-b", "html", str(DOCS), str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-4000:]
    assert (tmp_path / "index.html").exists() and (tmp_path / "configuration.html").exists()


#: dotted names in the docs that are not Python objects: the embedding parquet's metadata key
NOT_OBJECTS = {"phenoica.embedding"}


def _resolves(name: str) -> bool:
    import importlib

    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_library_name_the_docs_give_exists():
    """A reader follows a rule to its code in one hop: every `phenoica.<module>.<name>` the README
    and the docs pages name (in code spans) imports, so a move of a module or a function cannot
    leave a page pointing at nothing."""
    pages = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
    named = {m.group(1) for page in pages for m in re.finditer(r"`(phenoica(?:\.\w+)+)", page.read_text())}
    assert len(named) > 50  # the rule table alone names one function per rule
    assert not _resolves("phenoica.classify.no_such_function")  # the check can fail
    missing = sorted(n for n in named - NOT_OBJECTS if not _resolves(n))
    assert not missing, missing
