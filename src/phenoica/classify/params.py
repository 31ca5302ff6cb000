"""The classify section and LightGBM's parameters: schema defaults, LightGBM's own check of every
key (unknown keys and aliases named by LightGBM itself), and :class:`ClassifyOptions`, the
settings one classification job reads, resolved once from the config section."""

from __future__ import annotations

import functools
import json
import re
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Mapping

import lightgbm as lgb
import numpy as np

from phenoica.classify.bins import GUIDES_PER_BLOCK
from phenoica.classify.protocol import PROTOCOLS
from phenoica.contract.config import as_resolved, resolve_section, section_defaults
from phenoica.contract.schema import package_schema

# LightGBM keys phenoica sets itself and a user may not override through classify.lightgbm.
_RESERVED = {
    "num_iterations": "set classify.num_boost_round instead",
    "seed": "every seed derives from the workflow seed",
}


def resolve_classify_config(cfg_classify: Mapping[str, Any] | None) -> dict[str, Any]:
    """``cfg_classify`` (config["classify"], possibly partial) with the schema's defaults filled in
    (:func:`phenoica.contract.config.resolve_section`; a section resolved once is not validated again).

    Raises ValueError naming the key when a value breaks the schema.
    """
    return resolve_section("classify", cfg_classify)


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
                f"config key classify.lightgbm: LightGBM {lgb.__version__} rejects these parameters: {error}"
            )
        raise RuntimeError(
            f"LightGBM {lgb.__version__} did not report unknown and aliased parameters as expected "
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
    ``max_bin_by_feature``, depend on the data). Results are cached per set of params.
    """
    frozen = json.dumps(dict(params), sort_keys=True, default=repr)
    return dict(_lightgbm_names(frozen))


def lightgbm_params(cfg_classify: Mapping[str, Any] | None, seed: int) -> dict[str, Any]:
    """LightGBM parameters: Nelson et al. 2026 Table 6 (schema defaults) merged with classify.lightgbm.

    Keys are checked by LightGBM itself (:func:`lightgbm_parameter_names`): unknown keys are one
    error naming every one of them, and keys are returned under their canonical names (``reg_alpha`` ->
    ``lambda_l1``) wherever LightGBM names them. Two keys naming the same parameter
    with different values are an error, unless one of them is a schema default left untouched
    (then the other, explicitly set, wins). Adds ``objective=binary``, ``seed``,
    ``deterministic=True`` and ``force_col_wise=True`` (unless row-wise was asked for), so a
    fixed seed gives identical models. ``num_iterations`` and ``seed`` may not be set here.
    """
    cfg = as_resolved("classify", cfg_classify)
    given = dict(cfg["lightgbm"])
    defaults = section_defaults("classify")["lightgbm"]
    canonical = lightgbm_parameter_names(given)
    unknown = [key for key in given if canonical[key] is None]
    if unknown:
        keys = ", ".join(f"classify.lightgbm.{key}" for key in unknown)
        raise ValueError(
            f"config key(s) {keys}: not LightGBM {lgb.__version__} parameters or aliases (names are LightGBM's own, "
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


def lightgbm_report_params(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The LightGBM parameters every classifier used (Table 6 + ``classify.lightgbm``, canonical
    names, keys sorted), for the report: without the seed, the thread count, the log level and
    the other keys that change only speed or logs (``x-speed-only-keys``). ``settings`` holds
    ``classify.lightgbm`` and ``seed`` (the config, or the report's rule settings)."""
    speed_only = set(package_schema()["properties"]["classify"]["properties"]["lightgbm"]["x-speed-only-keys"])
    params = lightgbm_params({"lightgbm": settings["classify"]["lightgbm"]}, settings["seed"])
    return {k: params[k] for k in sorted(params) if k not in speed_only and k != "seed"}


@dataclass(frozen=True)
class ClassifyOptions:
    """The settings of one classification job, resolved and checked once (:meth:`from_config`).

    ``lightgbm`` holds the job's LightGBM parameters (:func:`lightgbm_params`: Table 6 defaults,
    ``classify.lightgbm`` under LightGBM's canonical names, ``seed`` the workflow seed); each
    (guide, fold) model replaces that seed with its own. ``block_size`` guides share one binned
    block of training rows (a memory/speed trade-off only; results do not depend on it).
    ``protocol`` is ``exact`` or ``fast`` (:mod:`phenoica.classify.protocol`); the fast
    protocol's fold groups and training-control cap are read through :attr:`max_fold_groups`
    and :attr:`max_train_controls` (None under ``exact``).
    """

    seed: int
    lightgbm: Mapping[str, Any]
    num_boost_round: int
    concentration: bool
    concentration_k: float
    min_train_samples: int
    min_test_samples: int
    n_null_guides: int
    protocol: str
    fast_train_controls: int
    fast_fold_groups: int
    block_size: int = GUIDES_PER_BLOCK

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"config key classify.protocol: expected one of {list(PROTOCOLS)}, got {self.protocol!r}")
        for key in ("fast_train_controls", "fast_fold_groups"):
            if int(getattr(self, key)) < 1:
                raise ValueError(f"config key classify.{key}: must be >= 1, got {getattr(self, key)}")

    @property
    def max_train_controls(self) -> int | None:
        """Training controls per training set: ``fast_train_controls`` under ``fast``, None (all) under ``exact``."""
        return self.fast_train_controls if self.protocol == "fast" else None

    @property
    def max_fold_groups(self) -> int | None:
        """Training sets per guide: ``fast_fold_groups`` under ``fast``, None (one per fold) under ``exact``."""
        return self.fast_fold_groups if self.protocol == "fast" else None

    @classmethod
    def from_config(
        cls, cfg_classify: Mapping[str, Any] | None, seed: int, block_size: int = GUIDES_PER_BLOCK
    ) -> "ClassifyOptions":
        """From ``config["classify"]`` (possibly partial: resolved here, once, against the schema,
        whose defaults fill the absent keys; a section already resolved is used as is) and the
        workflow seed. Raises ValueError naming the key when a value breaks the schema or
        LightGBM rejects a ``classify.lightgbm`` key."""
        if block_size < 1:
            raise ValueError(f"classify: block_size must be >= 1, got {block_size}")
        cfg = as_resolved("classify", cfg_classify)
        return cls(
            seed=int(seed),
            lightgbm=lightgbm_params(cfg, seed),
            num_boost_round=int(cfg["num_boost_round"]),
            concentration=bool(cfg["concentration"]),
            concentration_k=float(cfg["concentration_k"]),
            min_train_samples=int(cfg["min_train_samples"]),
            min_test_samples=int(cfg["min_test_samples"]),
            n_null_guides=int(cfg["n_null_guides"]),
            block_size=int(block_size),
            protocol=str(cfg["protocol"]),
            fast_train_controls=int(cfg["fast_train_controls"]),
            fast_fold_groups=int(cfg["fast_fold_groups"]),
        )
