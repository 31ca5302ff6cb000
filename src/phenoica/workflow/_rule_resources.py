"""Threads and cluster resources of each rule, from the config's ``resources`` section.

``resources.<rule>`` overrides ``resources.default`` key by key (a null or 0 keeps the default);
the names returned are those the SLURM executor plugin turns into ``--mem``, ``--time``,
``--partition`` and ``--gpus`` (``mem_mb``, ``runtime`` in minutes, ``slurm_partition``, ``gpu``
and ``gpu_model``).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from phenoica.contract import ConfigError


def rule_threads(resources: Mapping[str, Any], rule: str, fallback: int) -> int:
    """Threads of ``rule``: ``resources.<rule>.cpus``, else ``resources.default.cpus``, else ``fallback``."""
    return (resources.get(rule) or {}).get("cpus") or resources["default"]["cpus"] or fallback


def rule_resources(resources: Mapping[str, Any], rule: str) -> dict[str, Any]:
    """The Snakemake resources of ``rule`` (memory, runtime, partition, GPUs) over the defaults."""
    merged = dict(resources["default"])
    merged.update({k: v for k, v in (resources.get(rule) or {}).items() if v not in (None, 0)})
    out = {k: merged[k] for k in ("mem_mb", "runtime") if merged.get(k)}
    if merged.get("partition"):
        out["slurm_partition"] = merged["partition"]
    if merged.get("gpus"):
        out["gpu"] = merged["gpus"]
        if merged.get("gpu_model"):
            out["gpu_model"] = merged["gpu_model"]
    return out


def resource_rules(rules_dir: Path | str) -> set[str]:
    """The rules of the workflow's ``rules/*.smk`` files that take resources (each calls
    ``rule_resources(RESOURCES, "<rule>")``), those of every screen source included."""
    pattern = re.compile(r'rule_resources\(RESOURCES, "(\w+)"\)')
    return {name for path in sorted(Path(rules_dir).glob("*.smk")) for name in pattern.findall(path.read_text())}


def check_resource_rules(resources: Mapping[str, Any], rules: Iterable[str]) -> None:
    """Every name under ``resources`` is ``default`` or one of ``rules`` (the workflow's:
    :func:`resource_rules`): a misspelt rule would silently fall back to ``default``.
    ConfigError naming it, with the closest rule."""
    known = sorted(rules)
    unknown = [name for name in resources if name != "default" and name not in known]
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hints.append(f"resources.{name}" + (f" (did you mean {close[0]}?)" if close else ""))
        raise ConfigError(
            f"invalid configuration: {', '.join(hints)}: no rule of that name; resources takes default "
            f"or a rule: {', '.join(known)}"
        )
