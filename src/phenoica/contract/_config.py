"""Load and validate the workflow configuration against ``phenoica/schemas/config.schema.yaml``.

The schema is the single description of every key: its defaults are filled in here, and an
unknown or mistyped key is an error that names the key's full path (``classify.lightgbm``).
"""

from __future__ import annotations

import copy
import numbers
import os
import re
from pathlib import Path
from typing import Any, Mapping

import jsonschema

from phenoica.contract._errors import ConfigError
from phenoica.contract._names import config_name_problems
from phenoica.contract._schema import package_schema, read_yaml
from phenoica.utils import path_part_problem


def _with_defaults(validator_class: type) -> type:
    """Extend a jsonschema validator so that validating also fills in ``default`` values."""
    validate_properties = validator_class.VALIDATORS["properties"]
    validate_additional = validator_class.VALIDATORS["additionalProperties"]

    def set_defaults(validator, properties, instance, schema):  # type: ignore[no-untyped-def]
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    def additional_with_defaults(validator, additional, instance, schema):  # type: ignore[no-untyped-def]
        # Fill defaults inside mapping-valued entries (e.g. each model under `models`).
        if isinstance(instance, dict) and isinstance(additional, dict):
            known = set(schema.get("properties", {}))
            for name, value in instance.items():
                if name in known or not isinstance(value, dict):
                    continue
                for key, sub in additional.get("properties", {}).items():
                    if "default" in sub and key not in value:
                        value[key] = copy.deepcopy(sub["default"])
        yield from validate_additional(validator, additional, instance, schema)

    return jsonschema.validators.extend(
        validator_class,
        {"properties": set_defaults, "additionalProperties": additional_with_defaults},
    )


#: Keys that moved to the section of their stage: old dotted key -> where it is now.
MOVED_KEYS: Mapping[str, str] = {
    "classify.null_model": "hits.null_model",
    "classify.q_threshold": "hits.q_threshold",
    "transforms.sweep_points": "sweep.points",
    "transforms.sweep_models": "sweep.models",
}


def _check_moved_keys(config: Mapping[str, Any]) -> None:
    """A key of an older config that moved (:data:`MOVED_KEYS`) is named with its new place,
    rather than reported as unknown."""
    found = []
    for old, new in MOVED_KEYS.items():
        section, key = old.split(".")
        if isinstance(config.get(section), Mapping) and key in config[section]:
            found.append(f"  config key {old}: moved to {new}; write it there")
    if found:
        raise ConfigError("invalid configuration:\n" + "\n".join(found))


#: The fewest whitened components a transform keeps (ICA needs two sources to rotate): a smaller
#: count is refused (:func:`component_rule`), and so is a rule that keeps fewer on the data
#: (:func:`phenoica.transforms._components.too_few`).
MIN_COMPONENTS = 2
#: The named rules (strings) ``transforms.n_components`` accepts beside counts and fractions.
COMPONENT_RULES: tuple[str, ...] = ("deflated", "parallel")


def component_rule(n_components: Any, key: str = "transforms.n_components") -> str:
    """The component rule ``n_components`` states, named for reports: ``count 8``, ``fraction
    0.9``, ``deflated`` or ``parallel``. The one check of the value, wherever it is read (the
    config, a fit): ConfigError naming ``key``, the value and what is expected when it is none of
    these (a count below :data:`MIN_COMPONENTS`, a bool, a fraction outside (0, 1), another name)."""
    n = n_components
    if isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= MIN_COMPONENTS:
        return f"count {int(n)}"
    if isinstance(n, numbers.Real) and not isinstance(n, numbers.Integral) and 0 < n < 1:
        return f"fraction {float(n)}"
    if isinstance(n, str) and n in COMPONENT_RULES:
        return n
    named = ", ".join(repr(r) for r in COMPONENT_RULES)
    raise ConfigError(
        f"{key} is {n!r}; expected an integer >= {MIN_COMPONENTS} (a rule keeping fewer components is an error), "
        f"a fraction in (0, 1) or one of {named}"
    )


