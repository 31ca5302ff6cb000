"""LightGBM's parameters: Nelson et al. 2026 Table 6 (the schema's defaults of ``classify.lightgbm``)
merged with the user's keys, every key checked by LightGBM itself (unknown keys and aliases named
by LightGBM), and the keys that change only speed or logs.

LightGBM is imported only to check keys it has not checked before: a check's finding can be
recorded (:func:`lightgbm_names_record`, kept by the door) and given back to a later process
(:func:`use_lightgbm_names`), so that building the workflow's jobs imports no LightGBM. LightGBM's
reading of the schema's own defaults is shipped for the LightGBM versions it was read with
(:data:`SHIPPED_NAMES`, taken by :func:`lightgbm_parameter_names`), so that the first check of a
config that keeps them imports no LightGBM either."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import re
import threading
import warnings
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from phenoica.contract import package_schema, read_yaml

# LightGBM keys phenoica sets itself and a user may not override through classify.lightgbm.
_RESERVED = {
    "num_iterations": "set classify.num_boost_round instead",
    "seed": "every seed derives from the workflow seed",
}


#: LightGBM keys (and their aliases) that change only speed or logs: never a param of a job, never
#: in the report's parameter table.
#: LightGBM's own ``min_data_in_leaf``: a split needs at least this many training rows on each side
#: of it, so a training set of fewer than twice as many rows makes no split (every score 0.5).
LIGHTGBM_MIN_DATA_IN_LEAF = 20
#: ``min_data_in_leaf`` and LightGBM's aliases of it, as ``classify.lightgbm`` may name it.
MIN_DATA_IN_LEAF_NAMES: tuple[str, ...] = (
    "min_data_in_leaf",
    "min_data_per_leaf",
    "min_data",
    "min_child_samples",
    "min_samples_leaf",
)


def min_data_in_leaf_of(given: Mapping[str, Any]) -> int:
    """The rows a leaf needs under ``classify.lightgbm`` as the user wrote it (LightGBM's default
    where no name of it is set), read without importing LightGBM (the door runs at every parse)."""
    for name in MIN_DATA_IN_LEAF_NAMES:
        if name in given:
            return int(given[name])
    return LIGHTGBM_MIN_DATA_IN_LEAF


RUN_TIME_KEYS: tuple[str, ...] = ("num_threads", "num_thread", "nthread", "nthreads", "n_jobs", "verbosity", "verbose")


def _schema_defaults() -> dict[str, Any]:
    """The schema's defaults of ``classify.lightgbm`` (Table 6)."""
    properties = package_schema()["properties"]["classify"]["properties"]["lightgbm"]["properties"]
    return {key: entry["default"] for key, entry in properties.items() if "default" in entry}


#: Canonical names of the LightGBM parameters phenoica sets, defaults or checks itself, each with
#: a valid value. The parameter check sets them in its probe so that LightGBM names the
#: parameter behind any alias of them ("lambda_l1 is set=..., reg_alpha=... will be ignored").
_PROBE_CANONICAL: dict[str, Any] = {
    "objective": "binary",
    "num_iterations": 1,
    "seed": 0,
    "deterministic": False,
    "force_col_wise": False,
    "force_row_wise": False,
    "verbosity": 1,
    "num_threads": 1,
    "is_unbalance": False,
    "learning_rate": 0.1,
    "num_leaves": 31,
    "feature_fraction": 1.0,
    "lambda_l1": 0.0,
    "lambda_l2": 0.0,
}
#: A key LightGBM must call unknown, and an alias it must resolve, in every probe: if its
#: messages ever stop saying so, the check fails loudly instead of passing everything.
_PROBE_UNKNOWN = "phenoica_probe_unknown_key"
_PROBE_ALIAS = ("reg_alpha", "lambda_l1")
_LIGHTGBM_LOCK = threading.Lock()


class _LightGBMLog:
    """The logger phenoica registers with LightGBM (``lightgbm.register_logger``).

    Outside a parameter check it does what LightGBM's default logger does (info lines are
    printed, warnings become Python warnings); during a check it records the messages instead.
    LightGBM has no public way to read back a logger registered earlier, so one registered by
    the caller is replaced by this one (register it again after calling the check).
    """

    def __init__(self) -> None:
        self.record: list[str] | None = None

    def info(self, msg: str) -> None:
        if self.record is not None:
            self.record.append(msg)
        else:
            print(msg)

    def warning(self, msg: str) -> None:
        if self.record is not None:
            self.record.append(msg)
        else:
            warnings.warn(msg, stacklevel=3)


_LIGHTGBM_LOG = _LightGBMLog()


