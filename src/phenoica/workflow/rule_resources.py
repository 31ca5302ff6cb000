"""Threads and cluster resources of each rule, from the config's ``resources`` section.

``resources.<rule>`` overrides ``resources.default`` key by key (a null or 0 keeps the default);
the names returned are those the SLURM executor plugin turns into ``--mem``, ``--time``,
``--partition`` and ``--gpus`` (``mem_mb``, ``runtime`` in minutes, ``slurm_partition``, ``gpu``
and ``gpu_model``).
"""

from __future__ import annotations

from typing import Any, Mapping


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
