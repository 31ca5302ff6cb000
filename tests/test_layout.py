"""The library's layout: data flows one way, so no module imports one that imports it back and
no package imports one above it; each package shows a face (its public names) and keeps the rest
private."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO
from tests.faces import face, face_call, package_of, packages

SRC = REPO / "src"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def import_graph(root: Path = SRC / "phenoica") -> dict[str, set[str]]:
    """Module -> the phenoica modules it imports, module-level and inside functions alike; a name
    imported from a package's face counts as an import of the module that defines it."""
    modules = {_module_name(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("phenoica"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    home = face(node.module).get(alias.name) if node.module in packages() else None
                    graph[name].add(home or (sub if sub in modules else node.module))
            elif isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in modules)
    return {m: {t for t in targets if t in modules and t != m} for m, targets in graph.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_known_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_library():
    assert cycles(import_graph()) == []


#: The packages from the bottom up: a package imports only packages of the layers below its own.
#: Orchestration sits above the stages it calls: the component sweep (reruns transforms, classify,
#: hits) and the report (reads every stage) above them, the workflow (the door, the DAG's inputs)
#: and the studies at the top.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("utils",),
    ("contract",),
    ("screen",),
    ("models", "profiles"),
    ("embed", "transforms"),
    ("classify", "biomap", "identifiability"),
    ("hits",),
    ("report", "sweep"),
    ("studies", "workflow"),
)


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None  # phenoica.<package>[.<module>]; phenoica itself has none


def upward_imports(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Each import of a module from a package of its own layer or one above, as ``a -> b``."""
    level = {pkg: i for i, layer in enumerate(layers) for pkg in layer}
    found = []
    for module, targets in sorted(graph.items()):
        src = _package(module)
        for target in sorted(targets):
            dst = _package(target)
            if src and dst and src != dst and level[dst] >= level[src]:
                found.append(f"{module} -> {target}")
    return found


def test_layer_check_finds_a_known_upward_import():
    graph = {"phenoica.a.x": {"phenoica.b.y"}, "phenoica.b.y": {"phenoica.a.z"}, "phenoica.a.z": set()}
    assert upward_imports(graph, (("a",), ("b",))) == ["phenoica.a.x -> phenoica.b.y"]
    assert upward_imports(graph, (("a", "b"),)) == ["phenoica.a.x -> phenoica.b.y", "phenoica.b.y -> phenoica.a.z"]


def test_packages_import_only_the_layers_below_them():
    """No two packages import each other, directly or round a loop: every package is in one
    layer, and imports (module-level and inside functions) go down only."""
    packages = sorted(p.name for p in (SRC / "phenoica").iterdir() if (p / "__init__.py").is_file())
    assert sorted(pkg for layer in LAYERS for pkg in layer) == packages
    assert upward_imports(import_graph(), LAYERS) == []


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100
MAX_PUBLIC_PARAMETERS = 8

#: Classes whose ``__init__`` is another library's interface, exempt from the parameter limit:
#: timm builds ``VisionTransformer(embed_layer=...)``'s patch embedding with the keyword
#: arguments of its own ``PatchEmbed`` (``img_size``, ``patch_size``, ``in_chans``,
#: ``embed_dim``, ``bias``, ``dynamic_img_pad``, ``device``, ``dtype``), so ours takes them all.
FOREIGN_SIGNATURES = {"SharedChannelPatchEmbed", "ChannelAgnosticPatchEmbed"}


def _counted(name: str, owner: str | None) -> bool:
    """Whether function ``name`` (a method of class ``owner``) is held to the parameter limit:
    public functions and ``__init__`` are, private helpers (``_name``) are their module's own."""
    if name == "__init__":
        return owner not in FOREIGN_SIGNATURES
    return not name.startswith("_")


def size_problems(root: Path = SRC / "phenoica") -> list[str]:
    """Modules over MAX_MODULE_LINES lines, functions over MAX_FUNCTION_LINES lines and public
    functions and ``__init__`` methods with more than MAX_PUBLIC_PARAMETERS parameters (self /
    cls not counted)."""
    problems: list[str] = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        where = str(path.relative_to(root.parent))
        if len(text.splitlines()) > MAX_MODULE_LINES:
            problems.append(f"{where}: {len(text.splitlines())} lines")
        tree = ast.parse(text)
        owner = {id(f): c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                problems.append(f"{where}:{node.name}: {length} lines")
            args = node.args
            names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
            count = len([n for n in names if n not in ("self", "cls")])
            if _counted(node.name, owner.get(id(node))) and count > MAX_PUBLIC_PARAMETERS:
                problems.append(f"{where}:{node.name}: {count} parameters")
    return problems


def test_size_audit_finds_known_problems(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    long_body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES + 1))
    params = ", ".join(f"a{i}" for i in range(MAX_PUBLIC_PARAMETERS + 1))
    (package / "m.py").write_text(
        f"def long():\n{long_body}\n\n\ndef wide({params}):\n    pass\n\n\ndef _wide_private({params}):\n    pass\n"
        f"\n\nclass Wide:\n    def __init__(self, {params}):\n        pass\n"
        f"\n\nclass SharedChannelPatchEmbed:\n    def __init__(self, {params}):\n        pass\n"
    )
    assert size_problems(package) == [
        f"pkg/m.py:long: {MAX_FUNCTION_LINES + 2} lines",
        f"pkg/m.py:wide: {MAX_PUBLIC_PARAMETERS + 1} parameters",
        f"pkg/m.py:__init__: {MAX_PUBLIC_PARAMETERS + 1} parameters",
    ]


def test_modules_functions_and_signatures_stay_small():
    """The layout targets: no module over 600 lines, no function over 100 lines, no public
    function or ``__init__`` with more than 8 parameters (an options object built once from the
    config carries the rest), but for the timm interface of :data:`FOREIGN_SIGNATURES`."""
    assert size_problems() == []


def _defines(path: Path) -> set[str]:
    """The top-level names a module defines or imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name for a in node.names)
    return names


def _module_path(dotted: str) -> Path:
    return SRC.joinpath(*dotted.split(".")).with_suffix(".py")


def test_package_inits_hold_their_docstring_and_face():
    """A package's ``__init__`` holds its docstring and its face: ``__all__, __getattr__,
    __dir__ = lazy_face(__name__, {module: names})``, each name public and defined by the module
    named (a module of the package), loaded when first used (so a face imports no heavy library)."""
    offenders = []
    for name, folder in sorted(packages().items()):
        init = folder / "__init__.py"
        body = ast.parse(init.read_text()).body
        code = [n for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        call = face_call(init)
        faced = [n for n in code if not (isinstance(n, ast.ImportFrom) and [a.name for a in n.names] == ["lazy_face"])]
        if name == "phenoica" or call is None:
            offenders += [f"{init.relative_to(SRC)}: no face"] if name != "phenoica" else []
            continue
        if len(faced) != 1:
            offenders.append(f"{init.relative_to(SRC)}: holds more than its docstring and face")
        for public, module in face(name).items():
            path = _module_path(module)
            if not path.is_file() or public not in _defines(path):
                offenders.append(f"{init.relative_to(SRC)}: {module} defines no {public}")
            if public.startswith("_"):
                offenders.append(f"{init.relative_to(SRC)}: shows the private name {public}")
    assert not offenders, offenders


def test_modules_are_private_by_name():
    """Every module of a package is private by name (``_engine.py``), used through the face; a
    module with a name of its own is a command line (it runs under ``python -m``)."""
    public = [
        str(p.relative_to(SRC))
        for p in sorted((SRC / "phenoica").rglob("*.py"))
        if not p.name.startswith("_") and 'if __name__ == "__main__":' not in p.read_text()
    ]
    assert not public, public


#: Roles every stage or study has a module for, under the same name in each.
SHARED_ROLES = {"options", "data", "model", "report"}


def test_two_modules_that_differ_do_not_share_a_name():
    """Two modules of the library share a name only when each plays the same role in its own
    package (:data:`SHARED_ROLES`); no other module is named after a package."""
    stems: dict[str, list[str]] = {}
    for path in sorted((SRC / "phenoica").rglob("*.py")):
        if path.name != "__init__.py":
            stems.setdefault(path.stem.lstrip("_"), []).append(str(path.relative_to(SRC)))
    shared = {stem: paths for stem, paths in stems.items() if len(paths) > 1 and stem not in SHARED_ROLES}
    assert not shared, shared
    named_after = {p.rsplit(".", 1)[-1] for p in packages()} & (set(stems) - SHARED_ROLES)
    assert not named_after, named_after


def _imports(path: Path, text: str | None = None) -> list[ast.ImportFrom | ast.Import]:
    """The import statements of a Python file, or the import lines of a rules file or of a page's
    code examples (``text``: the file's text, read if None)."""
    text = path.read_text() if text is None else text
    if path.suffix != ".py":
        text = "\n".join(re.findall(r"^(?:from|import) phenoica[^\n(]*(?:\([^)]*\))?", text, re.M))
    return [n for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.Import, ast.ImportFrom))]


def face_problems(path: Path, text: str | None = None) -> list[str]:
    """Each import of ``path`` (its text: ``text``, read if None) that reaches into a package it
    is not inside, past the package's face."""
    here = package_of(".".join(path.parent.relative_to(SRC).parts)) if SRC in path.parents else None
    problems = []
    for node in _imports(path, text):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("phenoica.")]
            problems += [f"{path.relative_to(REPO)}: import {n}" for n in names if not _inside(here, package_of(n))]
            continue
        module = node.module or ""
        target = package_of(module) if module.startswith("phenoica.") else None
        if node.level or target is None or _inside(here, target):
            continue
        if module != target:
            problems.append(f"{path.relative_to(REPO)}: from {module} import ...")
        else:
            hidden = [a.name for a in node.names if a.name not in face(target)]
            problems += [f"{path.relative_to(REPO)}: {target} does not show {n}" for n in hidden]
    return problems


def _inside(here: str | None, package: str | None) -> bool:
    return here is not None and package is not None and (here == package or here.startswith(f"{package}."))


def _checked_files() -> list[Path]:
    return [
        *sorted((SRC / "phenoica").rglob("*.py")),
        *sorted((REPO / "scripts").glob("*.py")),
        *sorted((REPO / "benchmarks").glob("*.py")),
        *sorted((REPO / "rules").glob("*.smk")),
        REPO / "Snakefile",
        REPO / "README.md",
        *sorted((REPO / "docs").rglob("*.md")),
    ]


def test_the_face_check_finds_an_import_past_a_face():
    script = REPO / "scripts" / "splits.py"
    assert face_problems(script) == []
    assert face("phenoica.classify")["make_folds"] == "phenoica.classify._splits"
    fake = SRC / "phenoica" / "hits" / "x.py"
    assert [p.split(": ", 1)[1] for p in face_problems(fake, "from phenoica.classify._splits import make_folds")] == [
        "from phenoica.classify._splits import ..."
    ]
    assert face_problems(fake, "from phenoica.hits._calls import screen_calls") == []
    assert face_problems(fake, "from phenoica.classify import make_folds") == []
    assert [p.split(": ", 1)[1] for p in face_problems(fake, "from phenoica.classify import GuideBlock")] == [
        "phenoica.classify does not show GuideBlock"
    ]


def test_scripts_and_other_stages_import_a_package_through_its_face():
    """Outside a package, its names come from its face: ``from phenoica.classify import
    make_folds``, with ``make_folds`` in ``phenoica.classify.__all__``; no deeper path
    (``phenoica.classify._splits``) and no ``import phenoica.classify...``. Checked over the
    library, the rule scripts, the benchmarks, the rules files' imports and the docs' examples.

    - A package is any folder with an ``__init__.py``, so a subpackage (``screen.demo``,
      ``studies.bilipschitz``, ``studies.disentangle``) has a face of its own, which its parent
      uses as every other package does; a subpackage is inside its parent, so it may import its
      parent's private modules (as any module of a package imports its siblings by their paths).
    - The lowest floors, ``utils`` and ``contract``, are packages like the others: every stage
      imports them through their faces.
    - Tests may import private modules (unit tests of a package's own functions, monkeypatching).
    """
    problems = [p for path in _checked_files() for p in face_problems(path)]
    assert not problems, problems


def test_every_public_name_is_used_outside_its_package():
    """A face lists what scripts, other stages, benchmarks, rules or docs use: each public name
    is imported from outside its package (a docs example included) or named by the docs
    (``phenoica.<package>.<name>``)."""
    used: set[tuple[str, str]] = set()
    for path in _checked_files():
        here = package_of(".".join(path.parent.relative_to(SRC).parts)) if SRC in path.parents else None
        for node in _imports(path):
            if isinstance(node, ast.ImportFrom) and node.module in packages() and not _inside(here, node.module):
                used.update((node.module, a.name) for a in node.names)
    docs = "".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])
    named = set(re.findall(r"`(phenoica(?:\.\w+)+)", docs))
    unused = [
        f"{package}.{name}"
        for package in sorted(packages())
        for name in face(package)
        if (package, name) not in used
        and not any(n == f"{package}.{name}" or n.startswith(f"{package}.{name}.") for n in named)
    ]
    assert not unused, unused


