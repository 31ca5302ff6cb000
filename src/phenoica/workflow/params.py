"""The params of every rule (what Snakemake reruns a job for) and the settings its script reads.

Which config keys reach which rule is declared once, in the schema (``x-jobs`` on a key, else its
section's; :func:`phenoica.contract.schema.key_jobs`). One selection is read two ways:

- :func:`rule_settings` -- every key that reaches a rule, run-time keys (``x-run-time``: speed,
  memory, storage layout, logs, screen size) included, shaped like the config (``{"classify":
  {...}, "seed": 0}``): what the rule's script reads, once, to build its options;
- :func:`rule_params` -- the same selection without the run-time keys, mapping keys sorted
  (:func:`canonical`): the rule's params (``params: **rule_params(config, "classify")``), so a job
  reruns exactly when a key it reads changes, never for a run-time key or for key order.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from phenoica.contract.schema import package_schema
from phenoica.models.spec import training_spec


def canonical(value: Any) -> Any:
    """``value`` with every mapping's keys sorted (recursively): the params Snakemake records
    are compared as text, so key order must not count."""
    if isinstance(value, Mapping):
        return {str(k): canonical(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def _is_run_time(key: str, sub: Mapping[str, Any], schema: Mapping[str, Any]) -> bool:
    """Whether ``key`` (schema ``sub``) of a mapping with schema ``schema`` is a run-time key."""
    return bool(sub.get("x-run-time")) or key in set(schema.get("x-speed-only-keys", ()))


def _select(
    values: Mapping[str, Any],
    schema: Mapping[str, Any],
    rule: str | None,
    inherited: tuple[str, ...],
    run_time: bool,
) -> dict[str, Any]:
    """The entries of ``values`` whose declared rules (the key's ``x-jobs``, else ``inherited``)
    include ``rule`` (every entry when ``rule`` is None), run-time keys only when ``run_time``;
    a mapping that reaches ``rule`` is selected the same way inside, and one that does not is
    looked into for keys that do (a section without ``x-jobs`` of its own: ``screen``)."""
    props = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for key, value in values.items():
        sub = props.get(key) or {}
        jobs = tuple(sub.get("x-jobs", inherited))
        if not run_time and _is_run_time(key, sub, schema):
            continue
        if rule is None or rule in jobs:
            out[key] = _select(value, sub, rule, jobs, run_time) if isinstance(value, Mapping) else value
        elif isinstance(value, Mapping):
            inner = _select(value, sub, rule, jobs, run_time)
            if inner:
                out[key] = inner
    return out


def _check_rule(rule: str) -> None:
    return None


def rule_settings(config: Mapping[str, Any], rule: str) -> dict[str, Any]:
    """Every key of the (validated) ``config`` that reaches rule ``rule``, run-time keys included,
    shaped like the config (sections as mappings, top-level keys such as ``seed`` as values),
    mapping keys sorted: what the rule's script reads, once, ``rule_settings(snakemake.config,
    "classify")``."""
    _check_rule(rule)
    return canonical(_select(config, package_schema(), rule, (), run_time=True))


def _splits_reads(selected: dict[str, Any]) -> dict[str, Any]:
    """Leave-one-batch-out draws nothing: it reads the scheme alone (not the seed, the share or
    the repeats of in_distribution)."""
    if selected["splits"]["scheme"] == "leave_one_batch_out":
        return {"splits": {"scheme": selected["splits"]["scheme"]}}
    return selected


#: Rules that read less of their selection for some values of it (the one exception to the
#: schema's declaration): rule -> what the rule reads of its selection.
READS_BY_VALUE: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {"splits": _splits_reads}


def rule_params(config: Mapping[str, Any], rule: str) -> dict[str, Any]:
    """The params of rule ``rule``: :func:`rule_settings` without the run-time keys, mapping keys
    sorted (:func:`canonical`); a rule passes them as ``params: **rule_params(config, rule)``, so
    Snakemake reruns a job only when a value it reads changes."""
    _check_rule(rule)
    selected = _select(config, package_schema(), rule, (), run_time=False)
    return canonical(READS_BY_VALUE.get(rule, lambda s: s)(selected))


def _training_reads(entry: Mapping[str, Any]) -> dict[str, Any]:
    """What training reads: the shape and channels it trains (never the embedding options), its seed."""
    return {"spec": training_spec(entry), "seed": entry["seed"]}


def _embedding_reads(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {"spec": canonical(entry)}


#: The rules of a ``{model}`` job that read its own ``models`` entry -> what each reads of it.
MODEL_READS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "train_mae": _training_reads,
    "embed": _embedding_reads,
}


def model_params(config: Mapping[str, Any], rule: str) -> Callable[[Any], dict[str, Any]]:
    """The param a ``{model}`` job takes from its own ``models`` entry, as a function of the job's
    wildcards (Snakemake calls it per job): ``train_mae`` the part of the entry training depends
    on (:func:`phenoica.models.spec.training_spec`) and the entry's seed, ``embed`` the whole
    entry. Rules pass it beside their settings: ``params: **rule_params(config, rule),
    model=model_params(config, rule)``; the script reads ``snakemake.params.model``."""
    if rule not in MODEL_READS:  # fails when the rule is defined, not per job
        raise KeyError(f"rule {rule!r} reads no models entry ({' and '.join(MODEL_READS)} do)")
    reads = MODEL_READS[rule]

    def params(wildcards: Any) -> dict[str, Any]:
        return reads(config["models"][wildcards.model])

    return params


def _section_schema(section: str) -> Mapping[str, Any]:
    properties = package_schema()["properties"]
    if section not in properties:
        raise KeyError(f"the config schema has no section {section!r}")
    return properties[section]


def without_run_time(config: Mapping[str, Any], section: str) -> dict[str, Any]:
    """``config[section]`` without its run-time keys (``x-run-time``), mapping keys sorted: what
    a reader of the whole section (the check at the door) depends on."""
    return canonical(_select(config.get(section) or {}, _section_schema(section), None, (), run_time=False))
