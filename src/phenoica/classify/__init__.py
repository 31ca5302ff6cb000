"""Per-guide classification against the shared controls (Nelson et al. 2026, Tables 3, 4 and 6).

For every (guide, fold) a LightGBM binary classifier separates the guide's samples from the
shared control set; an empirical null of pseudo-guides made of control wells is scored the same
way, and the mAP readout ranks each guide's wells among the controls. Modules, one job each:

- :mod:`~phenoica.classify.options`: what the classify, map_readout and splits jobs read
  (``ClassifyOptions``, ``MapReadoutOptions``, ``SplitOptions``), their params;
- :mod:`~phenoica.classify.lightgbm_params`: LightGBM's parameters, checked by LightGBM itself;
- :mod:`~phenoica.classify.capacity`: what the readouts can score on a screen, counted at the door;
- :mod:`~phenoica.classify.splits` and :mod:`~phenoica.classify.protocol`: the folds and the training sets;
- :mod:`~phenoica.classify.null`: the targets, real guides and the pseudo-guides of the null
  design (``null_guide_design``);
- :mod:`~phenoica.classify.bins`: bin boundaries found once per fold on the training controls,
  and the binned training rows shared by a block of guides;
- :mod:`~phenoica.classify.features`: a profile table's feature matrix (``feature_matrix``), as
  the classifiers and the mAP readout read it;
- :mod:`~phenoica.classify.distance`: the held-out distance of a guide from the controls in
  control SDs, the effect size each (guide, fold) carries beside its AUROC;
- :mod:`~phenoica.classify.engine`: the fold engine (``classify_guides``, ``classify_shard``),
  writing the score table (its columns: ``phenoica.contract.score_table.SCORE_COLUMNS``);
- :mod:`~phenoica.classify.map_readout`: copairs mean average precision per guide (``guide_map``),
  with its p-values drawn until their calls are settled (:mod:`~phenoica.classify.map_null`).

The score table's guide and gene means (``summarize_scores``) belong to hit calling
(:mod:`phenoica.hits.calls`).
"""

__all__ = [
    "bins",
    "capacity",
    "distance",
    "engine",
    "features",
    "lightgbm_params",
    "map_null",
    "map_readout",
    "null",
    "options",
    "protocol",
    "splits",
]
