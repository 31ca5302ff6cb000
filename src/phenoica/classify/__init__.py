"""Per-guide classification against the shared controls (Nelson et al. 2026, Tables 3, 4 and 6).

For every (guide, fold) a LightGBM binary classifier separates the guide's samples from the
shared control set; an empirical null of pseudo-guides made of control wells is scored the same
way, and the mAP readout ranks each guide's wells among the controls. Modules, one job each:

- :mod:`~phenoica.classify._options`: what the classify, map_readout and splits jobs read
  (``ClassifyOptions``, ``MapReadoutOptions``, ``SplitOptions``), their params;
- :mod:`~phenoica.classify._lightgbm_params`: LightGBM's parameters, checked by LightGBM itself;
- :mod:`~phenoica.classify._capacity`: what the classifier and the mAP readout can score on a
  screen, counted at the door;
- :mod:`~phenoica.classify._readout_registry`: the readouts, each one registered unit
  (``register_readout``) that the door's count, the hit calls and the report loop over;
- :mod:`~phenoica.classify._splits` and :mod:`~phenoica.classify._protocol`: the folds and the training sets;
- :mod:`~phenoica.classify._null`: the targets, real guides and the pseudo-guides of the null
  design (``null_guide_design``);
- :mod:`~phenoica.classify._bins`: bin boundaries found once per fold on the training controls,
  and the binned training rows shared by a block of guides;
- :mod:`~phenoica.classify._features`: a profile table's feature matrix (``feature_matrix``), as
  the classifiers and the mAP readout read it;
- :mod:`~phenoica.classify._distance`: the held-out distance of a guide from the controls in
  control SDs, the effect size each (guide, fold) carries beside its AUROC;
- :mod:`~phenoica.classify._engine`: the fold engine (``classify_guides``, ``classify_shard``),
  writing the score table (its columns: ``phenoica.contract.SCORE_COLUMNS``);
- :mod:`~phenoica.classify._guide_model`: one guide's models, trained and scored on held-out
  sets (``score_guide_on``), with their seed (``guide_seed``);
- :mod:`~phenoica.classify._skips`: why a (guide, fold) cannot be scored, as the jobs skip it
  and the door counts it;
- :mod:`~phenoica.classify._map_readout`: copairs mean average precision per guide (``guide_map``),
  with its p-values drawn until their calls are settled (:mod:`~phenoica.classify._map_null`), and
  which null a screen can take and how deep each reaches (:mod:`~phenoica.classify._map_depth`);
- :mod:`~phenoica.classify._retrieval`: replicate retrieval across batches (``guide_retrieval``);
- :mod:`~phenoica.classify._map_job`: the map_readout job, both read off each variant's table once
  (``guide_map_files``).

The score table's guide and gene means (``summarize_scores``) belong to hit calling
(:mod:`phenoica.hits._screen_calls`).
"""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_bins": ["FoldBins"],
        "_distance": ["DISTANCE_COLUMNS", "ControlMoments", "heldout_distance_se"],
        "_engine": ["classify_guides", "classify_shard", "fold_masks"],
        "_guide_model": ["columns_dataset", "guide_seed", "score_guide", "score_guide_on"],
        "_features": ["feature_matrix"],
        "_lightgbm_params": [
            "LIGHTGBM_MIN_DATA_IN_LEAF",
            "lightgbm_names_record",
            "lightgbm_params",
            "lightgbm_report_params",
            "use_lightgbm_names",
        ],
        "_map_depth": ["grouping_share", "map_null_choice"],
        "_map_job": ["guide_map_files"],
        "_map_null": ["coupled_null_counts", "gap_drawn", "permuted_null_counts", "settled_null_counts"],
        "_map_permutation": ["WellPool", "pool_map", "well_pool"],
        "_map_readout": [
            "centered_on_plate_controls",
            "guide_map",
            "guide_map_within_plate",
            "reference_map",
            "well_profiles",
        ],
        "_null": [
            "AUTO_NULL_MAX",
            "AUTO_NULL_MIN",
            "GuideSamples",
            "NULL_GENE",
            "control_constructs",
            "control_mask",
            "control_positions",
            "guide_samples",
            "guides_of",
            "null_count",
            "null_guide_count",
            "null_guide_design",
            "null_guide_name",
            "null_layout_choice",
            "position_null_design",
            "split_control_rows",
        ],
        "_options": ["ClassifyOptions", "MapReadoutOptions", "SplitOptions"],
        "_protocol": ["PROTOCOLS", "control_strata", "training_controls", "trainings"],
        "_readout_registry": [
            "GUIDE_KEYS",
            "Readout",
            "ReadoutInputs",
            "readout_capacity",
            "register_readout",
            "registered_readouts",
            "unregister_readout",
        ],
        "_retrieval": [
            "guide_retrieval",
            "mean_retrieval",
            "retrieval_difference",
        ],
        "_splits": ["Fold", "folds_table", "leave_one_batch_out", "make_folds", "read_folds"],
    },
)
