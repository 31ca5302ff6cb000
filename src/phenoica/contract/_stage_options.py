"""A stage's settings as one typed, immutable options object, built once from the validated config.

Each stage declares what its jobs read as a :class:`typing.NamedTuple` whose fields name their
config key (``Annotated[int, Setting("classify.num_boost_round")]``), decorated with
:func:`stage_options` and the rules that take it. The same object is

- the rule's params (``params: options=ClassifyOptions.from_config(config)``): Snakemake records a
  param by its ``repr``, and an options object's ``repr`` holds only what the stage's output
  depends on, so a change of one of those keys reruns the stage and nothing else does: the
  run-time fields (``Setting(..., run_time=True)``: speed, memory, storage layout, logs, which
  jobs exist) are left out, and so are the fields :meth:`depends_on` leaves out for some values;
- what the script hands to the library (``snakemake.params.options``).

A stage that runs another stage's work again (the component sweep classifies and fits as the
main run does) holds that stage's options object as a field (``Annotated[ClassifyOptions,
composed(n_shards=1)]``), built from the same config, instead of declaring its settings again; the
fields it sets itself are fixed there (:class:`Composed`), and it derives what it runs with
``_replace``.

The schema (``phenoica/schemas/config.schema.yaml``) stays the one statement of each key's type
and default: ``from_config`` reads a config :func:`phenoica.contract.validate_config` has
filled, and states no default itself. A notebook or a test writes
``ClassifyOptions.from_config(validate_config({"classify": {...}}))``.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Callable, Mapping, NamedTuple, TypeVar, get_type_hints

from phenoica.contract._errors import ConfigError

T = TypeVar("T")


class Setting(NamedTuple):
    """Where an options field comes from.

    ``key`` is a dotted config key (``classify.num_boost_round``, ``seed``; ``{model}`` stands for
    the job's model: ``models.{model}``). ``run_time``: the key changes only speed, memory,
    storage layout, logs or which jobs exist, never a job's output, so it is no part of the
    params. ``read``: a function of the key's value giving the field (the part of a models
    entry training depends on), applied before the value is stored.
    """

    key: str
    run_time: bool = False
    read: Callable[[Any], Any] | None = None


class Composed(NamedTuple):
    """Where an options field that is another stage's options object comes from: the field's
    type (a :func:`stage_options` class), built from the same config, so that each of its
    settings is stated once, in its own class. ``fixed``: (field, value) pairs the composing
    stage sets itself (the sweep's one shard, each point's component count): those fields hold
    the value given here whatever the config says, so their keys are not read
    (:func:`settings_of` leaves them out) and the params hold the fixed value."""

    fixed: tuple[tuple[str, Any], ...] = ()


def composed(**fixed: Any) -> Composed:
    """A :class:`Composed` declaration with ``fixed`` fields: ``composed(n_shards=1)`` is
    ``Composed((("n_shards", 1),))``."""
    return Composed(tuple(sorted(fixed.items())))


#: rule name -> the options class its jobs take (filled by :func:`stage_options`).
RULE_OPTIONS: dict[str, type] = {}


def canonical(value: Any) -> Any:
    """``value`` with every mapping's keys sorted (recursively; tuples become lists): the params
    Snakemake records are compared as text, so key order must not count."""
    if isinstance(value, Mapping):
        return {str(k): canonical(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):  # an options object stays one
        return [canonical(v) for v in value]
    return value


@functools.cache
def declarations(cls: type) -> dict[str, tuple[Any, Setting | Composed]]:
    """Field name -> (its type, its :class:`Setting` or :class:`Composed`) of an options class,
    in field order; TypeError naming the field that declares neither, or both, or more than one.
    Read once per class (an options object's ``repr``, the params of every job, reads it); the
    mapping returned is shared: not to be changed."""
    hints = get_type_hints(cls, include_extras=True)
    out: dict[str, tuple[Any, Setting | Composed]] = {}
    for name in cls._fields:  # type: ignore[attr-defined]
        found = [m for m in getattr(hints[name], "__metadata__", ()) if isinstance(m, (Setting, Composed))]
        if len(found) != 1:
            raise TypeError(
                f"{cls.__name__}.{name}: declare its config key once, Annotated[type, Setting('key')], or the "
                "options class it holds, Annotated[OptionsClass, composed()]"
            )
        kind = hints[name].__origin__
        if isinstance(found[0], Composed):
            if not hasattr(kind, "from_config"):
                raise TypeError(f"{cls.__name__}.{name}: Composed needs a stage_options class, got {kind!r}")
            unknown = [f for f, _ in found[0].fixed if f not in kind._fields]
            if unknown:
                raise TypeError(f"{cls.__name__}.{name}: {kind.__name__} has no field(s) {unknown} to fix")
        out[name] = (kind, found[0])
    return out


def settings_of(cls: type) -> dict[str, Setting]:
    """Field name -> :class:`Setting` of an options class, in field order: every config key the
    class reads. A composed field's settings are named ``field.subfield`` (recursively), less the
    fields it fixes."""
    out: dict[str, Setting] = {}
    for name, (kind, declared) in declarations(cls).items():
        if isinstance(declared, Setting):
            out[name] = declared
            continue
        fixed = dict(declared.fixed)
        out.update({f"{name}.{sub}": s for sub, s in settings_of(kind).items() if sub.split(".")[0] not in fixed})
    return out


def config_value(config: Mapping[str, Any], dotted: str) -> Any:
    """The value of dotted key ``dotted`` in the (validated) ``config``; ConfigError naming the
    key when it is absent (a config that was not validated)."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise ConfigError(f"config key {dotted}: absent; expected a config validated by validate_config")
        node = node[part]
    return node


def _from_config(cls: type[T], config: Mapping[str, Any], **names: str) -> T:
    values = {}
    for name, (kind, declared) in declarations(cls).items():
        if isinstance(declared, Composed):
            values[name] = kind.from_config(config, **names)._replace(**dict(declared.fixed))
            continue
        value = copy.deepcopy(config_value(config, declared.key.format(**names)))
        values[name] = canonical(declared.read(value) if declared.read else value)
    return cls(**values)


def params_fields(options: Any) -> tuple[str, ...]:
    """The fields of ``options`` its stage's output depends on: not run-time, and among those its
    :meth:`depends_on` names when the class defines one (a scheme that draws nothing reads no seed)."""
    declared = declarations(type(options)).items()
    fields = tuple(name for name, (_, d) in declared if isinstance(d, Composed) or not d.run_time)
    narrow = getattr(options, "depends_on", None)
    return tuple(f for f in fields if f in narrow()) if narrow else fields


def _params_repr(self: Any) -> str:
    return f"{type(self).__name__}(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in params_fields(self)) + ")"


def stage_options(*rules: str) -> Callable[[type[T]], type[T]]:
    """Class decorator of a stage's options (a NamedTuple of ``Annotated[type, Setting(key)]``
    fields) taken by ``rules``: adds ``from_config(config, **names)`` (each field read from its
    key of the validated ``config``, ``{model}`` formatted from ``names``, mappings sorted) and
    the ``repr`` Snakemake records as the params (:func:`params_fields` only)."""

    def decorate(cls: type[T]) -> type[T]:
        declarations(cls)  # every field declares its key, or the class fails where it is defined
        cls.from_config = classmethod(_from_config)  # type: ignore[attr-defined]
        cls.__repr__ = _params_repr  # type: ignore[method-assign]
        for rule in rules:
            if rule in RULE_OPTIONS and RULE_OPTIONS[rule] is not cls:
                raise TypeError(f"rule {rule!r} takes {RULE_OPTIONS[rule].__name__} already, not also {cls.__name__}")
            RULE_OPTIONS[rule] = cls
        cls.rules = tuple(rules)  # type: ignore[attr-defined]
        return cls

    return decorate
