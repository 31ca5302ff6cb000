from phenoica.classify.options import ClassifyOptions, MapReadoutOptions

# LightGBM per guide (and per null pseudo-guide) vs the shared controls, per (model, variant,
# gene shard); the copairs mAP readout per (model, variant); one gather of every shard and mAP
# table (the hit calls on them: rules/hits.smk).


rule classify:
    input:
        variant=PATHS.transforms.variant,
        folds=PATHS.splits.folds,
    output:
        PATHS.classify.shard,
    log:
        log_path(RESULTS, "classify", "{model}/{variant}/shard_{shard}"),
    benchmark:
        benchmark_path(RESULTS, "classify", "{model}/{variant}/shard_{shard}")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "classify", 1)
    resources:
        **rule_resources(RESOURCES, "classify"),
    params:
        # what a shard's scores depend on (hit-call and mAP settings rerun nothing here)
        options=ClassifyOptions.from_config(config),
    script:
        "../scripts/classify.py"


rule map_readout:
    input:
        PATHS.transforms.variant,
    output:
        PATHS.classify.map,
    log:
        log_path(RESULTS, "map_readout", "{model}/{variant}"),
    benchmark:
        benchmark_path(RESULTS, "map_readout", "{model}/{variant}")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "map_readout", 1)
    resources:
        **rule_resources(RESOURCES, "map_readout"),
    params:
        options=MapReadoutOptions.from_config(config),
    script:
        "../scripts/map_readout.py"


rule gather_scores:
    input:
        shards=expand(PATHS.classify.shard, model=MODELS, variant=VARIANTS, shard=SHARDS),
        maps=INPUTS.maps(),
    output:
        guide_folds=PATHS.classify.guide_folds,
        controls=PATHS.classify.controls,
        maps=PATHS.classify.maps,
    log:
        log_path(RESULTS, "gather_scores"),
    benchmark:
        benchmark_path(RESULTS, "gather_scores")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "gather_scores", 1)
    resources:
        **rule_resources(RESOURCES, "gather_scores"),
    script:
        "../scripts/gather_scores.py"
