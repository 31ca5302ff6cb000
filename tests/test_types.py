"""The faces read statically: each package's type stub is its face's list, and a type checker
sees every face name with its type and flags a name no face shows."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from phenoica.utils.face_stubs import ROOT, face_modules, face_stubs, main, stale_stubs
from tests.conftest import REPO
from tests.type_findings import differences, findings


def test_every_face_has_a_current_stub():
    """A stub beside every package ``__init__.py`` with a face, equal to what the generator writes
    from the face's list (``python -m phenoica.utils.face_stubs`` after a face changes)."""
    stubs = face_stubs()
    faced = [init for init in ROOT.rglob("__init__.py") if face_modules(init) is not None]
    assert len(faced) > 15 and sorted(stubs) == sorted(i.with_suffix(".pyi") for i in faced)
    assert stale_stubs() == [], "stale face stubs: run python -m phenoica.utils.face_stubs"
    classify = ROOT / "classify" / "__init__.pyi"
    assert "from ._splits import make_folds as make_folds\n" in stubs[classify]
    assert '    "make_folds",\n' in stubs[classify]


def test_a_new_face_name_without_its_stub_is_stale(tmp_path, monkeypatch, capsys):
    """A name added to a face, a face removed or a stub edited by hand makes the stub stale;
    writing the stubs makes them current again."""
    root = tmp_path / "phenoica"
    shutil.copytree(ROOT, root, ignore=shutil.ignore_patterns("__pycache__"))
    init = root / "classify" / "__init__.py"
    init.write_text(init.read_text().replace('"make_folds",', '"make_folds", "new_name",'))
    (root / "sweep" / "__init__.py").write_text('"""No face."""\n')
    (root / "utils" / "__init__.pyi").write_text("x: int\n")
    assert "new_name" in face_modules(init)["_splits"]
    assert stale_stubs(root) == sorted(
        root / p for p in ("classify/__init__.pyi", "sweep/__init__.pyi", "utils/__init__.pyi")
    )
    assert "from ._splits import new_name as new_name\n" in face_stubs(root)[root / "classify" / "__init__.pyi"]
    monkeypatch.setattr("phenoica.utils.face_stubs.ROOT", root)
    assert main(["--check"]) == 1
    assert main([]) == 0 and main(["--check"]) == 0
    assert not (root / "sweep" / "__init__.pyi").exists()
    assert capsys.readouterr().out.splitlines()[-1] == "every stub is current"


def test_the_type_baseline_check_finds_new_and_fixed_findings():
    output = (
        "src/phenoica/a.py:3: error: Bad thing  [arg-type]\n"
        "src/phenoica/a.py:9: note: See this\n"
        "src/phenoica/a.py:12: error: Bad thing  [arg-type]\n"
        'src/phenoica/b.py:4:2: error: Module has no attribute "x"  [attr-defined]\n'
        "Found 3 errors in 2 files (checked 2 source files)\n"
    )
    found = findings(output)
    assert found == Counter(
        {
            "src/phenoica/a.py: [arg-type] Bad thing": 2,
            'src/phenoica/b.py: [attr-defined] Module has no attribute "x"': 1,
        }
    )
    baseline = Counter({"src/phenoica/a.py: [arg-type] Bad thing": 1, "src/phenoica/c.py: [misc] Gone": 1})
    assert differences(found, baseline) == (
        ["src/phenoica/a.py: [arg-type] Bad thing", 'src/phenoica/b.py: [attr-defined] Module has no attribute "x"'],
        ["src/phenoica/c.py: [misc] Gone"],
    )
    assert differences(found, found) == ([], [])


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is installed by the test extra")
def test_a_type_checker_sees_through_the_faces(tmp_path):
    """mypy (the check of .ci/run) reads a face name's real type, not ``object``, and reports a
    name that the face does not show."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import phenoica.classify as classify\n"
        "from phenoica.utils import bh_qvalues\n\n"
        "reveal_type(classify.make_folds)\n"
        "reveal_type(bh_qvalues)\n"
        "classify.no_such_name\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml", "--follow-imports", "silent", str(probe)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"MYPYPATH": str(REPO / "src"), "PATH": ""},
    )
    told = [line.split(": ", 1)[1] for line in done.stdout.splitlines() if line.startswith(str(probe))]
    assert len(told) == 3, done.stdout
    assert told[0].startswith('note: Revealed type is "def (table: Any, options: ') and told[0].endswith(
        '-> list[phenoica.classify._splits.Fold]"'
    )
    assert told[1].startswith('note: Revealed type is "def (p: numpy.ndarray[')
    assert told[2] == 'error: Module has no attribute "no_such_name"  [attr-defined]'
