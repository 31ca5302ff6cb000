"""Values of the data contract that several stages write and read, defined once.

- :data:`OK` / :data:`SKIPPED`: the ``status`` of a row of the classifier scores (written by
  :mod:`phenoica.classify`, read by :mod:`phenoica.report.summaries`); a skipped row says why in ``reason``.
- :class:`ConfigError`: a configuration value that does not match the schema or its rules
  (raised by :mod:`phenoica.contract.config` and by the model builders in :mod:`phenoica.models`).
- :data:`FACTOR_PREFIX`: the columns of a screen's ground-truth factors (``factor_00``...),
  written by :mod:`phenoica.screen.demo`, read by :mod:`phenoica.identifiability`.
"""

from __future__ import annotations

#: A scored (guide, fold) row of the classifier scores.
OK = "ok"
#: A (guide, fold) row that could not be scored (too few samples...); ``reason`` says why.
SKIPPED = "skipped"
#: Prefix of the ground-truth factor columns of a simulated screen (``factor_00``, ...).
FACTOR_PREFIX = "factor_"


class ConfigError(ValueError):
    """A configuration value that does not match the schema."""
