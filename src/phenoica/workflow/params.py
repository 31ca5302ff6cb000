"""The params of every rule: what Snakemake reruns a job for.

A rule passes exactly the values its output depends on (:func:`job_params`), never a whole config
section. Which keys reach which rule is declared once, in the schema (``x-jobs``;
:func:`phenoica.contract.schema.key_jobs`): a key that changes only speed, memory, storage layout or
log output (``x-run-time: speed``) is never a param, and scripts read those at run time
(:func:`with_speed_settings`). Params are canonical (mapping keys sorted), so reordering the keys
of a config file reruns nothing.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable, Mapping

from phenoica.contract.config import deep_merge
from phenoica.contract.schema import key_jobs, package_schema


def feature_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """The feature-column keys of ``config["screen"]`` that gather_profiles reads (source
    embeddings chooses its features by them; phenoica's own embeddings are the default,
    ``emb_``): its params, so that declaring other features regathers the profiles."""
    keys = ("feature_prefix", "feature_regex", "feature_columns")
    return {k: config["screen"][k] for k in keys}


def canonical(value: Any) -> Any:
    """``value`` with every mapping's keys sorted (recursively): the params Snakemake records
    are compared as text, so key order must not count."""
    if isinstance(value, Mapping):
        return {str(k): canonical(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def _entries(
    values: Mapping[str, Any], schema: Mapping[str, Any]
) -> Iterable[tuple[str, Any, Mapping[str, Any], bool]]:
    """``(key, value, key schema, is a run-time key)`` for each entry of a config mapping."""
    props = schema.get("properties") or {}
    speed_only = set(schema.get("x-speed-only-keys", ()))
    for key, value in values.items():
        sub = props.get(key) or {}
        yield key, value, sub, bool(sub.get("x-run-time")) or key in speed_only


def _reaching(
    values: Mapping[str, Any], schema: Mapping[str, Any], job: str | None, inherited: tuple[str, ...]
) -> dict[str, Any]:
    """The entries of ``values`` whose declared jobs (the key's ``x-jobs``, else ``inherited``)
    include ``job`` (every entry when ``job`` is None), run-time keys left out, mappings
    filtered the same way inside."""
    out: dict[str, Any] = {}
    for key, value, sub, run_time in _entries(values, schema):
        jobs = tuple(sub.get("x-jobs", inherited))
        if run_time or (job is not None and job not in jobs):
            continue
        out[key] = _reaching(value, sub, job, jobs) if isinstance(value, Mapping) else value
    return out


def _run_time_only(values: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value, sub, run_time in _entries(values, schema):
        if run_time:
            out[key] = value
        elif isinstance(value, Mapping):
            inner = _run_time_only(value, sub)
            if inner:
                out[key] = inner
    return out


@functools.lru_cache(maxsize=1)
def _annotated_jobs() -> frozenset[str]:
    """Every rule some key of the package's schema reaches (read once per process)."""
    return frozenset(job for jobs in key_jobs().values() for job in jobs)


def _section_schema(section: str) -> Mapping[str, Any]:
    properties = package_schema()["properties"]
    if section not in properties:
        raise KeyError(f"the config schema has no section {section!r}")
    return properties[section]


def job_params(config: Mapping[str, Any], section: str, job: str) -> dict[str, Any]:
    """The values of ``config[section]`` the output of rule ``job`` depends on: the keys whose
    schema annotation (``x-jobs``, the key's own or its section's) names ``job``, without the
    run-time keys (``x-run-time``), mapping keys sorted (:func:`canonical`).

    Rules pass this (or single values) as params, so that Snakemake reruns a job only when a
    value it reads changes; which keys reach which job is declared once, in the schema.
    """
    schema = _section_schema(section)
    if job not in _annotated_jobs():
        raise KeyError(f"no config key of the schema reaches a job {job!r} (x-jobs annotations)")
    return canonical(_reaching(config[section], schema, job, tuple(schema.get("x-jobs", ()))))


def without_run_time(config: Mapping[str, Any], section: str) -> dict[str, Any]:
    """``config[section]`` without its run-time keys (``x-run-time``), mapping keys sorted: what
    a reader of the whole section (the check at the door) depends on."""
    return canonical(_reaching(config.get(section) or {}, _section_schema(section), None, ()))


def speed_settings(config: Mapping[str, Any], section: str) -> dict[str, Any]:
    """The run-time-only keys of ``config[section]`` that are set (speed-only and screen-size
    keys, nested as in the config): what a script adds to its params at run time."""
    return _run_time_only(config.get(section) or {}, _section_schema(section))


def with_speed_settings(params: Mapping[str, Any], config: Mapping[str, Any], section: str) -> dict[str, Any]:
    """A job's params for ``config[section]`` completed with the section's run-time-only keys:
    what a script hands the library. The only way a script reads ``snakemake.config``."""
    return deep_merge(params, speed_settings(config, section))


def lightgbm_report_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """The LightGBM parameters every classifier used (Table 6 + ``classify.lightgbm``, canonical
    names), for the report: without the seed, the thread count, the log level and the other
    keys that change only speed or logs (``x-speed-only-keys``)."""
    from phenoica.classify.params import lightgbm_params  # imports lightgbm: only when asked for

    speed_only = set(_section_schema("classify")["properties"]["lightgbm"]["x-speed-only-keys"])
    params = lightgbm_params(config["classify"], config["seed"])
    return canonical({k: v for k, v in params.items() if k not in speed_only and k != "seed"})


def splits_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """What the folds depend on: the scheme, and for ``in_distribution`` its share, repeats and
    the seed (leave-one-batch-out draws nothing)."""
    splits = config["splits"]
    if splits["scheme"] == "leave_one_batch_out":
        return {"scheme": splits["scheme"]}
    return canonical({**job_params(config, "splits", "splits"), "seed": config["seed"]})