def validate_config(config: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Return a validated copy of ``config`` with every default filled in.

    Raises ConfigError naming the offending key path and what was expected.
    """
    _check_moved_keys(config)
    schema = dict(schema) if schema is not None else package_schema()
    instance = copy.deepcopy(dict(config))
    validator_class = _with_defaults(jsonschema.validators.validator_for(schema))
    validator = validator_class(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for err in errors:
            where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
            lines.append(f"  config key {where}: {err.message}")
        raise ConfigError("invalid configuration:\n" + "\n".join(lines))
    if not instance.get("models") and "default_models" in instance:
        instance["models"] = copy.deepcopy(instance["default_models"])  # names none: the defaults
    _expand_paths(instance)
    _check_consistency(instance)
    return instance


#: Config keys that hold a path (or a glob) of the user's: a leading ``~`` is expanded.
PATH_KEYS: tuple[str, ...] = (
    "results",
    "screen.metadata",
    "screen.plates_dir",
    "screen.plate_map",
    "screen.images_dir",
    "screen.ome_zarr_dir",
    "screen.embeddings",
    "transforms.frozen",
)


def _expand_paths(config: dict[str, Any]) -> None:
    """``~`` at the start of a path key becomes the home folder (a shell does this, Snakemake
    does not: ``results: ~/x`` made a folder named ``~``); so do the checkpoints of the models
    and a ``{model: glob}`` mapping of embedding sets."""
    for dotted in PATH_KEYS:
        *parents, key = dotted.split(".")
        section = config
        for part in parents:
            section = section.get(part) or {}
        value = section.get(key) if isinstance(section, dict) else None
        if isinstance(value, str):
            section[key] = os.path.expanduser(value)
        elif isinstance(value, dict):
            section[key] = {k: os.path.expanduser(v) if isinstance(v, str) else v for k, v in value.items()}
    for model in (config.get("models") or {}).values():
        if isinstance(model, dict) and isinstance(model.get("checkpoint"), str):
            model["checkpoint"] = os.path.expanduser(model["checkpoint"])


def check_results_path(results: str) -> None:
    """``results`` must name a folder: not empty, not an existing file, and writable where it
    exists (it and the folders below it, three levels down), so that a job never fails late on
    a raw NotADirectoryError or PermissionError."""
    if not str(results).strip():
        raise ConfigError("invalid configuration: results is empty; expected a folder path (default: results)")
    path = Path(results)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"invalid configuration: results {results!r} is an existing file; expected a folder path")
    for folder in _existing_folders(path, depth=3):
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ConfigError(
                f"invalid configuration: results folder {str(folder)!r} is not writable by this user (permission "
                "denied); expected a folder phenoica can write its outputs into (chmod u+w, or another results)"
            )


def _existing_folders(root: Path, depth: int) -> list[Path]:
    if not root.is_dir():
        return []
    out, level = [root], [root]
    for _ in range(depth):
        level = [c for folder in level for c in _subfolders(folder)]
        out += level
    return out


def _subfolders(folder: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def check_path_part(name: Any, what: str) -> None:
    """A name that becomes one part of an output path (``what``: e.g. ``model name``) must be safe
    (:func:`phenoica.utils.path_part_problem`); ConfigError naming it otherwise."""
    why = path_part_problem(name)
    if why is not None:
        raise ConfigError(
            f"invalid configuration: {what} {name!r} {why}; names become folder and file names under results/, so "
            "they need letters, digits and the like without '/', '\\', '.' or '..', control characters or "
            "surrounding whitespace"
        )


def _check_consistency(config: dict[str, Any]) -> None:
    """Cross-key rules the schema cannot express (the names under ``resources`` are checked once
    the rules are defined: :func:`phenoica.workflow.check_resource_rules`)."""
    screen = config["screen"]
    needs = {
        "zarr": ["metadata", "plates_dir"],
        "images": ["plate_map", "images_dir"],
        "ome_zarr": ["plate_map", "ome_zarr_dir"],
        "loaddata": ["plate_map", "loaddata"],
        "embeddings": ["embeddings"],
    }.get(screen["source"], [])
    missing = [k for k in needs if not screen.get(k)]
    if missing:
        raise ConfigError(
            f"invalid configuration: screen.source is {screen['source']!r}, which needs "
            + ", ".join(f"screen.{k}" for k in missing)
        )
    demo = config["demo"]
    if demo["n_null_genes"] > demo["n_genes"]:
        raise ConfigError("invalid configuration: demo.n_null_genes exceeds demo.n_genes")
    classify = config["classify"]
    n_null = classify["n_null_guides"]
    if config["hits"]["null_model"] == "parametric" and n_null != "auto" and 0 < n_null < 3:
        raise ConfigError(
            f"invalid configuration: classify.n_null_guides is {classify['n_null_guides']}; the parametric null "
            "fits a mean and a spread and needs at least 3 pseudo-guides (100 or more for calibrated calls), "
            "or 0 for no hit calls"
        )
    if classify["map_max_null_size"] < classify["map_null_size"]:
        raise ConfigError(
            f"invalid configuration: classify.map_max_null_size ({classify['map_max_null_size']}) is below "
            f"classify.map_null_size ({classify['map_null_size']}); it is the most draws a guide's mAP p-value gets, "
            "the first pass included"
        )
    for name, model in config["models"].items():
        check_model_geometry(model, f"invalid configuration: models.{name}")
        _check_model_entry(name, model)
    check_results_path(config["results"])
    for name in config["models"]:
        check_path_part(name, "model name (a key of models)")
    for name in config["transforms"]["variants"]:
        check_path_part(name, "variant name (transforms.variants)")
    _check_feature_keys(screen)
    _check_channel_names(config)
    try:
        component_rule(config["transforms"]["n_components"])
    except ConfigError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None


def component_problems(n_components: Any, features: Mapping[str, int]) -> list[str]:
    """``transforms.n_components`` against each model's feature count (``features``: model ->
    features per profile, as the door finds them): a count (:func:`component_rule`) above a
    model's features cannot be kept (the whitened components are at most the features)."""
    if not component_rule(n_components).startswith("count"):
        return []
    return [
        f"config key transforms.n_components is {n_components}, but model {model!r} has {d} feature(s) per profile; "
        f"expected at most {d} (or a rule that finds the count: a fraction in (0, 1) or one of {list(COMPONENT_RULES)})"
        for model, d in features.items()
        if n_components > d
    ]


