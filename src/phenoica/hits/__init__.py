"""Hit calls: guide and gene p- and q-values from the scores and their null, and the effect sizes
that rank them.

Modules: :mod:`.calls` (``screen_calls``: guide and gene means, p- and q-values, the hit table
and the null's summary), :mod:`.effects` (the held-out distance with its interval over folds,
the ranking, saturation), :mod:`.controls` (``control_calls``: each control construct against
the same null), :mod:`.positions` (where on the plate: the plate's wells, the position effect on
the control wells, the null's layout), :mod:`.reference` (each construct against its declared
reference construct) and :mod:`.options` (``HitOptions``, ``PositionOptions``, ``ReferenceOptions``:
what the ``call_hits``, ``plate_positions`` and ``reference`` jobs read).
"""

__all__ = ["calls", "controls", "effects", "options", "positions", "reference"]
