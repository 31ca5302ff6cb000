"""The library's layout: data flows one way, so no module imports one that imports it back and
no package imports one above it."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

SRC = REPO / "src"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def import_graph(root: Path = SRC / "phenoica") -> dict[str, set[str]]:
    """Module -> the phenoica modules it imports, module-level and inside functions alike."""
    modules = {_module_name(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("phenoica"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    graph[name].add(sub if sub in modules else node.module)
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
    ("identifiability",),
    ("classify", "biomap"),
    ("hits",),
    ("report", "sweep"),
    ("studies", "workflow"),
)


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else None  # phenoica.<package>.<module>; top-level modules have none


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


def size_problems(root: Path = SRC / "phenoica") -> list[str]:
    """Modules over MAX_MODULE_LINES lines, functions over MAX_FUNCTION_LINES lines and public
    functions with more than MAX_PUBLIC_PARAMETERS parameters (self / cls not counted)."""
    problems: list[str] = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        where = str(path.relative_to(root.parent))
        if len(text.splitlines()) > MAX_MODULE_LINES:
            problems.append(f"{where}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                problems.append(f"{where}:{node.name}: {length} lines")
            args = node.args
            names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
            count = len([n for n in names if n not in ("self", "cls")])
            if not node.name.startswith("_") and count > MAX_PUBLIC_PARAMETERS:
                problems.append(f"{where}:{node.name}: {count} parameters")
    return problems


def test_size_audit_finds_known_problems(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    long_body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES + 1))
    params = ", ".join(f"a{i}" for i in range(MAX_PUBLIC_PARAMETERS + 1))
    (package / "m.py").write_text(
        f"def long():\n{long_body}\n\n\ndef wide({params}):\n    pass\n\n\ndef _wide_private({params}):\n    pass\n"
    )
    assert size_problems(package) == [
        f"pkg/m.py:long: {MAX_FUNCTION_LINES + 2} lines",
        f"pkg/m.py:wide: {MAX_PUBLIC_PARAMETERS + 1} parameters",
    ]


def test_modules_functions_and_signatures_stay_small():
    """The layout targets: no module over 600 lines, no function over 100 lines, no public
    function with more than 8 parameters (an options object built once from the config carries
    the rest)."""
    assert size_problems() == []


def _public_modules(init: Path) -> list[str] | None:
    """The ``__all__`` of a package's ``__init__.py`` (a list of its public modules), None without one."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            return list(ast.literal_eval(node.value))
    return None


def test_package_inits_hold_their_docstring_and_public_modules():
    """Every import names the module that holds the function: no package re-exports names. A
    stage package's ``__init__`` holds its docstring and ``__all__``, the modules that are its
    public API, each a module of the package."""
    offenders = []
    for init in sorted((SRC / "phenoica").rglob("__init__.py")):
        body = ast.parse(init.read_text()).body
        code = [
            n
            for n in body
            if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
            and not (isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["__all__"])
        ]
        if init.parent.name != "phenoica" and code:
            offenders.append(str(init.relative_to(SRC)))
        public = _public_modules(init)
        if public is not None:
            absent = [m for m in public if not (init.parent / f"{m}.py").exists() and not (init.parent / m).is_dir()]
            offenders += [f"{init.relative_to(SRC)}: __all__ names {m}, no module of the package" for m in absent]
    assert not offenders, offenders


def test_scripts_and_other_stages_use_a_stage_through_its_public_modules():
    """The scripts and the other stages import a stage package's modules only among its
    ``__all__``: the rest is the stage's own."""
    stages = {
        init.parent.name: _public_modules(init)
        for init in (SRC / "phenoica").glob("*/__init__.py")
        if _public_modules(init) is not None
    }
    assert len(stages) >= 10, sorted(stages)
    wrong = []
    files = sorted((REPO / "scripts").glob("*.py")) + sorted((SRC / "phenoica").rglob("*.py"))
    for path in files:
        own = path.relative_to(SRC / "phenoica").parts[0] if SRC in path.parents else None
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("phenoica."):
                parts = node.module.split(".")
                if len(parts) >= 3 and parts[1] in stages and parts[1] != own and parts[2] not in stages[parts[1]]:
                    wrong.append(f"{path.relative_to(REPO)} imports {node.module}")
    assert not wrong, wrong


def test_each_rules_file_is_named_for_its_stage():
    """A rules file is a stage of the output table (its ``PATHS`` key) or one of its studies."""
    from phenoica.contract.paths import OUTPUTS

    stems = {p.stem for p in (REPO / "rules").glob("*.smk")} - {"common"}
    studies = {name for name in OUTPUTS["studies"] if "{" not in OUTPUTS["studies"][name]}
    assert stems - set(OUTPUTS) == studies
    assert set(OUTPUTS) - stems == {"studies"}  # every stage has its rules file