def _check_channel_names(config: Mapping[str, Any]) -> None:
    """Channel names of the config (``screen.channels``, ``screen.loaddata_channels``,
    ``demo.channels``, each ``models.NAME.channels``, the names and labels of ``channels``) are
    plain text
    (:func:`phenoica.contract._names.name_problem`)."""
    lists: dict[str, Any] = {
        "screen.channels": config["screen"].get("channels"),
        "screen.loaddata_channels": config["screen"].get("loaddata_channels"),
        "demo.channels": config["demo"].get("channels"),
    }
    lists.update({f"models.{name}.channels": m.get("channels") for name, m in config["models"].items()})
    styles = config.get("channels") or {}
    lists["channels"] = [*styles, *(s["label"] for s in styles.values() if isinstance(s, Mapping) and s.get("label"))]
    problems = []
    for key, names in lists.items():
        if isinstance(names, Mapping):
            names = [*names, *names.values()]
        problems += config_name_problems(names or [], key)
    if problems:
        raise ConfigError("invalid configuration:\n" + "\n".join(f"  {p}" for p in problems))


def planned_demo_note(config: Mapping[str, Any]) -> str | None:
    """A note when ``config`` (as given, before defaults) names no ``screen`` (or no
    ``screen.source``): the schema's default, the simulated demo screen, is planned, which a
    config written for a real screen never means."""
    screen = config.get("screen")
    if isinstance(screen, Mapping) and screen.get("source"):
        return None
    demo = validate_config({"demo": dict(config.get("demo") or {})})["demo"]
    plates = int(demo["n_batches"]) * int(demo["plates_per_batch"])
    return (
        "the config names no screen (no screen.source): the simulated demo screen is planned (screen.source: demo, "
        f"{plates} simulated plates, a model trained on them); set screen.source and its paths to analyse a real screen"
    )


def _check_feature_keys(screen: Mapping[str, Any]) -> None:
    """The feature-column keys of ``screen`` (source embeddings): one way to choose them, and a
    regular expression that compiles."""
    given = [k for k in ("feature_regex", "feature_columns", "embedding_column") if screen.get(k)]
    if len(given) > 1:
        raise ConfigError(
            f"invalid configuration: screen.{given[0]} and screen.{given[1]} are both set; the feature columns are "
            "chosen one way: feature_prefix (default emb_), feature_regex, feature_columns, or one list-valued "
            "embedding_column"
        )
    regex = screen.get("feature_regex")
    if regex:
        try:
            re.compile(regex)
        except re.error as exc:
            raise ConfigError(
                f"invalid configuration: screen.feature_regex {regex!r} is not a regular expression ({exc})"
            ) from None
    columns = screen.get("feature_columns") or []
    twice = sorted({c for c in columns if columns.count(c) > 1})
    if twice:
        raise ConfigError(f"invalid configuration: screen.feature_columns lists {twice} more than once")


def check_model_geometry(spec: Mapping[str, Any], where: str = "model spec") -> None:
    """The ViT geometry of a model entry (a ``models`` entry, or a spec built in Python):
    ``img_size`` a multiple of ``patch_size``, ``embed_dim`` divisible by ``num_heads``.
    Raises ConfigError naming ``where`` and the keys."""
    if spec["img_size"] % spec["patch_size"]:
        raise ConfigError(
            f"{where}.img_size ({spec['img_size']}) is not a multiple of patch_size ({spec['patch_size']})"
        )
    if spec["embed_dim"] % spec["num_heads"]:
        raise ConfigError(
            f"{where}.embed_dim ({spec['embed_dim']}) is not divisible by num_heads ({spec['num_heads']})"
        )


