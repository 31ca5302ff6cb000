# LightGBM per guide (and per null pseudo-guide) vs the shared controls, per (model, variant,
# gene shard); the copairs mAP readout per (model, variant); one gather of all scores that also
# calls hits (p- and q-values per guide and gene).


rule classify:
    input:
        variant=OUT.transforms.variant,
        folds=OUT.splits.folds,
    output:
        OUT.classify.shard,
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
        # only the keys that change a shard's scores (hit-call and mAP settings rerun nothing here)
        **rule_params(config, "classify"),
    script:
        "../scripts/classify.py"


rule map_readout:
    input:
        OUT.transforms.variant,
    output:
        OUT.classify.map,
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
        **rule_params(config, "map_readout"),
    script:
        "../scripts/map_readout.py"


rule gather_scores:
    input:
        shards=expand(OUT.classify.shard, model=MODELS, variant=VARIANTS, shard=SHARDS),
        maps=IN.maps(),
    output:
        guide_folds=OUT.classify.guide_folds,
        guides=OUT.classify.guides,
        genes=OUT.classify.genes,
        maps=OUT.classify.maps,
        hits=OUT.classify.hits,
        null=OUT.classify.null,
    log:
        log_path(RESULTS, "gather_scores"),
    benchmark:
        benchmark_path(RESULTS, "gather_scores")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "gather_scores", 1)
    resources:
        **rule_resources(RESOURCES, "gather_scores"),
    params:
        **rule_params(config, "gather_scores"),
    script:
        "../scripts/gather_scores.py"