def _lightgbm_messages(params: Mapping[str, Any]) -> tuple[list[str], Exception | None]:
    """LightGBM's log while it reads ``params`` (a Dataset built on 20 x 2 rows), and the
    error it raised, if any."""
    import lightgbm as lgb  # the check's only import of LightGBM

    X = np.column_stack([np.arange(20.0), np.arange(20.0) % 7])
    y = np.arange(20) % 2
    with _LIGHTGBM_LOCK:
        lgb.register_logger(_LIGHTGBM_LOG)
        _LIGHTGBM_LOG.record = []
        error: Exception | None = None
        try:
            lgb.Dataset(X, label=y, params=dict(params)).construct()
        except Exception as exc:  # LightGBM rejects a value: reported below, with its message
            error = exc
        finally:
            messages, _LIGHTGBM_LOG.record = _LIGHTGBM_LOG.record, None
    return messages, error


def _lightgbm_version() -> str:
    """The installed LightGBM's version, read from its metadata (no import)."""
    return importlib.metadata.version("lightgbm")


#: LightGBM's reading of the schema's defaults of ``classify.lightgbm`` (:func:`lightgbm_names_record`),
#: by LightGBM version; written by ``python -m phenoica.classify._lightgbm_params`` with the installed
#: LightGBM (a test checks it against LightGBM's own reading).
SHIPPED_NAMES = Path(__file__).resolve().parent.parent / "schemas" / "lightgbm_names.yaml"


@functools.lru_cache(maxsize=1)
def shipped_lightgbm_names() -> bool:
    """Take the shipped reading of the schema's defaults for the installed LightGBM
    (:data:`SHIPPED_NAMES`, :func:`use_lightgbm_names`), once per process; whether there was one."""
    shipped = (read_yaml(SHIPPED_NAMES) or {}) if SHIPPED_NAMES.exists() else {}
    return use_lightgbm_names(shipped.get(_lightgbm_version()))


def write_shipped_names(path: Path = SHIPPED_NAMES) -> dict[str, Any]:
    """Read the schema's defaults with the installed LightGBM and keep the finding in ``path``
    beside the other versions' (what :func:`shipped_lightgbm_names` gives back)."""
    import yaml

    shipped = (read_yaml(path) or {}) if path.exists() else {}
    frozen = _frozen(_schema_defaults())  # read by LightGBM itself, not from a record
    names = [[k, v] for k, v in _lightgbm_names(frozen)]
    shipped[_lightgbm_version()] = {"lightgbm": _lightgbm_version(), "params": frozen, "names": names}
    header = "# LightGBM's reading of the schema's classify.lightgbm defaults, by LightGBM version.\n"
    header += "# Written by `python -m phenoica.classify._lightgbm_params`; do not edit by hand.\n"
    path.write_text(header + yaml.safe_dump(shipped, sort_keys=True))
    return shipped


#: Findings of earlier checks given back (:func:`use_lightgbm_names`): (LightGBM version, the
#: keys as :func:`lightgbm_parameter_names` freezes them) -> LightGBM's names of the keys.
_RECORDED: dict[tuple[str, str], tuple[tuple[str, str | None], ...]] = {}


@functools.lru_cache(maxsize=32)
def _lightgbm_names(frozen: str) -> tuple[tuple[str, str | None], ...]:
    given = json.loads(frozen)
    probe = {**_PROBE_CANONICAL, **given, "verbosity": 1, _PROBE_UNKNOWN: 1}
    probe.setdefault(_PROBE_ALIAS[0], 0.0)
    messages, error = _lightgbm_messages(probe)
    unknown: set[str] = set()
    canonical: dict[str, str] = {}
    for msg in messages:
        found = re.search(r"Unknown parameter: (\S+)", msg)
        if found:
            unknown.add(found.group(1))
            continue
        found = re.search(r"(\w+) is set\b", msg)  # "C is set=..., K=... will be ignored", "C is set with K=..."
        if found:
            for key in probe:
                if re.search(rf"(?<![\w.]){re.escape(key)}=", msg[found.end() :]):
                    canonical[key] = found.group(1)
    if _PROBE_UNKNOWN not in unknown or canonical.get(_PROBE_ALIAS[0]) != _PROBE_ALIAS[1]:
        if error is not None:
            raise ValueError(
                f"config key classify.lightgbm: LightGBM {_lightgbm_version()} rejects these parameters: {error}"
            )
        raise RuntimeError(
            f"LightGBM {_lightgbm_version()} did not report unknown and aliased parameters as expected "
            f"(messages: {messages[:5]}); phenoica cannot check classify.lightgbm with this version"
        )
    return tuple((key, None if key in unknown else canonical.get(key, key)) for key in given)


def lightgbm_parameter_names(params: Mapping[str, Any]) -> dict[str, str | None]:
    """LightGBM's own reading of parameter keys: key -> the parameter it sets, None if unknown.

    LightGBM reads ``params`` (on a tiny Dataset) and its messages are recorded: "Unknown
    parameter: KEY", and "CANONICAL is set ... KEY=..." for every key of a parameter set
    twice. The probe sets every parameter phenoica itself sets, defaults or
    checks (``objective``, ``seed``, ``num_iterations``, ``lambda_l1``...) under its canonical
    name, so an alias of any of them is named; a key aliasing another parameter keeps its own
    name unless two keys set that parameter. A probe key that LightGBM must call unknown and
    an alias it must resolve guard the check: if LightGBM's messages change, this raises
    instead of passing every key. Values are LightGBM's to check when it trains (some, such as
    ``max_bin_by_feature``, depend on the data). Results are cached per set of params, and a
    finding given back by :func:`use_lightgbm_names` for the installed version is used as is.
    """
    frozen = _frozen(params)
    recorded = _RECORDED.get((_lightgbm_version(), frozen))
    if recorded is None and shipped_lightgbm_names():
        recorded = _RECORDED.get((_lightgbm_version(), frozen))
    return dict(recorded if recorded is not None else _lightgbm_names(frozen))


