from phenoica.classify import SplitOptions

# The batch-effect folds the classifiers use: leave-one-batch-out, or in-distribution repeats
# (phenoica.classify._splits).


rule splits:
    input:
        PATHS.profiles.table,
    output:
        PATHS.splits.folds,
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
        options=SplitOptions.from_config(config),
    script:
        "../scripts/splits.py"
