from phenoica.hits import HitOptions, PositionOptions, ReferenceOptions

# The hit calls: p-values of every guide against the null pseudo-guides, Benjamini-Hochberg
# q-values per (model, variant), guide and gene calls, the hit table beside the mAP readout and
# the null's calibration summary, from the gathered guide-fold scores; each control construct's
# call against the same null, with the features that separate it from the other controls.


rule call_hits:
    input:
        guide_folds=PATHS.classify.guide_folds,
        controls=PATHS.classify.controls,
        maps=PATHS.classify.maps,
        profiles=expand(PATHS.profiles.table, model=SCORED),
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
        model_names=SCORED,
    script:
        "../scripts/call_hits.py"


# Where on the plate: each well's place and role, the position effect measured on the control
# wells, and which layout the classifier's null takes on each model's table (and why).
rule plate_positions:
    input:
        profiles=expand(PATHS.profiles.table, model=MODELS),
    output:
        wells=PATHS.hits.plate_wells,
        positions=PATHS.hits.positions,
        null_layout=PATHS.hits.null_layout,
    log:
        log_path(RESULTS, "plate_positions"),
    benchmark:
        benchmark_path(RESULTS, "plate_positions")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "plate_positions", 1)
    resources:
        **rule_resources(RESOURCES, "plate_positions"),
    params:
        options=PositionOptions.from_config(config),
        model_names=MODELS,
    script:
        "../scripts/plate_positions.py"


# Each construct against its declared reference (screen.reference), by both readouts, against null
# contrasts of control wells at other positions.
rule reference:
    input:
        variants=expand(PATHS.transforms.variant, model=SCORED, variant=VARIANTS),
        folds=expand(PATHS.splits.folds, model=SCORED),
    output:
        PATHS.hits.reference,
    log:
        log_path(RESULTS, "reference"),
    benchmark:
        benchmark_path(RESULTS, "reference")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "reference", 1)
    resources:
        **rule_resources(RESOURCES, "reference"),
    params:
        options=ReferenceOptions.from_config(config),
        model_names=SCORED,
        variants=VARIANTS,
    script:
        "../scripts/reference.py"
