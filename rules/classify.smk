# LightGBM per guide (and per null pseudo-guide) vs the shared controls, per (model, variant,
# gene shard); the copairs mAP readout per (model, variant); one gather of all scores that also
# calls hits (p- and q-values per guide and gene).


rule classify:
    input:
        variant=f"{RESULTS}/variants/{{model}}/{{variant}}.parquet",
        folds=f"{RESULTS}/splits/{{model}}.parquet",
    output:
        f"{RESULTS}/scores/{{model}}/{{variant}}/shard_{{shard}}.parquet",
    log:
        f"{RESULTS}/logs/classify/{{model}}/{{variant}}/shard_{{shard}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/classify/{{model}}/{{variant}}/shard_{{shard}}.tsv"
    conda:
        ENVS
    threads: rule_threads("classify", 1)
    resources:
        **rule_resources("classify"),
    params:
        # only the keys that change a shard's scores (hit-call and mAP settings rerun nothing here)
        classify=wf.job_params(config, "classify", "classify"),
        seed=config["seed"],
        n_shards=config["classify"]["n_shards"],
    script:
        "../scripts/classify.py"


rule map_readout:
    input:
        f"{RESULTS}/variants/{{model}}/{{variant}}.parquet",
    output:
        f"{RESULTS}/scores/{{model}}/{{variant}}/map.parquet",
    log:
        f"{RESULTS}/logs/map_readout/{{model}}/{{variant}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/map_readout/{{model}}/{{variant}}.tsv"
    conda:
        ENVS
    threads: rule_threads("map_readout", 1)
    resources:
        **rule_resources("map_readout"),
    params:
        seed=config["seed"],
        null_size=config["classify"]["map_null_size"],
    script:
        "../scripts/map_readout.py"


rule gather_scores:
    input:
        shards=[f"{RESULTS}/scores/{m}/{v}/shard_{s}.parquet" for m in MODELS for v in VARIANTS for s in SHARDS],
        maps=map_files(),
    output:
        guide_folds=f"{RESULTS}/scores/guide_folds.parquet",
        guides=f"{RESULTS}/scores/guides.parquet",
        genes=f"{RESULTS}/scores/genes.parquet",
        maps=f"{RESULTS}/scores/map.parquet",
        hits=f"{RESULTS}/scores/hits.parquet",
        null=f"{RESULTS}/scores/null.parquet",
    log:
        f"{RESULTS}/logs/gather_scores.log",
    benchmark:
        f"{RESULTS}/benchmarks/gather_scores.tsv"
    conda:
        ENVS
    threads: rule_threads("gather_scores", 1)
    resources:
        **rule_resources("gather_scores"),
    params:
        null_model=config["classify"]["null_model"],
        q_threshold=config["classify"]["q_threshold"],
        n_null_guides=config["classify"]["n_null_guides"],
    script:
        "../scripts/gather_scores.py"
