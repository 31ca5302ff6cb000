"""docs/architecture.md describes the code as it is: every module, class, function, file and
config key the page names exists, its rule table names every rule of ``rules/``, and each
route of a setting it states is the one the code takes (walked from the options objects)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path
from typing import get_type_hints

import pytest

from phenoica.contract import load_schema, settings_of
from phenoica.workflow.config_reference import load_stage_options
from tests.conftest import REPO
from tests.faces import face

PAGE = REPO / "docs" / "architecture.md"
SRC = REPO / "src"
#: Folders of the repository a path on the page may start with.
TOP = ("rules/", "scripts/", "src/", "tests/", "benchmarks/", "config/", "docs/", "envs/", "profiles/")
#: What every options class has beside its own members (:func:`phenoica.contract._stage_options.stage_options`, NamedTuple).
NAMED_TUPLE_MEMBERS = ("from_config", "_replace", "_fields")
#: The rule files of the studies, beside the screen's workflow.
STUDY_RULES = ("bilipschitz.smk", "disentangle.smk")


def page_spans(text: str) -> list[str]:
    """The inline code spans of a Markdown page, fenced blocks left out."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.findall(r"`([^`\n]+)`", prose)


@cache
def module_names(path: Path) -> dict[str, set[str]]:
    """What a Python file defines: ``""`` -> its top-level names (functions, classes,
    assignments, imports), and each class -> its members (methods, fields, attributes)."""
    tree = ast.parse(path.read_text())
    out: dict[str, set[str]] = {"": set()}

    def targets(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Assign):
            return [t.id for t in node.targets if isinstance(t, ast.Name)]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            return [node.target.id]
        return []

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[""].add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out[""].update((a.asname or a.name).split(".")[0] for a in node.names)
        out[""].update(targets(node))
        if isinstance(node, ast.ClassDef):
            members = out.setdefault(node.name, set())
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    members.add(item.name)
                members.update(targets(item))
    return out


def module_file(dotted: str) -> Path | None:
    """The source file of module ``phenoica.x.y`` (a package's ``__init__.py``), None if none."""
    base = SRC.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def defined_anywhere() -> dict[str, set[str]]:
    """Every name defined in the library (top level or in a class) and in the rule files' top
    level -> the classes it is a member of (``""``: top level)."""
    out: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        for owner, names in module_names(path).items():
            for name in names:
                out.setdefault(name, set()).add(owner)
    for path in (REPO / "rules").glob("*.smk"):
        for name in re.findall(r"^([A-Z_][A-Z0-9_]*)\s*=", path.read_text(), re.M):
            out.setdefault(name, set()).add("")
    return out


def python_path_problem(span: str) -> str | None:
    """Why ``phenoica.a.b.Name.member`` (call parentheses allowed) names nothing; None if it resolves."""
    parts = re.sub(r"\(.*", "", span).split(".")
    for cut in range(len(parts), 0, -1):
        path = module_file(".".join(parts[:cut]))
        if path is not None:
            break
    else:
        return f"{span}: no module"
    rest = parts[cut:]
    if not rest:
        return None
    home = face(".".join(parts[:cut])).get(rest[0]) if path.name == "__init__.py" else None
    if home is not None:  # a name of the package's face: read where its module defines it
        path = module_file(home)
    names = module_names(path)
    if rest[0] not in names[""] and module_file(".".join(parts[: cut + 1])) is None:
        return f"{span}: {'.'.join(parts[:cut])} defines no {rest[0]}"
    if len(rest) > 1 and rest[1] not in names.get(rest[0], set()):
        return f"{span}: {rest[0]} has no member {rest[1]}"
    return None


def schema_key_problem(key: str, schema: dict) -> str | None:
    """Why dotted config key ``key`` is not a key of the schema; None if it is (a key below a
    mapping the schema leaves open, such as ``classify.lightgbm``, is one)."""
    node = schema
    for part in key.split("."):
        props = node.get("properties", {})
        if part in props:
            node = props[part]
            ref = node.get("$ref") or (node.get("additionalProperties") or {}).get("$ref")
            if ref and "properties" not in node:
                node = schema["$defs"][ref.rsplit("/", 1)[-1]]
            continue
        if node.get("additionalProperties") not in (None, False) or node.get("type") == "object" and not props:
            return None
        return f"{key}: no key {part!r} in the schema"
    return None


def repo_path_problem(span: str) -> str | None:
    """Why a path the page names is not in the repository; None if it is (templates and globs pass)."""
    if any(c in span for c in "{*<") or " " in span:
        return None
    path = span.rstrip("/")
    if span.endswith(".smk") and "/" not in span:
        path = f"rules/{span}"
    elif not span.startswith(TOP) and not (REPO / path).exists():  # a library file: classify/_options.py
        path = f"src/phenoica/{path}"
    return None if (REPO / path).exists() else f"{span}: no such file or folder"


def span_problems(spans: list[str]) -> list[str]:
    """Every span that names a module, class, function, file, rule or config key that does not exist."""
    schema = load_schema()
    defined = defined_anywhere()
    problems = []
    for span in spans:
        word = re.sub(r"\(.*\)$", "", span)
        if span.startswith("phenoica.") and "*" not in span:
            problems.append(python_path_problem(span))
        elif span.startswith("x-"):
            problems.append(f"{span}: no such annotation in the schema" if span not in str(schema) else None)
        elif span.startswith(TOP) or re.fullmatch(r"[\w.-]+\.smk|[\w.-]+/[\w/.-]+\.(py|smk|yaml|md)", span):
            problems.append(repo_path_problem(span))
        elif re.fullmatch(r"[a-z_]+(\.[a-z_0-9]+)+", span) and span.split(".")[0] in schema["properties"]:
            as_module = python_path_problem(f"phenoica.{span}")  # a stage's package shares its section's name
            problems.append(schema_key_problem(span, schema) if as_module else None)
        elif re.fullmatch(r"[A-Z]\w*[a-z]\w*(\.\w+)?", word):  # a class, or a class's member
            owner, _, member = word.partition(".")
            if owner not in defined:
                problems.append(f"{span}: no class {owner} in the library")
            elif member and member not in NAMED_TUPLE_MEMBERS and owner not in defined.get(member, set()):
                problems.append(f"{span}: {owner} has no member {member}")
        elif re.fullmatch(r"[A-Z][A-Z0-9_]+", word) or (word != span and re.fullmatch(r"[a-z_]\w*", word)):
            problems.append(None if word in defined else f"{span}: defined nowhere in the library or the rules")
    return [p for p in problems if p]


def test_the_checks_find_names_that_do_not_exist():
    assert span_problems(["SplitsOptions", "x-jobs", "phenoica.classify._options.SplitsOptions"]) == [
        "SplitsOptions: no class SplitsOptions in the library",
        "x-jobs: no such annotation in the schema",
        "phenoica.classify._options.SplitsOptions: phenoica.classify._options defines no SplitsOptions",
    ]
    assert span_problems(["classify.num_boost_rounds", "rules/nothing.smk", "SplitOptions.scheme_of"]) == [
        "classify.num_boost_rounds: no key 'num_boost_rounds' in the schema",
        "rules/nothing.smk: no such file or folder",
        "SplitOptions.scheme_of: SplitOptions has no member scheme_of",
    ]
    fine = ["SplitOptions.depends_on", "classify.lightgbm.num_threads", "phenoica.contract._paths", "PATHS"]
    assert span_problems(fine + ["validate_config()", "transforms/_fit.py", "classify.smk", "models.NAME.pool"]) == []


def test_every_name_on_the_page_exists():
    assert span_problems(page_spans(PAGE.read_text())) == []


# --------------------------------------------------------------------------- the rule table


def rule_blocks(path: Path) -> list[tuple[str, str]]:
    """(rule name, the rule's text) of every rule of a rule file; an anonymous rule (``rule:``
    with ``name:``) is named by its log's rule name."""
    text = path.read_text()
    heads = list(re.finditer(r"^\s*rule(?: (\w+))?:", text, re.M))
    out = []
    for i, head in enumerate(heads):
        block = text[head.start() : heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        name = head.group(1) or re.search(r'log_path\(RESULTS, "(\w+)"', block).group(1)
        out.append((name, block))
    return out


def table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of the rows of the Markdown table whose header row starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_rule_table_names_every_rule_and_its_options():
    """Every rule of the screen's rule files is in the rule table, every rule in the table
    exists, and a rule whose params are an options object is listed with that class."""
    rules = {
        name: block
        for path in sorted((REPO / "rules").glob("*.smk"))
        if path.name not in STUDY_RULES
        for name, block in rule_blocks(path)
    }
    listed = {}
    for cells in table_rows(PAGE.read_text(), "| rule |"):
        for name in re.findall(r"`(\w+)`", cells[0]):
            listed[name] = " | ".join(cells[1:])
    assert set(listed) == set(rules)
    for rule, cls in load_stage_options().items():
        if rule in listed:
            assert f"{cls.__name__}" in listed[rule], f"rule {rule}: its options {cls.__name__} not in its row"
            assert f"{cls.__name__}.from_config" in "".join(p.read_text() for p in (REPO / "rules").glob("*.smk")), rule


# --------------------------------------------------------------------------- the routes of settings

#: The files every setting passes before its stage: where it is stated and where the config is validated.
STATED = [
    "config.yaml",
    "src/phenoica/schemas/config.schema.yaml",
    "rules/common.smk",
    "src/phenoica/contract/_config.py",
]


def parse_route(cell: str) -> list[tuple[str, list[str]]]:
    """A route cell, ``path (names) -> path (names) -> ...``, as (repository path, names); a
    path outside the repository's top folders is one of the library's (``classify/_options.py``)."""
    hops = []
    for hop in cell.split(" -> "):
        path, *names = re.findall(r"`([^`]+)`", hop)
        if not path.startswith(TOP) and not (REPO / path).is_file():
            path = f"src/phenoica/{path}"
        hops.append((path, names))
    return hops


def options_modules(cls: type, field: list[str]) -> list[str]:
    """The files of the options classes a field is read through: ``cls``'s, then each held class's
    (a composed field, ``classify.num_boost_round``)."""
    modules = [cls.__module__]
    for part in field[:-1]:
        cls = get_type_hints(cls, include_extras=True)[part].__origin__
        modules.append(cls.__module__)
    return ["src/" + m.replace(".", "/") + ".py" for m in modules]


def names_defined(path: str, names: list[str]) -> list[str]:
    """The names a route hop gives that its file does not hold: a Python module defines them
    (``Class.member`` in its class), another file mentions them."""
    file = REPO / path
    missing = []
    for name in names:
        if path.startswith("src/") and path.endswith(".py"):
            owner, _, member = name.partition(".")
            found = module_names(file)
            ok = owner in found[""] and (not member or member in found.get(owner, set()))
        else:
            ok = re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", file.read_text()) is not None
        if not ok:
            missing.append(f"{path} has no {name}")
    return missing


def route_problems(key: str, rule: str, hops: list[tuple[str, list[str]]]) -> list[str]:
    """Why a stated route of config key ``key`` through rule ``rule`` is not the code's: it starts
    where the key is stated and validated; the rule's file builds the rule's options; the options
    classes that read the key (walked from ``settings_of``) come before the rule's script; every
    name a hop gives is in its file; each library name after the script is named by a file
    before it; and a library file after the script reads the field."""
    paths = [p for p, _ in hops]
    if paths[:4] != STATED:
        return [f"{key}: a route starts at {STATED}, not {paths[:4]}"]
    cls = load_stage_options()[rule]
    fields = [name.split(".") for name, s in settings_of(cls).items() if s.key == key]
    if not fields:
        return [f"{key}: {cls.__name__}, rule {rule}'s options, does not read it"]
    problems = []
    blocks = dict(rule_blocks(REPO / paths[4])) if paths[4].startswith("rules/") else {}
    if f"{cls.__name__}.from_config" not in blocks.get(rule, ""):
        problems.append(f"{key}: {paths[4]} has no rule {rule} taking {cls.__name__}")
    script = next((p for p in paths if p.startswith("scripts/")), "")
    if not script or f'"../{script}"' not in blocks.get(rule, ""):
        problems.append(f"{key}: rule {rule}'s script is not {script or 'on the route'}")
        return problems
    at = paths.index(script)
    for path in options_modules(cls, fields[0]) + ["src/phenoica/contract/_stage_options.py"]:
        if path not in paths[5:at]:
            problems.append(f"{key}: {path}, where its options are read, is not between the rule and the script")
    for path, names in hops[1:]:
        problems += [f"{key}: {m}" for m in names_defined(path, names)]
    for i in range(at + 1, len(hops)):  # the first name of a hop is called from a file before it
        first = hops[i][1][0].split(".")[-1] if hops[i][1] else ""
        if not re.search(rf"\b{first}\b", " ".join((REPO / p).read_text() for p in paths[at:i])):
            problems.append(f"{key}: {hops[i][0]}'s {first or 'entry'} is named by no file before it")
    if not any(f".{fields[0][-1]}" in (REPO / p).read_text() for p in paths[at + 1 :]):
        problems.append(f"{key}: no library file after {script} reads the field .{fields[0][-1]}")
    return problems


def route_counts(paths: list[str]) -> tuple[int, int]:
    """(files passed in order, a file counted again each time the route comes back to it; the
    times it comes back to a file it left)."""
    return len(paths), sum(1 for i, p in enumerate(paths) if p in paths[:i])


def test_the_routes_of_settings_are_the_ones_the_code_takes():
    rows = table_rows(PAGE.read_text(), "| setting |")
    assert len(rows) >= 3
    for key, rule, cell, files, returns in rows:
        hops = parse_route(cell)
        assert route_problems(key.strip("`"), rule.strip("`"), hops) == [], key
        assert (int(files), int(returns)) == route_counts([p for p, _ in hops]), key


ROUTE = (
    "`config.yaml` -> `schemas/config.schema.yaml` (`num_boost_round`) -> `rules/common.smk` (`validate_config`) -> "
    "`contract/_config.py` (`validate_config`) -> `rules/classify.smk` (`ClassifyOptions`) -> "
    "`classify/_options.py` (`ClassifyOptions.num_boost_round`) -> `contract/_stage_options.py` (`stage_options`) -> "
    "`scripts/classify.py` (`classify_shard`) -> `classify/_engine.py` (`classify_shard`, `_score_plan`)"
)


@pytest.mark.parametrize(
    "right, wrong",
    [
        ("", ""),
        ("rules/classify.smk", "rules/hits.smk"),
        ("classify/_options.py", "hits/_options.py"),
        ("scripts/classify.py", "scripts/call_hits.py"),
        ("`_score_plan`", "`_score_plans`"),
        (" -> `contract/_stage_options.py` (`stage_options`)", ""),
    ],
)
def test_a_route_that_is_not_the_codes_is_found(right, wrong):
    problems = route_problems("classify.num_boost_round", "classify", parse_route(ROUTE.replace(right, wrong)))
    assert bool(problems) == bool(right), problems
