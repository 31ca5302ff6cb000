from phenoica.sweep.options import SweepOptions

# The component sweep: the screen scored again at other counts of whitened components, per model
# of sweep.models (phenoica.sweep).


rule component_sweep:
    input:
        profiles=OUT.profiles.table,
        folds=OUT.splits.folds,
        fit_report=OUT.transforms.fit_report,
        # the chosen count's point is the main run's own (variant tables, classify shards, mAP)
        variants=expand(OUT.transforms.variant, variant=SWEPT, allow_missing=True),
        shards=expand(OUT.classify.shard, variant=SWEPT, shard=SHARDS, allow_missing=True),
        maps=IN.maps(SWEPT),
    output:
        OUT.sweep.table,
    log:
        log_path(RESULTS, "component_sweep", "{model}"),
    benchmark:
        benchmark_path(RESULTS, "component_sweep", "{model}")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "component_sweep", 1)
    resources:
        **rule_resources(RESOURCES, "component_sweep"),
    params:
        options=SweepOptions.from_config(config),
    script:
        "../scripts/component_sweep.py"
