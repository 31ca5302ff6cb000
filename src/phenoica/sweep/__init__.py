"""The component sweep: the screen scored again at other counts of whitened components, above the
stages it reruns (variants, classify, hits, the mAP readout and the batch classifier).

Modules: :mod:`._component_sweep` (the sweep of one model: ``sweep_point``, one grid point of one
variant, a ``sweep_point`` job; ``chosen_point`` and ``gather_sweep``, the ``component_sweep``
job; ``sweep_model``, all of it in one process; ``spaced_counts``, ``sweep_grid``, ``sweep_genes``,
``MainPoint``, ``chosen_count``) and :mod:`._options` (``SweepOptions``: what both jobs read).
"""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_component_sweep": [
            "MainPoint",
            "chosen_count",
            "chosen_point",
            "first_null_guides",
            "gather_sweep",
            "spaced_counts",
            "sweep_grid",
            "sweep_genes",
            "sweep_model",
            "sweep_point",
        ],
        "_options": ["SweepOptions"],
    },
)
