"""The small jobs import what their work uses: a fresh interpreter that imports what a rule's
script imports, and the module of the options its job unpickles, loads none of the heavy
packages that job never calls (each costs a job 0.1 to 1 CPU second before its work starts)."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys

import pytest

from phenoica.contract import RULE_OPTIONS
from tests.conftest import REPO

#: Packages that take long to import, as ``sys.modules`` names them.
HEAVY: tuple[str, ...] = ("sklearn", "lightgbm", "torch", "picard", "plotly", "matplotlib", "scipy.stats", "zarr")

#: Rule (its script is ``scripts/{rule}.py``) -> the heavy packages its work uses, imported when
#: the job starts; every other package of :data:`HEAVY` must stay out of the job's imports.
#: fit_transforms's rotations import scikit-learn, picard and scipy.stats inside their fits.
USES: dict[str, tuple[str, ...]] = {
    "apply_transform": (),
    "fit_transforms": (),
    "map_readout": ("scipy.stats",),  # q-values (utils.stats.bh_qvalues)
    "splits": (),
    "gather_scores": (),
    "call_hits": ("scipy.stats",),  # the null's t distribution, normality checks
    "biomap_profiles": (),
    "biomap": ("matplotlib",),  # the heatmap
    "batch_metrics": ("sklearn", "scipy.stats"),  # silhouettes, kNN, the batch classifier
    "gather_biomap": (),
    "gather_profiles": (),
    "align": ("sklearn", "scipy.stats"),  # the alignment maps, mutual kNN
    "structural": ("sklearn", "scipy.stats"),  # MCC, probes, InfoMEC
    "gather_identifiability": (),
    "simulate_plate": ("zarr",),  # writes the plate store
    "plate_metadata": ("zarr",),  # opens the plate store
}


def _options_modules() -> None:
    """Import every options module, so that :data:`RULE_OPTIONS` names every rule's options."""
    for path in sorted((REPO / "src" / "phenoica").rglob("_options.py")):
        rel = path.relative_to(REPO / "src").with_suffix("")
        importlib.import_module(".".join(rel.parts))


def job_imports(rule: str) -> list[str]:
    """The imports a ``rule`` job runs before its work: every import statement of its script (a
    name from a package's face loads the module that defines it), and the module of its options
    (Snakemake unpickles them into ``snakemake.params``)."""
    tree = ast.parse((REPO / "scripts" / f"{rule}.py").read_text())
    imports = [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    _options_modules()
    if rule in RULE_OPTIONS:
        imports.append(f"import {RULE_OPTIONS[rule].__module__}")
    return list(dict.fromkeys(imports))


def loaded_modules(imports: list[str]) -> set[str]:
    """``sys.modules`` of a fresh interpreter (this checkout's ``src`` first) after running ``imports``."""
    code = "\n".join(["import json, sys", *imports, "print(json.dumps(sorted(sys.modules)))"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(json.loads(proc.stdout.splitlines()[-1]))


def test_job_imports_reads_a_script_and_its_options():
    assert job_imports("apply_transform") == [
        "from phenoica.utils import log_job_cpu, rule_logger",
        "from phenoica.transforms import apply_transform_files",
        "from phenoica.workflow import run_job",
        "import phenoica.transforms._options",
    ]


def test_every_listed_rule_has_its_script_and_uses_only_heavy_packages():
    assert all((REPO / "scripts" / f"{rule}.py").is_file() for rule in USES)
    assert {p for used in USES.values() for p in used} <= set(HEAVY)


@pytest.mark.parametrize("rule", sorted(USES))
def test_a_small_job_imports_no_heavy_package_it_does_not_use(rule):
    loaded = loaded_modules(job_imports(rule))
    unused = [p for p in HEAVY if p not in USES[rule] and p in loaded]
    assert not unused, f"rule {rule}: {job_imports(rule)} loads {unused}, which the job never uses"
