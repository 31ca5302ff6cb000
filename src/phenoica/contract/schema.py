"""The workflow configuration's schema (``phenoica/schemas/config.schema.yaml``), the one
description of every key: read it (strictly), the names a key allows, what each key reaches (its
``x-jobs`` / ``x-run-time`` annotations), and the configuration reference generated from it
(``python -m phenoica.contract.schema`` prints it).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from phenoica.contract.values import ConfigError

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
        return loader.get_single_data()
    finally:
        loader.dispose()


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


#: The schema's annotations of what each key reaches (the one declaration of a key's effect):
#: ``x-jobs: [rule, ...]`` on a section (its keys' default) or on a key, the rules whose output
#: depends on the key; ``x-run-time: speed`` (speed, memory, storage layout or logs only) or
#: ``x-run-time: screen-size`` (which jobs exist, not what one computes), never a param;
#: ``x-speed-only-keys`` on an open mapping (LightGBM's parameters), its speed-only keys.
RUN_TIME_KINDS: tuple[str, ...] = ("speed", "screen-size")


def _annotated_keys(schema: Mapping[str, Any], prefix: str) -> Iterable[tuple[str, Mapping[str, Any]]]:
    for key, sub in (schema.get("properties") or {}).items():
        dotted = f"{prefix}.{key}" if prefix else key
        yield dotted, sub
        yield from _annotated_keys(sub, dotted)
        for extra in sub.get("x-speed-only-keys", ()):
            yield f"{dotted}.{extra}", {"x-run-time": "speed"}


def run_time_keys(kind: str, schema: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """Dotted config keys the schema marks ``x-run-time: kind`` (``speed`` or ``screen-size``):
    never a job's params, so changing one plans no job; scripts read them at run time, with
    the rest of their rule's keys (:func:`phenoica.workflow.params.rule_settings`). Speed-only keys change at most the order of floating-point sums."""
    if kind not in RUN_TIME_KINDS:
        raise ValueError(f"unknown run-time kind {kind!r}; expected one of {list(RUN_TIME_KINDS)}")
    schema = schema if schema is not None else package_schema()
    return tuple(k for k, sub in _annotated_keys(schema, "") if sub.get("x-run-time") == kind)


def key_jobs(schema: Mapping[str, Any] | None = None) -> dict[str, tuple[str, ...]]:
    """Dotted config key -> the rules whose output it changes (its own ``x-jobs``, else its
    section's), for every key the schema annotates; run-time keys reach none."""
    schema = schema if schema is not None else package_schema()
    out: dict[str, tuple[str, ...]] = {}

    def walk(node: Mapping[str, Any], prefix: str, inherited: tuple[str, ...]) -> None:
        for key, sub in (node.get("properties") or {}).items():
            dotted = f"{prefix}.{key}" if prefix else key
            jobs = () if sub.get("x-run-time") else tuple(sub.get("x-jobs", inherited))
            if "x-jobs" in sub or "x-run-time" in sub or inherited:
                out[dotted] = jobs
            walk(sub, dotted, jobs)

    walk(schema, "", ())
    return out


def config_reference(schema: Mapping[str, Any] | None = None) -> str:
    """Every config key as a Markdown table (key, default, meaning), generated from the schema.

    The README embeds this table; a test keeps the two identical. ``python -m phenoica.contract.config``
    prints it.
    """
    schema = schema if schema is not None else load_schema()
    rows = ["| key | default | reruns | meaning |", "|---|---|---|---|"]
    reaches = key_jobs(schema)

    def reruns(path: str, sub: Mapping[str, Any]) -> str:
        kind = sub.get("x-run-time")
        if kind:
            return {"speed": "nothing (speed only)", "screen-size": "nothing (which plates exist)"}[kind]
        if path not in reaches:
            return ""
        return ", ".join(f"`{job}`" for job in reaches[path]) or "nothing (which jobs run)"

    def resolve(sub: Any) -> Any:
        if isinstance(sub, Mapping) and "$ref" in sub:
            return schema["$defs"][sub["$ref"].rsplit("/", 1)[-1]]
        return sub

    def fmt(value: Any) -> str:
        return "`" + (json_default(value)) + "`"

    def walk(props: Mapping[str, Any], prefix: str) -> None:
        for key, sub in props.items():
            path = f"{prefix}{key}"
            extra = resolve(sub.get("additionalProperties"))
            if sub.get("type") == "object" and "properties" in sub and key != "lightgbm":
                walk(sub["properties"], path + ".")
            elif isinstance(extra, dict) and "properties" in extra:
                walk(extra["properties"], path + ".NAME.")
            else:
                text = " ".join(str(sub.get("description", "")).split()).replace("|", "/")
                allowed = sub.get("enum") or (sub.get("items") or {}).get("enum")
                if allowed:
                    text = (text + " " if text else "") + "One of: " + ", ".join(map(str, allowed)) + "."
                rows.append(f"| `{path}` | {fmt(sub.get('default'))} | {reruns(path, sub)} | {text} |")

    walk(schema["properties"], "")
    return "\n".join(rows) + "\n"


def json_default(value: Any) -> str:
    """A default value as it would be written in config.yaml (JSON-style, compact)."""
    import json

    return json.dumps(value)


if __name__ == "__main__":
    print(config_reference(), end="")
