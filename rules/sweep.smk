from phenoica.sweep.options import SweepOptions

# The component sweep: the screen scored again at other counts of whitened components, per model
# of sweep.models (phenoica.sweep).


rule component_sweep:
    input:
        profiles=PATHS.profiles.table,
        folds=PATHS.splits.folds,
        fit_report=PATHS.transforms.fit_report,
        # the chosen count's point is the main run's own (variant tables, classify shards, mAP)
        variants=expand(PATHS.transforms.variant, variant=SWEPT, allow_missing=True),
        shards=expand(PATHS.classify.shard, variant=SWEPT, shard=SHARDS, allow_missing=True),
        maps=INPUTS.maps(SWEPT),
    output:
        PATHS.sweep.table,
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
