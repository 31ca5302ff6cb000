"""Hit calls: guide and gene p- and q-values from the scores and their null, and the effect sizes
that rank them.

Modules: :mod:`._calls` (``screen_calls``: guide and gene means, p- and q-values, the hit table
and the null's summary), :mod:`._effects` (the held-out distance with its interval over folds,
the ranking, saturation), :mod:`._controls` (``control_calls``: each control construct against
the same null), :mod:`._positions` (where on the plate: the plate's wells, the position effect on
the control wells, the null's layout), :mod:`._reference` (each construct against its declared
reference construct), :mod:`._tail` (the null's Pareto tail, beyond its pseudo-guides),
:mod:`._truth` (recall and FDR against known truth) and :mod:`._options` (``HitOptions``, ``PositionOptions``, ``ReferenceOptions``:
what the ``call_hits``, ``plate_positions`` and ``reference`` jobs read).
"""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_calls": [
            "GENE_SUMMARY_COLUMNS",
            "GUIDE_SUMMARY_COLUMNS",
            "NullFit",
            "call_guides",
            "hit_counts",
            "readout_agreement",
            "screen_calls",
            "summarize_scores",
        ],
        "_controls": ["control_calls", "separating_by_model"],
        "_effects": [
            "DISTANCE_COLUMNS",
            "SATURATION_SHARE",
            "fold_interval",
            "measure_phrase",
            "saturation",
            "wells_and_folds_interval",
        ],
        "_options": ["HitOptions", "PositionOptions", "ReferenceOptions"],
        "_positions": ["plate_grid", "plate_position_files"],
        "_reference": ["reference_files"],
        "_truth": ["pooled_recall_fdr", "recall_fdr"],
    },
)
