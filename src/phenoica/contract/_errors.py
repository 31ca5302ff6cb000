"""The error a configuration that does not match the schema or its rules raises, defined once
(raised by :mod:`phenoica.contract._config`, the stage options and the model builders in
:mod:`phenoica.models`)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value that does not match the schema."""