def test_each_rules_file_is_named_for_its_stage():
    """A rules file is a stage of the output table (its ``PATHS`` key) or one of its studies."""
    from phenoica.contract import OUTPUTS

    stems = {p.stem for p in (REPO / "rules").glob("*.smk")} - {"common"}
    studies = {name for name, template in OUTPUTS["studies"].items() if template == f"studies/{name}"}
    assert stems - set(OUTPUTS) == studies
    assert set(OUTPUTS) - stems == {"studies"}  # every stage has its rules file


def built_paths(text: str) -> list[str]:
    """The f-strings of a rules file that build a path (a ``/`` and no space: not a message) in
    place of taking it from ``PATHS``; a path below a folder of the user's (``config[...]``) is
    not the workflow's to declare."""
    strings = re.findall(r"""\bf(["'])(\S*?)\1""", text)
    return [s for _, s in strings if "/" in s and "config[" not in s]


def test_the_built_path_check_finds_an_f_string_path():
    assert built_paths('    output:\n        f"{BL_DIR}/runs/{{dataset}}/alpha{{alpha}}.parquet",\n') == [
        "{BL_DIR}/runs/{{dataset}}/alpha{{alpha}}.parquet"
    ]
    assert built_paths("x = [f'{DIR}/{ds}/models.parquet' for ds in DS]") == ["{DIR}/{ds}/models.parquet"]
    assert built_paths("hcs=f\"{config['screen']['dir']}/{{plate}}.zarr\"\nprint(f\"done: {PATHS.report.html}\")") == []


def test_rules_take_every_results_path_from_the_output_table():
    """Every path the rules write or read below the results folder comes from ``PATHS``
    (``phenoica.contract.OUTPUTS``), declared there once; no rules file spells one out."""
    found = {
        str(p.relative_to(REPO)): built_paths(p.read_text())
        for p in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]
    }
    assert {path: strings for path, strings in found.items() if strings} == {}
