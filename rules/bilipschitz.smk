# Study `bilipschitz` (Nelson et al. 2026 Figure 2, A.3-A.6): leaky-ReLU autoencoders (negative-side slope
# 1 - alpha, orthogonally parametrized layers by default) swept over alpha and seeds; per-sample
# bi-Lipschitz estimates B(z) from the encoder's Jacobian; cross-seed identifiability error (rigid
# and linear maps). One job per (dataset, group, alpha) trains every seed, one gather per dataset,
# one report. Target: `snakemake bilipschitz`.
# Logic: phenoica.studies.bilipschitz.

from phenoica.studies.bilipschitz import (
    BilipschitzGatherOptions,
    BilipschitzReportOptions,
    BilipschitzTrainOptions,
)
from phenoica.studies import alpha_label as bl_alpha_label, dataset_groups as bl_dataset_groups

BL = config["bilipschitz"]
BL_RUNS = {
    ds: [
        PATHS.studies.bilipschitz_run.format(dataset=ds, group=g, alpha=bl_alpha_label(a))
        for g in bl_dataset_groups(ds, BL["per_digit"])
        for a in BL["alphas"]
    ]
    for ds in BL["datasets"]
}


rule bilipschitz_train:
    output:
        PATHS.studies.bilipschitz_run,
    log:
        log_path(RESULTS, "bilipschitz", "train/{dataset}/{group}/alpha{alpha}"),
    benchmark:
        benchmark_path(RESULTS, "bilipschitz", "train/{dataset}/{group}/alpha{alpha}")
    wildcard_constraints:
        dataset="|".join(schema_enum("bilipschitz.datasets")),
        group=r"all|digit\d",
        alpha=r"[0-9.eE+-]+",
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "bilipschitz_train", 1)
    resources:
        **rule_resources(RESOURCES, "bilipschitz_train"),
    params:
        options=BilipschitzTrainOptions.from_config(config),
    script:
        "../scripts/bilipschitz_train.py"


rule bilipschitz_gather:
    input:
        lambda w: BL_RUNS[w.dataset],
    output:
        models=PATHS.studies.bilipschitz_models,
        pairs=PATHS.studies.bilipschitz_pairs,
        samples=PATHS.studies.bilipschitz_samples,
    log:
        log_path(RESULTS, "bilipschitz", "gather/{dataset}"),
    benchmark:
        benchmark_path(RESULTS, "bilipschitz", "gather/{dataset}")
    wildcard_constraints:
        dataset="|".join(schema_enum("bilipschitz.datasets")),
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "bilipschitz_gather", 1)
    resources:
        **rule_resources(RESOURCES, "bilipschitz_gather"),
    params:
        options=BilipschitzGatherOptions.from_config(config),
    script:
        "../scripts/bilipschitz_gather.py"


rule bilipschitz_report:
    input:
        models=[PATHS.studies.bilipschitz_models.format(dataset=ds) for ds in BL["datasets"]],
        pairs=[PATHS.studies.bilipschitz_pairs.format(dataset=ds) for ds in BL["datasets"]],
        samples=[PATHS.studies.bilipschitz_samples.format(dataset=ds) for ds in BL["datasets"]],
    output:
        markdown=PATHS.studies.markdown.format(study="bilipschitz"),
        html=PATHS.studies.html.format(study="bilipschitz"),
        verdict=PATHS.studies.verdict.format(study="bilipschitz"),
    log:
        log_path(RESULTS, "bilipschitz", "report"),
    benchmark:
        benchmark_path(RESULTS, "bilipschitz", "report")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "bilipschitz_report", 1)
    resources:
        **rule_resources(RESOURCES, "bilipschitz_report"),
    params:
        options=BilipschitzReportOptions.from_config(config),
    script:
        "../scripts/bilipschitz_report.py"


rule bilipschitz:
    input:
        rules.bilipschitz_report.output,
