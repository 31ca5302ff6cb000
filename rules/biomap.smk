# From scores to biology: guide and gene profiles, the gene map (neighbours, guide consistency,
# known-relationship recall, heatmap) and batch-mixing metrics per (model, variant), gathered.


rule biomap_profiles:
    input:
        f"{RESULTS}/variants/{{model}}/{{variant}}.parquet",
    output:
        guides=f"{RESULTS}/biomap/{{model}}/{{variant}}/guide_profiles.parquet",
        genes=f"{RESULTS}/biomap/{{model}}/{{variant}}/gene_profiles.parquet",
    log:
        f"{RESULTS}/logs/biomap_profiles/{{model}}/{{variant}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/biomap_profiles/{{model}}/{{variant}}.tsv"
    conda:
        ENVS
    threads: rule_threads("biomap_profiles", 1)
    resources:
        **rule_resources("biomap_profiles"),
    params:
        center_on_controls=config["biomap"]["center_on_controls"],
    script:
        "../scripts/biomap_profiles.py"


rule biomap:
    input:
        guides=f"{RESULTS}/biomap/{{model}}/{{variant}}/guide_profiles.parquet",
        genes=f"{RESULTS}/biomap/{{model}}/{{variant}}/gene_profiles.parquet",
        calls=f"{RESULTS}/scores/genes.parquet",
        truth=truth_file(),
        annotations=biomap_annotation_files(),
    output:
        **{k: f"{RESULTS}/biomap/{{model}}/{{variant}}/{k}.parquet" for k in BIOMAP_KINDS},
        heatmap=f"{RESULTS}/biomap/{{model}}/{{variant}}/heatmap.png",
    log:
        f"{RESULTS}/logs/biomap/{{model}}/{{variant}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/biomap/{{model}}/{{variant}}.tsv"
    conda:
        ENVS
    threads: rule_threads("biomap", 1)
    resources:
        **rule_resources("biomap"),
    params:
        biomap=wf.job_params(config, "biomap", "biomap"),
        seed=config["seed"],
    script:
        "../scripts/biomap.py"


rule batch_metrics:
    input:
        f"{RESULTS}/variants/{{model}}/{{variant}}.parquet",
    output:
        f"{RESULTS}/biomap/{{model}}/{{variant}}/batch_metrics.parquet",
    log:
        f"{RESULTS}/logs/batch_metrics/{{model}}/{{variant}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/batch_metrics/{{model}}/{{variant}}.tsv"
    conda:
        ENVS
    threads: rule_threads("batch_metrics", 1)
    resources:
        **rule_resources("batch_metrics"),
    params:
        seed=config["seed"],
        n_neighbors=config["biomap"]["batch_neighbors"],
        max_samples=config["biomap"]["batch_max_samples"],
    script:
        "../scripts/batch_metrics.py"


rule gather_biomap:
    input:
        **{
            k: [f"{RESULTS}/biomap/{m}/{v}/{k}.parquet" for m in MODELS for v in VARIANTS]
            for k in (*BIOMAP_KINDS, "batch_metrics")
        },
    output:
        **{k: f"{RESULTS}/biomap/{k}.parquet" for k in (*BIOMAP_KINDS, "batch_metrics")},
    log:
        f"{RESULTS}/logs/gather_biomap.log",
    benchmark:
        f"{RESULTS}/benchmarks/gather_biomap.tsv"
    conda:
        ENVS
    threads: rule_threads("gather_biomap", 1)
    resources:
        **rule_resources("gather_biomap"),
    script:
        "../scripts/gather_biomap.py"
