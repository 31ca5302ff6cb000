"""The workflow configuration's schema (``phenoica/schemas/config.schema.yaml``), the one
description of every key's type and default: read it (strictly), the names a key allows, and
what an entry accepts in words. The configuration reference is generated from it
(:mod:`phenoica.workflow.config_reference`).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from phenoica.contract._errors import ConfigError

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "config.schema.yaml"


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader (no python tags), but a key given twice in one mapping is an error:
    PyYAML keeps the last value and silently drops the first (a second ``classify:`` block
    would replace the first). Keys merged in with ``<<: *anchor`` may be overridden, as YAML
    intends."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.setdefault(key, line)
            except TypeError:  # an unhashable key: PyYAML's own error says so
                break
            if first != line:
                raise ConfigError(
                    f"{key_node.start_mark.name}: key {key!r} appears twice in one mapping, at line {first} and "
                    f"line {line}; expected each key once (the second would silently replace the first)"
                )
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path | str) -> Any:
    """A YAML file read safely and strictly: no python tags (PyYAML's safe loader), and a key
    given twice in one mapping is a ConfigError naming the file, the key and both lines. Every
    YAML file phenoica reads (config files, scenario configs, the files Snakemake was given
    with ``configfile`` / ``--configfile``) is read through it."""
    text = Path(path).read_text(encoding="utf-8")
    loader = _StrictLoader(text)
    loader.name = str(path)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_aliases(node, str(path))
        return loader.construct_document(node)
    finally:
        loader.dispose()


def check_aliases(root: yaml.Node, source: str) -> None:
    """Each YAML alias is expanded at most once: a ConfigError naming ``source`` and the line
    when a node that aliases refer to holds an alias itself (nested aliases multiply: nine
    levels of nine make a billion nodes out of a few lines, the "billion laughs"). The composed
    document shares an aliased node, so this walk visits each node once."""
    seen: set[int] = set()
    shared: dict[int, yaml.Node] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            shared[id(node)] = node
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack += node.value
        elif isinstance(node, yaml.MappingNode):
            stack += [n for pair in node.value for n in pair]
    for node in shared.values():
        inner = [n for n in _children(node) if id(n) in shared]
        if inner:
            raise ConfigError(
                f"{source}: line {node.start_mark.line + 1}: an aliased node holds another alias (line "
                f"{inner[0].start_mark.line + 1}); aliases are expanded at most once (nested ones multiply the "
                "document's size: an alias bomb). Write the values out, or alias only nodes without aliases"
            )


def _children(node: yaml.Node) -> list[yaml.Node]:
    """Every node below ``node`` (each once)."""
    out: list[yaml.Node] = []
    seen: set[int] = set()
    stack = [node]
    while stack:
        cur = stack.pop()
        kids = (
            cur.value
            if isinstance(cur, yaml.SequenceNode)
            else ([n for pair in cur.value for n in pair] if isinstance(cur, yaml.MappingNode) else [])
        )
        for kid in kids:
            if id(kid) not in seen:
                seen.add(id(kid))
                out.append(kid)
                stack.append(kid)
    return out


def check_yaml_files(paths: Iterable[Path | str]) -> None:
    """Read each YAML config file strictly (:func:`read_yaml`); Snakemake's own reader keeps the
    last of two equal keys without a word, so the workflow checks the files it was given."""
    for path in paths:
        read_yaml(path)


def load_schema(path: Path | str = SCHEMA_PATH) -> dict[str, Any]:
    """Read the JSON schema (YAML-encoded) of the workflow configuration."""
    return read_yaml(path)


@functools.lru_cache(maxsize=1)
def package_schema() -> dict[str, Any]:
    """The package's schema, read once per process (do not modify it)."""
    return load_schema()


def schema_enum(dotted: str) -> tuple[str, ...]:
    """The names the schema allows for the key ``dotted`` (e.g. ``transforms.variants``: its
    items' enum): the one list a wildcard pattern, a report order or a caption is built from."""
    node: Mapping[str, Any] = package_schema()
    for part in dotted.split("."):
        node = node["properties"][part]
    names = node.get("enum") or (node.get("items") or {}).get("enum")
    if not names:
        raise KeyError(f"config key {dotted!r} has no enum in the schema")
    return tuple(names)


def describe_schema(schema: Mapping[str, Any]) -> str:
    """What a config schema entry accepts, in words (for error messages)."""
    if "enum" in schema:
        return f"one of {schema['enum']}"
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    if "array" in types:
        allowed = (schema.get("items") or {}).get("enum")
        return f"a list of distinct values from {allowed}" if allowed else "a list"
    words = []
    for kind in types:
        if kind in ("integer", "number"):
            word = "an integer" if kind == "integer" else "a number"
            if "minimum" in schema:
                word += f" >= {schema['minimum']}"
            elif "exclusiveMinimum" in schema:
                word += f" > {schema['exclusiveMinimum']}"
            words.append(word)
        elif kind == "boolean":
            words.append("true or false")
        elif kind == "string":
            words.append("a string")
        elif kind == "null":
            words.append("null")
        elif kind == "object":
            words.append("a mapping")
    return " or ".join(words) or "a value the schema accepts"