def _check_model_entry(name: str, model: Mapping[str, Any]) -> None:
    """Cross-key rules of one ``models`` entry: architecture, timm_name, checkpoint, embedding options."""
    where = f"invalid configuration: models.{name}"
    arch, timm_name, checkpoint = model.get("architecture"), model.get("timm_name"), model.get("checkpoint")
    if timm_name and arch not in (None, "timm"):
        raise ConfigError(f"{where}.timm_name is set, so architecture must be null or timm, not {arch!r}")
    if arch == "timm" and not timm_name:
        raise ConfigError(f"{where}.architecture is timm, which needs timm_name (a timm model name)")
    if (timm_name or arch == "openphenom") and not checkpoint:
        what = f"timm_name {timm_name!r}" if timm_name else "architecture openphenom"
        raise ConfigError(f"{where}: {what} needs checkpoint (a local weights file; nothing is downloaded)")
    if model.get("per_channel") and model.get("pool") != "mean":
        raise ConfigError(f"{where}.per_channel pools each channel's patch tokens: it needs pool mean")
    own = arch == "phenoica" or (arch is None and not timm_name and not checkpoint)
    if model.get("per_channel") and own and not model.get("channel_agnostic"):
        raise ConfigError(f"{where}.per_channel needs channel_agnostic: true (tokens per channel)")
    channels = model.get("channels") or []
    twice = sorted({c for c in channels if channels.count(c) > 1})
    if twice:
        raise ConfigError(f"{where}.channels lists {twice} more than once")


def load_config(path: Path | str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Read a YAML config file, merge ``overrides`` (nested), validate and fill defaults."""
    raw = read_yaml(path) or {}
    if overrides:
        raw = deep_merge(raw, overrides)
    return validate_config(raw)


#: The model name of a run that starts from one embedding set and names no model.
EMBEDDINGS_MODEL = "embeddings"


def run_models(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the models a run uses, in ``models``: exactly those the user names.

    ``config`` is Snakemake's config: the workflow's ``config.yaml`` when no ``--configfile`` is
    given, else the ``--configfile`` files merged in order; ``--config`` merged over either, key by
    key.

    - ``models`` names the run's models; when it names none, :func:`validate_config` uses
      ``default_models`` (the embedded default sets the demo's ``mae`` there, and
      ``config/second_seed.yaml`` adds its second seed ``mae_seed1``).
      The demo's models are never added to models the user names: they live under their own
      key, so Snakemake's key-by-key merge cannot mix them in (no Snakemake internals are read).
    - ``screen.source: embeddings`` with one glob is one model: the single model named, or
      ``embeddings`` when none is named; naming several is an error (they would score identical
      copies of one embedding set). With ``screen.embeddings`` a mapping ``{model: glob}``, the
      models are its keys (a ``models`` entry of the same name is used for its options); a model
      named besides them is an error.
    """
    out = copy.deepcopy(dict(config))
    named = dict(out.get("models") or {})
    screen = out.get("screen") or {}
    if screen.get("source") != "embeddings":
        return out  # validate_config runs default_models when models names none
    sets = screen.get("embeddings")
    if isinstance(sets, Mapping):
        extra = sorted(set(named) - set(sets))
        if extra:
            raise ConfigError(
                f"invalid configuration: models {extra} have no embedding set: with screen.embeddings a mapping "
                f"{{model: glob}}, the models are its keys {sorted(sets)}"
            )
        out["models"] = {name: copy.deepcopy(named.get(name) or {}) for name in sets}
    elif len(named) > 1:
        raise ConfigError(
            f"invalid configuration: screen.source embeddings reads one embedding set (screen.embeddings is one "
            f"glob), but models names {sorted(named)}: they would score identical copies. Name one model, or give "
            "screen.embeddings as {model: glob} for several sets"
        )
    else:
        out["models"] = copy.deepcopy(named) if named else {EMBEDDINGS_MODEL: {}}
    return out


def embedding_globs(config: Mapping[str, Any]) -> dict[str, str]:
    """{model: glob} of a run that starts from embeddings (validated, after :func:`run_models`)."""
    sets = config["screen"]["embeddings"]
    if isinstance(sets, Mapping):
        return {str(k): str(v) for k, v in sets.items()}
    return {name: str(sets) for name in config["models"]}


def deep_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Recursively merge ``update`` into a copy of ``base`` (update wins)."""
    out = copy.deepcopy(dict(base))
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def demo_plates(demo: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(batch, plate) names of the simulated screen, in order: batch ``B01``, plate ``B01P01``."""
    return [
        (f"B{b + 1:02d}", f"B{b + 1:02d}P{p + 1:02d}")
        for b in range(demo["n_batches"])
        for p in range(demo["plates_per_batch"])
    ]
