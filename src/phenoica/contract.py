"""Values of the data contract that several stages write and read, defined once.

- :data:`OK` / :data:`SKIPPED`: the ``status`` of a row of the classifier scores (written by
  :mod:`phenoica.classify`, read by :mod:`phenoica.report`); a skipped row says why in ``reason``.
"""

from __future__ import annotations

#: A scored (guide, fold) row of the classifier scores.
OK = "ok"
#: A (guide, fold) row that could not be scored (too few samples...); ``reason`` says why.
SKIPPED = "skipped"
