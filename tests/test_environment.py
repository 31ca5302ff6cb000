"""The cluster environment is whole: envs/phenoica.yaml, the one conda environment of every rule
(`snakemake --sdm conda`), lists each runtime dependency of pyproject.toml with the same lower
bound, under its conda-forge name, and every rule that runs a job runs it in that environment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.conftest import REPO

tomllib = pytest.importorskip("tomllib")

ENV_FILE = REPO / "envs" / "phenoica.yaml"
# PyPI name -> conda-forge name, where they differ (extras such as dask[array] drop: conda-forge's
# dask brings the array dependencies).
CONDA_NAMES = {"torch": "pytorch", "matplotlib": "matplotlib-base"}
# Runtime dependencies the environment leaves out on purpose: a job's script imports the Snakemake
# that runs the workflow (its preamble puts that installation on the job's sys.path).
FROM_THE_RUNNING_SNAKEMAKE = {"snakemake"}
# Entries of the environment that are not packages of pyproject.toml.
ENV_ONLY = {"python", "pip"}


def lower_bound(specifier: SpecifierSet) -> Version | None:
    """The ``>=`` bound of a specifier set (None without one)."""
    bounds = [Version(s.version) for s in specifier if s.operator == ">="]
    return max(bounds) if bounds else None


def pyproject_dependencies(path: Path = REPO / "pyproject.toml") -> dict[str, Version | None]:
    """[project].dependencies: canonical PyPI name -> lower bound."""
    deps = tomllib.loads(path.read_text())["project"]["dependencies"]
    return {Requirement(d).name.lower(): lower_bound(Requirement(d).specifier) for d in deps}


def conda_entry(spec: str) -> tuple[str, SpecifierSet]:
    """A conda match spec of the forms ``name``, ``name=1.2`` and ``name>=1.2`` (what the file uses)."""
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(.*)", spec.strip())
    if m is None:
        raise ValueError(f"{ENV_FILE.name}: cannot read the dependency {spec!r}")
    name, rest = m.group(1).lower(), m.group(2).replace(" ", "")
    if re.fullmatch(r"=[^=<>!,]+", rest):  # conda's name=1.2 means 1.2.*
        rest = f"=={rest[1:]}.*"
    return name, SpecifierSet(rest)


def environment_entries(path: Path = ENV_FILE) -> dict[tuple[str, str], SpecifierSet]:
    """(channel kind, name) -> specifier: ("conda", conda name) and ("pip", PyPI name)."""
    entries: dict[tuple[str, str], SpecifierSet] = {}
    for dep in yaml.safe_load(path.read_text())["dependencies"]:
        if isinstance(dep, dict):
            for spec in dep["pip"]:
                req = Requirement(spec)
                entries[("pip", req.name.lower())] = req.specifier
        else:
            name, specifier = conda_entry(dep)
            entries[("conda", name)] = specifier
    return entries


def mismatches(pyproject: dict[str, Version | None], env: dict[tuple[str, str], SpecifierSet]) -> list[str]:
    """What the environment lacks, bounds differently, or lists beyond pyproject.toml."""
    problems, used = [], set()
    for name, bound in sorted(pyproject.items()):
        if name in FROM_THE_RUNNING_SNAKEMAKE:
            continue
        keys = [k for k in (("conda", CONDA_NAMES.get(name, name)), ("pip", name)) if k in env]
        if not keys:
            problems.append(f"{name}: missing (conda-forge name {CONDA_NAMES.get(name, name)!r}, or under pip:)")
            continue
        used.add(keys[0])
        env_bound = lower_bound(env[keys[0]])
        if env_bound != bound:
            problems.append(f"{name}: lower bound {env_bound} in the environment, {bound} in pyproject.toml")
    for kind, name in sorted(set(env) - used):
        if kind == "pip" or name not in ENV_ONLY:
            problems.append(f"{name}: in the environment, not among pyproject.toml's dependencies")
    return problems


def test_the_environment_lists_every_runtime_dependency_with_its_lower_bound():
    pyproject = pyproject_dependencies()
    assert FROM_THE_RUNNING_SNAKEMAKE <= set(pyproject)
    problems = mismatches(pyproject, environment_entries())
    assert not problems, f"{ENV_FILE.relative_to(REPO)} against pyproject.toml:\n" + "\n".join(problems)


def test_the_environments_python_meets_requires_python():
    (python,) = [s for (kind, name), s in environment_entries().items() if (kind, name) == ("conda", "python")]
    requires = SpecifierSet(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"])
    (pinned,) = list(python)
    assert requires.contains(pinned.version.rstrip(".*")), (str(python), str(requires))


def test_the_comparison_finds_a_missing_package_a_wrong_bound_and_an_extra(tmp_path):
    env = tmp_path / "env.yaml"
    env.write_text(
        "dependencies:\n  - python=3.11\n  - numpy>=1.20\n  - pytorch>=2.4\n  - matplotlib-base>=3.8\n"
        "  - seaborn\n  - pip\n  - pip:\n      - copairs>=0.5\n"
    )
    pyproject = {
        "numpy": Version("1.26"),
        "torch": Version("2.4"),
        "matplotlib": Version("3.8"),
        "copairs": Version("0.5"),
        "plotly": Version("6.0"),
        "snakemake": Version("8.20"),
    }
    assert mismatches(pyproject, environment_entries(env)) == [
        "numpy: lower bound 1.20 in the environment, 1.26 in pyproject.toml",
        "plotly: missing (conda-forge name 'plotly', or under pip:)",
        "seaborn: in the environment, not among pyproject.toml's dependencies",
    ]


# --------------------------------------------------------------------------- one environment
RULE = re.compile(r"^(?P<indent>\s*)(?:rule|checkpoint)\b[^:]*:\s*$")
JOB_DIRECTIVES = ("script", "shell", "notebook", "wrapper", "run")


def rules_without_the_environment(files: list[Path]) -> list[str]:
    """Each rule that runs a job other than as ``conda: ENVS`` with a script, shell or notebook
    (a ``run:`` block runs inside Snakemake itself, outside any environment)."""
    problems = []
    for path in files:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            m = RULE.match(line)
            if m is None:
                continue
            indent = len(m.group("indent"))
            body: list[str] = []
            for later in lines[i + 1 :]:
                if later.strip() and not later.lstrip().startswith("#") and len(later) - len(later.lstrip()) <= indent:
                    break
                body.append(later)
            directives = {}
            for j, b in enumerate(body):
                d = re.match(r"\s*(\w+):\s*(.*)$", b)
                if d and len(b) - len(b.lstrip()) == indent + 4:
                    value = d.group(2) or next((x.strip() for x in body[j + 1 :] if x.strip()), "")
                    directives[d.group(1)] = value
            runs = [d for d in JOB_DIRECTIVES if d in directives]
            name = f"{'rules/' if path.parent.name == 'rules' else ''}{path.name}:{i + 1}"
            if "run" in runs:
                problems.append(f"{name}: a run: block, which no conda environment reaches")
            elif runs and directives.get("conda") != "ENVS":
                problems.append(f"{name}: conda is {directives.get('conda')!r}, not ENVS")
    return problems


def workflow_files() -> list[Path]:
    return [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]


def test_every_rule_runs_in_the_one_environment():
    assert sorted(p.name for p in (REPO / "envs").iterdir()) == ["phenoica.yaml"]
    common = (REPO / "rules" / "common.smk").read_text()
    assert re.search(r'^ENVS = "\.\./envs/phenoica\.yaml"$', common, re.MULTILINE), "rules/common.smk: ENVS"
    assert (REPO / "rules" / "../envs/phenoica.yaml").resolve() == ENV_FILE.resolve()
    jobs = sum(len(re.findall(r"^\s+script:\s*$", p.read_text(), re.MULTILINE)) for p in workflow_files())
    assert jobs >= 25  # the scan sees the rules (a broken pattern would pass vacuously)
    assert rules_without_the_environment(workflow_files()) == []


def test_the_rule_scan_finds_a_rule_outside_the_environment(tmp_path):
    (tmp_path / "rules").mkdir()
    smk = tmp_path / "rules" / "x.smk"
    smk.write_text(
        "rule good:\n    output:\n        'a',\n    conda:\n        ENVS\n    script:\n        'a.py'\n\n\n"
        "rule other_env:\n    output:\n        'b',\n    conda:\n        'envs/other.yaml'\n    shell:\n        'touch b'\n\n\n"
        "rule none:\n    output:\n        'c',\n    script:\n        'c.py'\n\n\n"
        "for x in [1]:\n\n    rule:\n        name:\n            'loop'\n        conda:\n            ENVS\n"
        "        script:\n            'd.py'\n\n\n"
        "rule inline:\n    output:\n        'e',\n    run:\n        pass\n\n\n"
        "rule all:\n    input:\n        'a',\n"
    )
    assert rules_without_the_environment([smk]) == [
        "rules/x.smk:10: conda is \"'envs/other.yaml'\", not ENVS",
        "rules/x.smk:19: conda is None, not ENVS",
        "rules/x.smk:37: a run: block, which no conda environment reaches",
    ]
