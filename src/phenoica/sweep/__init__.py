"""The component sweep: the screen scored again at other counts of whitened components, above the
stages it reruns (variants, classify, hits, the mAP readout and the batch classifier).

Modules: :mod:`.component_sweep` (``sweep_model``, ``sweep_grid``, ``MainPoint``,
``chosen_count``: the sweep of one model) and :mod:`.options` (``SweepOptions``: what the
``component_sweep`` job reads).
"""

__all__ = ["component_sweep", "options"]
