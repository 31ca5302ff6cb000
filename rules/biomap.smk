# From scores to biology: guide and gene profiles, the gene map (neighbours, guide consistency,
# known-relationship recall, heatmap) and batch-mixing metrics of every (model, variant), gathered;
# one job per model does all its variants (per variant with frozen transforms, the gene map
# excepted: phenoica.workflow.RuleInputs.variant_job).

from phenoica.biomap import BatchMetricsOptions, GeneMapOptions, ProfileOptions
from phenoica.workflow import BIOMAP_KINDS


rule biomap_profiles:
    input:
        INPUTS.variant_files(PATHS.transforms.variant),
    output:
        guides=INPUTS.variant_files(PATHS.biomap.guide_profiles),
        genes=INPUTS.variant_files(PATHS.biomap.gene_profiles),
    log:
        log_path(RESULTS, "biomap_profiles", INPUTS.variant_job),
    benchmark:
        benchmark_path(RESULTS, "biomap_profiles", INPUTS.variant_job)
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "biomap_profiles", 1)
    resources:
        **rule_resources(RESOURCES, "biomap_profiles"),
    params:
        options=ProfileOptions.from_config(config),
        variants=INPUTS.job_variants,
    script:
        "../scripts/biomap_profiles.py"


# One job per scored model (classify.models), frozen transforms too: every map reads the gene calls of the whole screen,
# which a change of any variant's table rewrites, so the maps of all variants rerun together.
rule biomap:
    input:
        guides=INPUTS.variant_files(PATHS.biomap.guide_profiles, per_model=True),
        genes=INPUTS.variant_files(PATHS.biomap.gene_profiles, per_model=True),
        calls=PATHS.hits.genes,
        truth=INPUTS.truth(),
        annotations=INPUTS.biomap_annotations(),
    output:
        **{
            k: INPUTS.variant_files(expand(PATHS.biomap.table, kind=k, allow_missing=True)[0], per_model=True)
            for k in BIOMAP_KINDS
        },
        heatmap=INPUTS.variant_files(PATHS.biomap.heatmap, per_model=True),
    log:
        log_path(RESULTS, "biomap", "{model}"),
    benchmark:
        benchmark_path(RESULTS, "biomap", "{model}")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "biomap", 1)
    resources:
        **rule_resources(RESOURCES, "biomap"),
    params:
        options=GeneMapOptions.from_config(config),
        variants=INPUTS.job_variants,
        # the content of the annotation files (biomap.annotations, the EFAAR wheel)
        annotations=INPUTS.annotations_key(),
    script:
        "../scripts/biomap.py"


rule batch_metrics:
    input:
        INPUTS.variant_files(PATHS.transforms.variant),
    output:
        INPUTS.variant_files(PATHS.biomap.batch_metrics),
    log:
        log_path(RESULTS, "batch_metrics", INPUTS.variant_job),
    benchmark:
        benchmark_path(RESULTS, "batch_metrics", INPUTS.variant_job)
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "batch_metrics", 1)
    resources:
        **rule_resources(RESOURCES, "batch_metrics"),
    params:
        options=BatchMetricsOptions.from_config(config),
        variants=INPUTS.job_variants,
    script:
        "../scripts/batch_metrics.py"


rule gather_biomap:
    input:
        # the gene maps of the scored models (they map the genes called active), the batch
        # metrics of every model
        **{k: expand(PATHS.biomap.table, model=SCORED, variant=VARIANTS, kind=k) for k in BIOMAP_KINDS},
        batch_metrics=expand(PATHS.biomap.table, model=MODELS, variant=VARIANTS, kind="batch_metrics"),
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
