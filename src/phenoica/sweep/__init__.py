"""The component sweep: the screen scored again at other counts of whitened components, above the
stages it reruns (variants, classify, hits, the mAP readout and the batch classifier).

Modules: :mod:`.component_sweep` (the sweep of one model: ``sweep_point``, one grid point of one
variant, a ``sweep_point`` job; ``chosen_point`` and ``gather_sweep``, the ``component_sweep``
job; ``sweep_model``, all of it in one process; ``spaced_counts``, ``sweep_grid``, ``MainPoint``,
``chosen_count``) and :mod:`.options` (``SweepOptions``: what both jobs read).
"""

__all__ = ["component_sweep", "options"]
