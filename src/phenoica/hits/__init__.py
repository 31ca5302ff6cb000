"""Hit calls: guide and gene p- and q-values from the scores and their null, and the effect sizes
that rank them.

Modules: :mod:`.calls` (``screen_calls``: guide and gene means, p- and q-values, the hit table
and the null's summary), :mod:`.effects` (the held-out distance with its interval over folds,
the ranking, saturation), :mod:`.controls` (``control_calls``: each control construct against
the same null) and :mod:`.options` (``HitOptions``: what the ``call_hits`` job reads).
"""

__all__ = ["calls", "controls", "effects", "options"]
