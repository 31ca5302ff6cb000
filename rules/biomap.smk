# From scores to biology: guide and gene profiles, the gene map (neighbours, guide consistency,
# known-relationship recall, heatmap) and batch-mixing metrics per (model, variant), gathered.

from phenoica.biomap.options import BatchMetricsOptions, GeneMapOptions, ProfileOptions
from phenoica.workflow.rule_inputs import BIOMAP_KINDS


rule biomap_profiles:
    input:
        PATHS.transforms.variant,
    output:
        guides=PATHS.biomap.guide_profiles,
        genes=PATHS.biomap.gene_profiles,
    log:
        log_path(RESULTS, "biomap_profiles", "{model}/{variant}"),
    benchmark:
        benchmark_path(RESULTS, "biomap_profiles", "{model}/{variant}")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "biomap_profiles", 1)
    resources:
        **rule_resources(RESOURCES, "biomap_profiles"),
    params:
        options=ProfileOptions.from_config(config),
    script:
        "../scripts/biomap_profiles.py"


rule biomap:
    input:
        guides=PATHS.biomap.guide_profiles,
        genes=PATHS.biomap.gene_profiles,
        calls=PATHS.hits.genes,
        truth=INPUTS.truth(),
        annotations=INPUTS.biomap_annotations(),
    output:
        **{k: expand(PATHS.biomap.table, kind=k, allow_missing=True)[0] for k in BIOMAP_KINDS},
        heatmap=PATHS.biomap.heatmap,
    log:
        log_path(RESULTS, "biomap", "{model}/{variant}"),
    benchmark:
        benchmark_path(RESULTS, "biomap", "{model}/{variant}")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "biomap", 1)
    resources:
        **rule_resources(RESOURCES, "biomap"),
    params:
        options=GeneMapOptions.from_config(config),
    script:
        "../scripts/biomap.py"


rule batch_metrics:
    input:
        PATHS.transforms.variant,
    output:
        PATHS.biomap.batch_metrics,
    log:
        log_path(RESULTS, "batch_metrics", "{model}/{variant}"),
    benchmark:
        benchmark_path(RESULTS, "batch_metrics", "{model}/{variant}")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "batch_metrics", 1)
    resources:
        **rule_resources(RESOURCES, "batch_metrics"),
    params:
        options=BatchMetricsOptions.from_config(config),
    script:
        "../scripts/batch_metrics.py"


rule gather_biomap:
    input:
        **{
            k: expand(PATHS.biomap.table, model=MODELS, variant=VARIANTS, kind=k)
            for k in (*BIOMAP_KINDS, "batch_metrics")
        },
    output:
        **{k: expand(PATHS.biomap.gathered, kind=k)[0] for k in (*BIOMAP_KINDS, "batch_metrics")},
    log:
        log_path(RESULTS, "gather_biomap"),
    benchmark:
        benchmark_path(RESULTS, "gather_biomap")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "gather_biomap", 1)
    resources:
        **rule_resources(RESOURCES, "gather_biomap"),
    script:
        "../scripts/gather_biomap.py"
