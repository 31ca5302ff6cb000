"""Hit calls: guide and gene p- and q-values from the scores and their null, and the effect sizes
that rank them.

Modules: :mod:`._screen_calls` (``screen_calls``: the guide and gene means, then everything
below, as the gather step writes it), :mod:`._calls` (the null's fit, the guide and gene p- and
q-values, the null's summary), :mod:`._readouts` (the hit table: every registered readout's calls of
each guide, and their agreement), :mod:`._call_counts` (calls per q threshold; recall and observed FDR
against known truth), :mod:`._effects` (the held-out distance with its interval over folds,
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
        "_call_counts": ["hit_counts"],
        "_calls": ["NullFit", "call_guides"],
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
        "_readouts": ["agreement_classes", "hit_table", "readout_agreement"],
        "_reference": [
            "Contrast",
            "contrast_auroc",
            "null_contrasts",
            "null_size",
            "pair_contrasts",
            "reference_files",
            "reference_pairs",
        ],
        "_screen_calls": ["GENE_SUMMARY_COLUMNS", "GUIDE_SUMMARY_COLUMNS", "screen_calls", "summarize_scores"],
        "_tail": ["fit_tail", "leave_one_out_pareto"],
        "_truth": ["pooled_recall_fdr", "recall_fdr"],
    },
)
