# Post-processing variants (base, pca, pca_ica, pca_rand): fitted once per model, saved, and
# applied to every profile row; and the batch-effect folds the classifiers use.

if not config["transforms"]["frozen"]:

    rule fit_transforms:
        input:
            f"{RESULTS}/profiles/{{model}}.parquet",
        output:
            transforms=[f"{RESULTS}/transforms/{{model}}/{v}.npz" for v in VARIANTS],
            fit_report=f"{RESULTS}/transforms/{{model}}/fit_report.json",
        log:
            f"{RESULTS}/logs/fit_transforms/{{model}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/fit_transforms/{{model}}.tsv"
        conda:
            ENVS
        threads: rule_threads("fit_transforms", 2)
        resources:
            **rule_resources("fit_transforms"),
        params:
            transforms=wf.job_params(config, "transforms", "fit_transforms"),
            seed=config["seed"],
        script:
            "../scripts/fit_transforms.py"


rule apply_transform:
    input:
        profiles=f"{RESULTS}/profiles/{{model}}.parquet",
        transform=lambda w: f"{transform_dir(w.model)}/{w.variant}.npz",
    output:
        f"{RESULTS}/variants/{{model}}/{{variant}}.parquet",
    log:
        f"{RESULTS}/logs/apply_transform/{{model}}/{{variant}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/apply_transform/{{model}}/{{variant}}.tsv"
    conda:
        ENVS
    threads: rule_threads("apply_transform", 1)
    resources:
        **rule_resources("apply_transform"),
    script:
        "../scripts/apply_transform.py"


rule splits:
    input:
        f"{RESULTS}/profiles/{{model}}.parquet",
    output:
        f"{RESULTS}/splits/{{model}}.parquet",
    log:
        f"{RESULTS}/logs/splits/{{model}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/splits/{{model}}.tsv"
    conda:
        ENVS
    threads: rule_threads("splits", 1)
    resources:
        **rule_resources("splits"),
    params:
        splits=wf.splits_params(config),
    script:
        "../scripts/splits.py"


rule component_sweep:
    input:
        profiles=f"{RESULTS}/profiles/{{model}}.parquet",
        folds=f"{RESULTS}/splits/{{model}}.parquet",
        fit_report=f"{RESULTS}/transforms/{{model}}/fit_report.json",
    output:
        f"{RESULTS}/sweep/{{model}}.parquet",
    log:
        f"{RESULTS}/logs/component_sweep/{{model}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/component_sweep/{{model}}.tsv"
    conda:
        ENVS
    threads: rule_threads("component_sweep", 1)
    resources:
        **rule_resources("component_sweep"),
    params:
        transforms=wf.job_params(config, "transforms", "component_sweep"),
        classify=wf.job_params(config, "classify", "component_sweep"),
        seed=config["seed"],
    script:
        "../scripts/component_sweep.py"
