"""The configuration reference (docs/configuration.md's table): every key of the schema with its
default, what a change of it reruns, and its meaning. ``python -m phenoica.workflow.config_reference``
prints it; a test keeps the page equal to it.

The *reruns* column is read from the stages' options (:mod:`phenoica.contract._stage_options`): the
rules whose options read a key (or a mapping holding it) as a param. A key read only at run time
reruns nothing; a key no stage's options read is read when the DAG is built or by the check at
the door, through the files it names.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from typing import Any, Mapping

from phenoica.contract import RULE_OPTIONS, load_schema, settings_of


def load_stage_options() -> dict[str, type]:
    """Import every stage's options module (``phenoica.<stage>._options``) and return which
    options class each rule takes (:data:`phenoica.contract.RULE_OPTIONS`)."""
    import phenoica

    for info in pkgutil.walk_packages(phenoica.__path__, "phenoica."):
        if info.name.rsplit(".", 1)[-1] == "_options":
            importlib.import_module(info.name)
    return dict(RULE_OPTIONS)


def key_rules() -> dict[str, tuple[tuple[str, ...], bool]]:
    """Dotted config key (``models.{model}`` as ``models.NAME``) -> (the rules whose options read
    it as a param, whether the key is read whole: not through a function of it), for every key
    some stage's options read; a key read at run time only has no rules."""
    out: dict[str, tuple[list[str], bool]] = {}
    for rule, cls in sorted(load_stage_options().items()):
        for setting in settings_of(cls).values():
            key = setting.key.replace("{model}", "NAME")
            rules, whole = out.setdefault(key, ([], True))
            if not setting.run_time and rule not in rules:
                rules.append(rule)
            out[key] = (rules, whole and setting.read is None)
    return {key: (tuple(rules), whole) for key, (rules, whole) in out.items()}


def _reruns(path: str, reads: Mapping[str, tuple[tuple[str, ...], bool]]) -> str:
    """The reruns cell of key ``path``: the rules reading it, or a mapping above it read whole."""
    parts = path.split(".")
    rules: list[str] = []
    read = False
    for i in range(len(parts), 0, -1):
        key = ".".join(parts[:i])
        if key in reads and (i == len(parts) or reads[key][1]):
            read = True
            rules += [r for r in reads[key][0] if r not in rules]
    if not read:
        return ""
    return ", ".join(f"`{rule}`" for rule in rules) or "nothing (run time)"


def _enum_name(value: Any) -> str:
    """One allowed value as the reference's table cell shows it: null for None, a string that
    does not print as itself (a tab) in JSON's quotes, a pipe escaped (it would end the cell)."""
    if value is None:
        return "null"
    text = str(value)
    if not text.isprintable() or text != text.strip() or not text:
        text = json.dumps(text)
    return text.replace("|", "\\|")


def config_reference(schema: Mapping[str, Any] | None = None) -> str:
    """Every config key as a Markdown table (key, default, reruns, meaning), from the schema and
    the stages' options."""
    schema = schema if schema is not None else load_schema()
    reads = key_rules()
    rows = ["| key | default | reruns | meaning |", "|---|---|---|---|"]

    def resolve(sub: Any) -> Any:
        if isinstance(sub, Mapping) and "$ref" in sub:
            return schema["$defs"][sub["$ref"].rsplit("/", 1)[-1]]
        return sub

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
                    names = (_enum_name(a) for a in allowed)
                    text = (text + " " if text else "") + "One of: " + ", ".join(names) + "."
                default = "`" + json.dumps(sub.get("default")) + "`"
                rows.append(f"| `{path}` | {default} | {_reruns(path, reads)} | {text} |")

    walk(schema["properties"], "")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(config_reference(), end="")
