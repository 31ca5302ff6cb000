"""The classifier score table's contract, defined once: its columns (one row per (guide, fold))
and the values of its ``status`` column. Written by :mod:`phenoica.classify`
(``classify.engine.classify_shard``), read by :mod:`phenoica.hits` and :mod:`phenoica.report`; a
skipped row says why in its ``reason`` column."""

from __future__ import annotations

from phenoica.contract._screen_data import GENE, GUIDE

SCORE_COLUMNS: tuple[str, ...] = (
    "model",
    "variant",
    GENE,
    GUIDE,
    "is_null_guide",
    "fold",
    "n_train_pos",
    "n_train_neg",
    "n_test_pos",
    "n_test_neg",
    "auroc",
    "distance_sd",
    "distance_se",
    "sparsity",
    "concentration",
    "auroc_top",
    "auroc_rest",
    "status",
    "reason",
)
#: The integer and the float columns of ``SCORE_COLUMNS``.
SCORE_INT_COLUMNS: tuple[str, ...] = ("n_train_pos", "n_train_neg", "n_test_pos", "n_test_neg")
SCORE_FLOAT_COLUMNS: tuple[str, ...] = (
    "auroc",
    "distance_sd",
    "distance_se",
    "sparsity",
    "concentration",
    "auroc_top",
    "auroc_rest",
)


#: A scored (guide, fold) row of the classifier scores.
OK = "ok"
#: A (guide, fold) row that could not be scored (too few samples...); ``reason`` says why.
SKIPPED = "skipped"
