# Post-processing variants (base, pca, pca_ica, pca_rand): fitted once per model, saved, and
# applied to every profile row; and the batch-effect folds the classifiers use.

if not config["transforms"]["frozen"]:

    rule fit_transforms:
        input:
            OUT.embed.profiles,
        output:
            transforms=expand(OUT.transform.transform, variant=VARIANTS, allow_missing=True),
            fit_report=OUT.transform.fit_report,
        log:
            log_path(RESULTS, "fit_transforms", "{model}"),
        benchmark:
            benchmark_path(RESULTS, "fit_transforms", "{model}")
        conda:
            ENVS
        threads: rule_threads(RESOURCES, "fit_transforms", 2)
        resources:
            **rule_resources(RESOURCES, "fit_transforms"),
        params:
            transforms=job_params(config, "transforms", "fit_transforms"),
            seed=config["seed"],
        script:
            "../scripts/fit_transforms.py"


rule apply_transform:
    input:
        profiles=OUT.embed.profiles,
        transform=lambda w: IN.transform(w.model, w.variant),
    output:
        OUT.transform.variant,
    log:
        log_path(RESULTS, "apply_transform", "{model}/{variant}"),
    benchmark:
        benchmark_path(RESULTS, "apply_transform", "{model}/{variant}")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "apply_transform", 1)
    resources:
        **rule_resources(RESOURCES, "apply_transform"),
    script:
        "../scripts/apply_transform.py"


rule splits:
    input:
        OUT.embed.profiles,
    output:
        OUT.transform.folds,
    log:
        log_path(RESULTS, "splits", "{model}"),
    benchmark:
        benchmark_path(RESULTS, "splits", "{model}")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "splits", 1)
    resources:
        **rule_resources(RESOURCES, "splits"),
    params:
        splits=splits_params(config),
    script:
        "../scripts/splits.py"


rule component_sweep:
    input:
        profiles=OUT.embed.profiles,
        folds=OUT.transform.folds,
        fit_report=OUT.transform.fit_report,
        # the chosen count's point is the main run's own (variant tables, classify shards, mAP)
        variants=expand(OUT.transform.variant, variant=SWEPT, allow_missing=True),
        shards=expand(OUT.classify.shard, variant=SWEPT, shard=SHARDS, allow_missing=True),
        maps=IN.maps(SWEPT),
    output:
        OUT.transform.sweep,
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
        transforms=job_params(config, "transforms", "component_sweep"),
        classify=job_params(config, "classify", "component_sweep"),
        seed=config["seed"],
    script:
        "../scripts/component_sweep.py"
