# The hit calls: p-values of every guide against the null pseudo-guides, Benjamini-Hochberg
# q-values per (model, variant), guide and gene calls, the hit table beside the mAP readout and
# the null's calibration summary, from the gathered guide-fold scores.


rule call_hits:
    input:
        guide_folds=OUT.classify.guide_folds,
        maps=OUT.classify.maps,
    output:
        guides=OUT.hits.guides,
        genes=OUT.hits.genes,
        hits=OUT.hits.hits,
        null=OUT.hits.null,
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
        **rule_params(config, "call_hits"),
    script:
        "../scripts/call_hits.py"
