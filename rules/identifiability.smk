from phenoica.identifiability import StructuralOptions, Table1Options

# Identifiability: how well two models' embeddings of the same images align under
# permutation, rigid, linear and ICA maps (Nelson et al. 2026 Table 1), per variant; and, where the
# screen has ground-truth factors (the demo), how well each variant recovers them.


rule align:
    input:
        INPUTS.align_tables,
    output:
        INPUTS.variant_files(PATHS.identifiability.align),
    log:
        log_path(RESULTS, "align", INPUTS.align_job),
    benchmark:
        benchmark_path(RESULTS, "align", INPUTS.align_job)
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "align", 2)
    resources:
        **rule_resources(RESOURCES, "align"),
    params:
        options=Table1Options.from_config(config),
        model_names=MODELS,
        variants=INPUTS.job_variants,
    script:
        "../scripts/align.py"


rule structural:
    input:
        variants=INPUTS.variant_files(PATHS.transforms.variant),
        factors=expand(PATHS.screen.factors, plate=PLATES),
    output:
        INPUTS.variant_files(PATHS.identifiability.structural),
    log:
        log_path(RESULTS, "structural", INPUTS.variant_job),
    benchmark:
        benchmark_path(RESULTS, "structural", INPUTS.variant_job)
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "structural", 1)
    resources:
        **rule_resources(RESOURCES, "structural"),
    params:
        options=StructuralOptions.from_config(config),
        variants=INPUTS.job_variants,
    script:
        "../scripts/structural.py"


rule gather_identifiability:
    input:
        align=INPUTS.aligns(),
        structural=INPUTS.structurals(),
    output:
        align=PATHS.identifiability.table1,
        structural=PATHS.identifiability.structural_table,
    log:
        log_path(RESULTS, "gather_identifiability"),
    benchmark:
        benchmark_path(RESULTS, "gather_identifiability")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "gather_identifiability", 1)
    resources:
        **rule_resources(RESOURCES, "gather_identifiability"),
    script:
        "../scripts/gather_identifiability.py"
