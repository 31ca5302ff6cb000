from phenoica.transforms import ApplyTransformOptions, TransformOptions

# Post-processing variants (base, pca, pca_ica, pca_rand): fitted once per model, saved, and
# applied to every profile row (phenoica.transforms), every variant of a model in one job (one
# job per variant with frozen transforms: phenoica.workflow.RuleInputs.variant_job).

if not config["transforms"]["frozen"]:

    rule fit_transforms:
        input:
            PATHS.profiles.table,
        output:
            transforms=expand(PATHS.transforms.transform, variant=VARIANTS, allow_missing=True),
            fit_report=PATHS.transforms.fit_report,
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
            options=TransformOptions.from_config(config),
        script:
            "../scripts/fit_transforms.py"


rule apply_transform:
    input:
        profiles=PATHS.profiles.table,
        transforms=INPUTS.job_transforms,
    output:
        INPUTS.variant_files(PATHS.transforms.variant),
    log:
        log_path(RESULTS, "apply_transform", INPUTS.variant_job),
    benchmark:
        benchmark_path(RESULTS, "apply_transform", INPUTS.variant_job)
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "apply_transform", 1)
    resources:
        **rule_resources(RESOURCES, "apply_transform"),
    params:
        options=ApplyTransformOptions.from_config(config),
        variants=INPUTS.job_variants,
        # the content of the frozen transforms (transforms.frozen) the job reads
        transforms=INPUTS.transforms_key,
    script:
        "../scripts/apply_transform.py"
