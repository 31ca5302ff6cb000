from phenoica.sweep import SweepOptions

# The component sweep: the screen scored again at other counts of whitened components, per model
# of sweep.models (phenoica.sweep). One job per (model, variant, grid point) refits and scores, so
# the points run side by side and on separate cluster nodes; one job per model adds the chosen
# count's point, read from the main run, and writes the model's table.


rule sweep_point:
    input:
        profiles=PATHS.profiles.table,
        folds=PATHS.splits.folds,
    output:
        PATHS.sweep.point,
    log:
        log_path(RESULTS, "sweep_point", "{model}/{variant}/point_{point}"),
    benchmark:
        benchmark_path(RESULTS, "sweep_point", "{model}/{variant}/point_{point}")
    wildcard_constraints:
        point=r"\d+",
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "sweep_point", 1)
    resources:
        **rule_resources(RESOURCES, "sweep_point"),
    params:
        options=SweepOptions.from_config(config),
    script:
        "../scripts/sweep_point.py"


rule component_sweep:
    input:
        points=INPUTS.sweep_points(),
        fit_report=PATHS.transforms.fit_report,
        # the chosen count's point is the main run's own (variant tables, classify shards, mAP, retrieval)
        variants=expand(PATHS.transforms.variant, variant=SWEPT, allow_missing=True),
        shards=expand(PATHS.classify.shard, variant=SWEPT, shard=SHARDS, allow_missing=True),
        maps=INPUTS.maps(SWEPT),
        retrievals=INPUTS.maps(SWEPT, kind="retrieval"),
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
