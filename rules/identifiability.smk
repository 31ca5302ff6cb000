# Identifiability: how well two models' embeddings of the same images align under
# permutation, rigid, linear and ICA maps (Nelson et al. 2026 Table 1), per variant; and, where the
# screen has ground-truth factors (the demo), how well each variant recovers them.


rule align:
    input:
        lambda w: [f"{RESULTS}/variants/{m}/{w.variant}.parquet" for m in MODELS],
    output:
        f"{RESULTS}/identifiability/align/{{variant}}.parquet",
    log:
        f"{RESULTS}/logs/align/{{variant}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/align/{{variant}}.tsv"
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
        variant=f"{RESULTS}/variants/{{model}}/{{variant}}.parquet",
        factors=[f"{RESULTS}/screen/factors/{p}.parquet" for p in PLATES],
    output:
        f"{RESULTS}/identifiability/structural/{{model}}/{{variant}}.parquet",
    log:
        f"{RESULTS}/logs/structural/{{model}}/{{variant}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/structural/{{model}}/{{variant}}.tsv"
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
        align=f"{RESULTS}/identifiability/table1.parquet",
        structural=f"{RESULTS}/identifiability/structural.parquet",
    log:
        f"{RESULTS}/logs/gather_identifiability.log",
    benchmark:
        f"{RESULTS}/benchmarks/gather_identifiability.tsv"
    conda:
        ENVS
    threads: rule_threads("gather_identifiability", 1)
    resources:
        **rule_resources("gather_identifiability"),
    script:
        "../scripts/gather_identifiability.py"
