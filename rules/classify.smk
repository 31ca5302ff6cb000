from phenoica.classify import ClassifyOptions, MapReadoutOptions

# LightGBM per guide (and per null pseudo-guide) vs the shared controls, per (model, variant,
# gene shard); the copairs mAP readout of every variant of a model in one job (per (model,
# variant) with frozen transforms); one gather of every shard and mAP table (the hit calls on
# them: rules/hits.smk).


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
        INPUTS.variant_files(PATHS.transforms.variant),
    output:
        maps=INPUTS.variant_files(PATHS.classify.map),
        retrieval=INPUTS.variant_files(PATHS.classify.retrieval),
    log:
        log_path(RESULTS, "map_readout", INPUTS.variant_job),
    benchmark:
        benchmark_path(RESULTS, "map_readout", INPUTS.variant_job)
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "map_readout", 1)
    resources:
        **rule_resources(RESOURCES, "map_readout"),
    params:
        options=MapReadoutOptions.from_config(config),
        variants=INPUTS.job_variants,
    script:
        "../scripts/map_readout.py"


rule gather_scores:
    input:
        shards=expand(PATHS.classify.shard, model=SCORED, variant=VARIANTS, shard=SHARDS),
        maps=INPUTS.maps(),
        retrieval=INPUTS.maps(kind="retrieval"),
    output:
        guide_folds=PATHS.classify.guide_folds,
        controls=PATHS.classify.controls,
        maps=PATHS.classify.maps,
        retrieval=PATHS.classify.retrievals,
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
