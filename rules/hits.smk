from phenoica.hits.options import HitOptions

# The hit calls: p-values of every guide against the null pseudo-guides, Benjamini-Hochberg
# q-values per (model, variant), guide and gene calls, the hit table beside the mAP readout and
# the null's calibration summary, from the gathered guide-fold scores; each control construct's
# call against the same null, with the features that separate it from the other controls.


rule call_hits:
    input:
        guide_folds=PATHS.classify.guide_folds,
        controls=PATHS.classify.controls,
        maps=PATHS.classify.maps,
        profiles=expand(PATHS.profiles.table, model=MODELS),
    output:
        guides=PATHS.hits.guides,
        genes=PATHS.hits.genes,
        hits=PATHS.hits.hits,
        null=PATHS.hits.null,
        controls=PATHS.hits.controls,
    log:
        log_path(RESULTS, "call_hits"),
    benchmark:
        benchmark_path(RESULTS, "call_hits")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "call_hits", 1)
    resources:
        **rule_resources(RESOURCES, "call_hits"),
    params:
        options=HitOptions.from_config(config),
        model_names=MODELS,
    script:
        "../scripts/call_hits.py"
