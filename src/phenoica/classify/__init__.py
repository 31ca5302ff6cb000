"""Per-guide classification against the shared controls (Nelson et al. 2026, Tables 3, 4 and 6).

For every (guide, fold) a LightGBM binary classifier separates the guide's samples from the
shared control set; an empirical null of pseudo-guides made of control wells is scored the same
way, and the mAP readout ranks each guide's wells among the controls. Modules, one job each:

- :mod:`~phenoica.classify.params`: the classify section and LightGBM's parameters, checked by
  LightGBM itself; ``ClassifyOptions``, the settings of one job built once from the config;
- :mod:`~phenoica.classify.null`: the targets, real guides and the pseudo-guides of the null
  design (``null_guide_design``);
- :mod:`~phenoica.classify.bins`: bin boundaries found once per fold on the training controls,
  and the binned training rows shared by a block of guides;
- :mod:`~phenoica.classify.engine`: the fold engine (``classify_guides``, ``classify_shard``)
  and the score table (``SCORE_COLUMNS``);
- :mod:`~phenoica.classify.map_readout`: copairs mean average precision per guide (``guide_map``).

The score table's guide and gene means (``summarize_scores``) belong to hit calling
(:mod:`phenoica.hits.calls`).
"""
