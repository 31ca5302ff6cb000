from phenoica.hits.options import HitOptions

# The hit calls: p-values of every guide against the null pseudo-guides, Benjamini-Hochberg
# q-values per (model, variant), guide and gene calls, the hit table beside the mAP readout and
# the null's calibration summary, from the gathered guide-fold scores; each control construct's
# call against the same null, with the features that separate it from the other controls.


rule call_hits:
    input:
        guide_folds=OUT.classify.guide_folds,
        controls=OUT.classify.controls,
        maps=OUT.classify.maps,
        profiles=expand(OUT.profiles.table, model=MODELS),
    output:
        guides=OUT.hits.guides,
        genes=OUT.hits.genes,
        hits=OUT.hits.hits,
        null=OUT.hits.null,
        controls=OUT.hits.controls,
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
