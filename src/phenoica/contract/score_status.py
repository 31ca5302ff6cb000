"""The ``status`` of a row of the classifier scores, defined once: written by
:mod:`phenoica.classify`, read by :mod:`phenoica.hits` and :mod:`phenoica.report`. A skipped row
says why in its ``reason`` column."""

from __future__ import annotations

#: A scored (guide, fold) row of the classifier scores.
OK = "ok"
#: A (guide, fold) row that could not be scored (too few samples...); ``reason`` says why.
SKIPPED = "skipped"
