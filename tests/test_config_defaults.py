"""Config flows one way: each default is stated once, in the schema; a stage's options are built
once from its section, and a resolved section is not resolved again."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from typing import Any

import pytest

from phenoica.classify.params import ClassifyOptions
from phenoica.contract import config as C
from phenoica.embed.options import EmbedOptions
from phenoica.identifiability.table1 import AlignOptions
from phenoica.models.mae import TrainOptions
from phenoica.report.gallery import GalleryOptions
from phenoica.report.inputs import ReportOptions
from phenoica.report.interactive import PageInputs
from phenoica.screen.images import ImageIngestOptions
from phenoica.studies.bilipschitz.model import TrainSettings
from phenoica.sweep.components import SweepOptions

EMBED_KEYS = [f.name for f in dataclasses.fields(EmbedOptions) if f.name != "preprocess_on_device"]
CLASSIFY_KEYS = [
    "num_boost_round",
    "concentration",
    "concentration_k",
    "min_train_samples",
    "min_test_samples",
    "n_null_guides",
    "protocol",
    "fast_train_controls",
    "fast_fold_groups",
]
TRAIN_KEYS = ["steps", "batch_size", "lr", "weight_decay", "warmup_steps", "mask_ratio", "norm_pix_loss"]
TRAIN_KEYS += ["max_images", "log_every"]
GALLERY_KEYS = ["sites_per_guide", "control_sites", "percentiles", "tile_px", "genes", "composite"]

#: Every options class built from the config, and its fields that hold a config key: field -> the
#: key's dotted path. (bilipschitz's TrainSettings.converge_tol is left out on purpose: its
#: default 0, never stop early, is the library's own, not the schema's 0.002.)
OPTIONS: dict[type, dict[str, str]] = {
    EmbedOptions: {k: f"embed.{k}" for k in EMBED_KEYS},
    ClassifyOptions: {k: f"classify.{k}" for k in CLASSIFY_KEYS},
    TrainOptions: {**{k: f"train.{k}" for k in TRAIN_KEYS}, "device": "embed.device"}
    | {"intensity_max": "embed.intensity_max"},
    SweepOptions: {"max_points": "sweep.points", "seed": "seed"},
    GalleryOptions: {**{k: f"gallery.{k}" for k in GALLERY_KEYS}, "seed": "seed"},
    ImageIngestOptions: {
        "pattern": "screen.image_pattern",
        "channels": "screen.channels",
        "chunk_images": "screen.chunk_images",
    },
    TrainSettings: {
        k: f"bilipschitz.{k}"
        for k in ("hidden", "epochs", "batch_size", "lr", "parametrization", "converge_window", "device")
    },
    AlignOptions: {
        "train_fraction": "identifiability.train_fraction",
        "ica_method": "identifiability.ica",
        "knn_k": "identifiability.knn_k",
        "seed": "seed",
    },
    ReportOptions: {"q_threshold": "hits.q_threshold", "seed": "seed"},
    PageInputs: {"q_threshold": "hits.q_threshold"},
}


def _module_files(modules: tuple[str, ...]) -> set[str]:
    return {inspect.getfile(__import__(m, fromlist=["_"])) for m in modules}


#: Library modules that read config sections (the options above, and functions taking a section).
READERS = sorted(
    {inspect.getfile(cls) for cls in OPTIONS}
    | _module_files(
        (
            "phenoica.classify.splits",
            "phenoica.biomap.gene_map",
            "phenoica.transforms.fit",
            "phenoica.studies.bilipschitz.measure",
            "phenoica.studies.disentangle.model",
        )
    )
)


def schema_value(dotted: str) -> Any:
    """The schema's default of ``dotted``, read from the schema file's entries (not through the
    code under test)."""
    key, _, rest = dotted.partition(".")
    entry = C.package_schema()["properties"][key]
    if rest:
        entry = entry["properties"][rest]
    return entry["default"]


def plain(value: Any) -> Any:
    """Tuples as lists (the schema's YAML has lists), mappings as dicts."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("cls", list(OPTIONS), ids=lambda c: c.__name__)
def test_no_options_field_restates_a_schema_default(cls):
    """A field holding a config key has no literal default: none at all, or a factory that reads
    the schema (contract.config.schema_default) and gives the schema's value."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name, dotted in OPTIONS[cls].items():
        f = fields[name]
        assert f.default is dataclasses.MISSING, (
            f"{cls.__name__}.{name} states the default {f.default!r} of config key {dotted}; the schema states it "
            "(leave it without a default, or use contract.config.schema_default)"
        )
        if f.default_factory is not dataclasses.MISSING:
            assert plain(f.default_factory()) == plain(schema_value(dotted)), f"{cls.__name__}.{name} vs {dotted}"


BUILT = {
    EmbedOptions: lambda: EmbedOptions.from_config(C.resolve_section("embed", {})),
    ClassifyOptions: lambda: ClassifyOptions.from_config(C.resolve_section("classify", {}), 0),
    TrainOptions: lambda: TrainOptions.from_config(C.resolve_section("train", {})),
    SweepOptions: lambda: SweepOptions.from_config({"transforms": {}, "classify": {}, "seed": 0}),
    GalleryOptions: lambda: GalleryOptions.from_config({"gallery": C.resolve_section("gallery", {})}),
    ImageIngestOptions: lambda: ImageIngestOptions.from_config(C.resolve_section("screen", {})),
    TrainSettings: lambda: TrainSettings.from_config(C.resolve_section("bilipschitz", {}), "digits"),
    AlignOptions: lambda: AlignOptions.for_variant(C.resolve_section("identifiability", {}), "pca", 0),
    ReportOptions: ReportOptions,
}


@pytest.mark.parametrize("cls", list(BUILT), ids=lambda c: c.__name__)
def test_options_built_from_an_empty_section_hold_the_schema_defaults(cls):
    built = BUILT[cls]()
    for name, dotted in OPTIONS[cls].items():
        assert plain(getattr(built, name)) == plain(schema_value(dotted)), f"{cls.__name__}.{name} vs {dotted}"
    assert EmbedOptions.defaults() == BUILT[EmbedOptions]()
    assert GalleryOptions.defaults() == BUILT[GalleryOptions]()


def _schema_pairs() -> set[tuple[str, Any]]:
    """(key, default) of every scalar default of the sections' keys (None left out)."""
    pairs = set()
    for section in C.package_schema()["properties"].values():
        for key, entry in (section.get("properties") or {}).items():
            value = entry.get("default")
            if isinstance(value, (str, int, float, bool)):
                pairs.add((key, value))
    return pairs


def test_no_reader_restates_a_schema_default_in_a_get():
    """``section.get("batch_size", 128)`` states a schema default a second time: the readers
    index resolved sections (or complete them from contract.config.section_defaults)."""
    pairs = _schema_pairs()
    found = []
    for path in READERS:
        for node in ast.walk(ast.parse(open(path).read())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"):
                continue
            if len(node.args) == 2 and all(isinstance(a, ast.Constant) for a in node.args):
                key, value = node.args[0].value, node.args[1].value
                if (key, value) in pairs:
                    found.append(f"{path}:{node.lineno}: .get({key!r}, {value!r})")
    assert not found, "schema defaults stated again:\n" + "\n".join(found)


@pytest.fixture
def validations(monkeypatch):
    """Counts the section validations (each builds a validator through _with_defaults)."""
    count = {"n": 0}
    real = C._with_defaults

    def counting(cls):
        count["n"] += 1
        return real(cls)

    for section in ("classify", "transforms", "embed"):
        C.section_defaults(section)  # the schema's defaults, read once per process
    monkeypatch.setattr(C, "_with_defaults", counting)
    return count


def test_a_section_is_resolved_once_on_its_way_to_the_library(validations):
    from phenoica.classify.params import lightgbm_params
    from phenoica.transforms.fit import transform_config

    options = ClassifyOptions.from_config({"num_boost_round": 5, "lightgbm": {"num_threads": 1}}, 0)
    assert validations["n"] == 1 and options.num_boost_round == 5
    resolved = C.resolve_section("classify", {"num_boost_round": 5})
    validations["n"] = 0
    assert ClassifyOptions.from_config(resolved, 0) == ClassifyOptions.from_config(resolved, 0)
    assert lightgbm_params(resolved, 0) == options.lightgbm
    assert C.as_resolved("classify", resolved) is resolved  # used as is, not copied
    t = transform_config({"n_components": 8})
    assert validations["n"] == 1 and transform_config(t) is t
    EmbedOptions.from_config(C.resolve_section("embed", {}))
    assert validations["n"] == 2


def test_the_sweep_builds_its_sections_once(validations):
    options = SweepOptions.from_config(
        {"transforms": {"n_components": 8}, "classify": {"num_boost_round": 5}, "seed": 1}
    )
    assert validations["n"] == 4  # transforms, classify, hits and sweep, once each
    scoring = options.scoring
    assert options.scoring is scoring and not scoring.concentration and scoring.num_boost_round == 5
    at = options.transforms_at(4)
    assert at["n_components"] == 4 and options.transforms["n_components"] == 8
    assert {k: v for k, v in at.items() if k != "n_components"} == {
        k: v for k, v in options.transforms.items() if k != "n_components"
    }
    assert validations["n"] == 4  # neither the scoring options nor a grid point resolves a section again


def test_updated_checks_the_changed_keys():
    resolved = C.resolve_section("classify", {})
    assert resolved.updated(concentration=False)["concentration"] is False and resolved["concentration"] is True
    with pytest.raises(C.ConfigError, match=r"config key classify.concentration: expected"):
        resolved.updated(concentration="no")
    with pytest.raises(C.ConfigError, match=r"config key classify: unknown key\(s\) \['concentrate'\]"):
        resolved.updated(concentrate=False)


#: The library modules that read a ``models`` entry's keys.
MODEL_READERS = sorted(
    _module_files(
        (
            "phenoica.models.builders",
            "phenoica.models.vit",
            "phenoica.models.spec",
            "phenoica.models.timm_models",
            "phenoica.models.openphenom",
            "phenoica.embed.jobs",
        )
    )
)


def test_no_model_reader_restates_a_model_entry_default():
    """``spec.get("pool", "mean")`` states a default of a ``models`` entry's key a second time:
    the builders read the entry resolved against the schema (contract.config.resolve_model)."""
    keys = set(C.package_schema()["$defs"]["model"]["properties"])
    found = []
    for path in MODEL_READERS:
        for node in ast.walk(ast.parse(open(path).read())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"):
                continue
            first = node.args[0] if node.args else None
            if len(node.args) == 2 and isinstance(first, ast.Constant) and first.value in keys:
                found.append(f"{path}:{node.lineno}: .get({first.value!r}, ...)")
    assert not found, "model entry defaults stated again:\n" + "\n".join(found)


def test_a_model_entry_resolves_against_the_schema_once():
    schema = C.package_schema()["$defs"]["model"]["properties"]
    resolved = C.resolve_model({"pool": "cls"})
    assert resolved["pool"] == "cls"
    assert {k: v for k, v in resolved.items() if k != "pool"} == {
        k: e["default"] for k, e in schema.items() if k != "pool"
    }
    assert C.resolve_model(resolved) is resolved  # used as is, not validated again
    with pytest.raises(C.ConfigError, match=r"config key models.NAME.pool: expected one of \['mean', 'cls'\]"):
        C.resolve_model({"pool": "max"})


def test_a_feature_extractor_takes_the_schema_defaults_of_its_entry(monkeypatch):
    """An entry without pool / block / per_channel gets the schema's (not a builder's own)."""
    from phenoica.models import builders

    schema = C.package_schema()["$defs"]["model"]["properties"]
    spec = {k: e["default"] for k, e in schema.items()}
    spec.update(img_size=8, patch_size=4, embed_dim=8, depth=1, num_heads=2, decoder_embed_dim=8)
    fx = builders.build_feature_extractor(
        {k: v for k, v in spec.items() if k not in ("pool", "block", "per_channel")}, 3
    )
    assert (fx.pool, fx.block, fx.per_channel) == (schema["pool"]["default"], schema["block"]["default"], False)
