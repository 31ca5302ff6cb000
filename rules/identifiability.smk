# Identifiability: how well two models' embeddings of the same images align under
# permutation, rigid, linear and ICA maps (Nelson et al. 2026 Table 1), per variant; and, where the
# screen has ground-truth factors (the demo), how well each variant recovers them.


rule align:
    input:
        lambda w: expand(OUT.transform.variant, model=MODELS, variant=w.variant),
    output:
        OUT.identifiability.align,
    log:
        log_file("align", "{variant}"),
    benchmark:
        benchmark_file("align", "{variant}")
    conda:
        ENVS
    threads: rule_threads("align", 2)
    resources:
        **rule_resources("align"),
    params:
        models=MODELS,
        settings=wf.job_params(config, "identifiability", "align"),
        seed=config["seed"],
    script:
        "../scripts/align.py"


rule structural:
    input:
        variant=OUT.transform.variant,
        factors=expand(OUT.screen.factors, plate=PLATES),
    output:
        OUT.identifiability.structural,
    log:
        log_file("structural", "{model}/{variant}"),
    benchmark:
        benchmark_file("structural", "{model}/{variant}")
    conda:
        ENVS
    threads: rule_threads("structural", 1)
    resources:
        **rule_resources("structural"),
    params:
        settings=wf.job_params(config, "identifiability", "structural"),
        seed=config["seed"],
    script:
        "../scripts/structural.py"


rule gather_identifiability:
    input:
        align=align_files(),
        structural=structural_files(),
    output:
        align=OUT.identifiability.table1,
        structural=OUT.identifiability.structural_table,
    log:
        log_file("gather_identifiability"),
    benchmark:
        benchmark_file("gather_identifiability")
    conda:
        ENVS
    threads: rule_threads("gather_identifiability", 1)
    resources:
        **rule_resources("gather_identifiability"),
    script:
        "../scripts/gather_identifiability.py"
