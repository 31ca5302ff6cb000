"""Model entries and the options of the train_mae and embed jobs as the workflow builds them: from
a config :func:`phenoica.contract._config.validate_config` filled (every default from the schema)."""

from __future__ import annotations

from typing import Any, Mapping

from phenoica.contract import validate_config
from phenoica.embed import EmbedOptions
from phenoica.models import TrainOptions

#: The name the entries below take in their config.
MODEL = "m"


def model_entry(spec: Mapping[str, Any] | None = None, **keys: Any) -> dict[str, Any]:
    """The ``models`` entry of ``spec`` and ``keys``, every other key at the schema's default."""
    return validate_config({"models": {MODEL: {**(spec or {}), **keys}}})["models"][MODEL]


def embed_options(spec: Mapping[str, Any] | None = None, **embed: Any) -> EmbedOptions:
    """The ``embed`` job's options of model entry ``spec`` (None: the schema's entry) and the
    ``embed`` keys ``embed``."""
    config = validate_config({"models": {MODEL: dict(spec or {})}, "embed": embed})
    return EmbedOptions.from_config(config, model=MODEL)


def train_options(spec: Mapping[str, Any], seed: int = 0, device: str = "cpu", **train: Any) -> TrainOptions:
    """The ``train_mae`` job's options of model entry ``spec``, the workflow's ``seed``, the
    ``embed.device`` and the ``train`` keys ``train``."""
    config = validate_config({"models": {MODEL: dict(spec)}, "train": train, "embed": {"device": device}, "seed": seed})
    return TrainOptions.from_config(config, model=MODEL)