def _frozen(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(params), sort_keys=True, default=repr)


def lightgbm_names_record(params: Mapping[str, Any]) -> dict[str, Any]:
    """What LightGBM calls each key of ``params`` (:func:`lightgbm_parameter_names`), as JSON
    data to keep: the LightGBM version, the keys and their names. A later process gives it back
    with :func:`use_lightgbm_names`."""
    names = lightgbm_parameter_names(params)
    return {"lightgbm": _lightgbm_version(), "params": _frozen(params), "names": [[k, v] for k, v in names.items()]}


def use_lightgbm_names(record: Mapping[str, Any] | None) -> bool:
    """Take a record of :func:`lightgbm_names_record` as LightGBM's reading of its keys, so that
    they are not checked (nor LightGBM imported) again in this process; a record of another
    LightGBM version than the installed one, or none, is ignored. Returns whether it was taken."""
    if not record or record.get("lightgbm") != _lightgbm_version():
        return False
    names = tuple((str(k), None if v is None else str(v)) for k, v in record["names"])
    _RECORDED[(str(record["lightgbm"]), str(record["params"]))] = names
    return True


def lightgbm_params(given: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """LightGBM parameters of ``given`` (``classify.lightgbm`` of a validated config: Nelson et al.
    2026 Table 6, the schema's defaults, merged with the user's keys).

    Keys are checked by LightGBM itself (:func:`lightgbm_parameter_names`): unknown keys are one
    error naming every one of them, and keys are returned under their canonical names (``reg_alpha`` ->
    ``lambda_l1``) wherever LightGBM names them. Two keys naming the same parameter
    with different values are an error, unless one of them is a schema default left untouched
    (then the other, explicitly set, wins). Adds ``objective=binary``, ``seed``,
    ``deterministic=True`` and ``force_col_wise=True`` (unless row-wise was asked for), so a
    fixed seed gives identical models. ``num_iterations`` and ``seed`` may not be set here.
    """
    given = dict(given)
    defaults = _schema_defaults()
    canonical = lightgbm_parameter_names(given)
    unknown = [key for key in given if canonical[key] is None]
    if unknown:
        keys = ", ".join(f"classify.lightgbm.{key}" for key in unknown)
        raise ValueError(
            f"config key(s) {keys}: not LightGBM {_lightgbm_version()} parameters or aliases (names are LightGBM's own, "
            "e.g. num_leaves, learning_rate)"
        )
    groups: dict[str, list[str]] = {}
    for key in given:
        canon = str(canonical[key])
        if canon in _RESERVED:
            raise ValueError(f"config key classify.lightgbm.{key}: may not be set here; {_RESERVED[canon]}")
        groups.setdefault(canon, []).append(key)
    params: dict[str, Any] = {}
    for canon, keys in groups.items():
        values = {k: given[k] for k in keys}
        if len(set(map(repr, values.values()))) > 1:
            explicit = [k for k in keys if not (k in defaults and given[k] == defaults[k])]
            if len(explicit) != 1:
                raise ValueError(
                    f"config keys classify.lightgbm.{' and '.join(keys)} all set LightGBM parameter "
                    f"{canon} with different values {values}; keep one"
                )
            params[canon] = given[explicit[0]]
        else:
            params[canon] = given[keys[0]]
    objective = params.get("objective", "binary")
    if objective not in ("binary", "cross_entropy", "xentropy"):
        raise ValueError(f"config key classify.lightgbm.objective: must be a binary objective, got {objective!r}")
    params["objective"] = objective
    params["seed"] = int(seed)
    params.setdefault("deterministic", True)
    if not params.get("force_row_wise"):
        params.setdefault("force_col_wise", True)
    params.setdefault("verbosity", -1)
    return params


def lightgbm_report_params(given: Mapping[str, Any]) -> dict[str, Any]:
    """The LightGBM parameters every classifier of ``given`` (``classify.lightgbm``) used, canonical
    names, keys sorted, for the report: without the seed and the keys that change only speed or
    logs (:data:`RUN_TIME_KEYS`)."""
    params = lightgbm_params(given, 0)
    return {k: params[k] for k in sorted(params) if k not in RUN_TIME_KEYS and k != "seed"}


if __name__ == "__main__":
    print(f"wrote {SHIPPED_NAMES}: LightGBM {', '.join(sorted(write_shipped_names()))}")
