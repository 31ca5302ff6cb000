# Study "disentangle": Nelson et al. 2026 Table 2. One training job per (dataset, model, seed) writes the
# evaluation set's latents and the weights; one evaluation job per (dataset, model, seed), where
# ae_ica, ae_rand and ae_oracle are scored from the AE's latents; a gather + report job; target
# `disentangle`.

from phenoica.studies.disentangle import (
    DisentangleEvaluateOptions,
    DisentangleReportOptions,
    DisentangleTrainOptions,
)
from phenoica.studies import AE_DERIVED as DIS_AE_DERIVED

DIS_DATASETS = list(config["disentangle"]["datasets"])
DIS_TRAINED = list(config["disentangle"]["models"])
DIS_EVALUATED = DIS_TRAINED + (list(DIS_AE_DERIVED) if "ae" in DIS_TRAINED else [])
DIS_SEEDS = list(config["disentangle"]["seeds"])


wildcard_constraints:
    dis_dataset="|".join(schema_enum("disentangle.datasets")),
    dis_model="|".join(schema_enum("disentangle.models") + DIS_AE_DERIVED),
    dis_seed=r"\d+",


rule disentangle_train:
    output:
        latents=PATHS.studies.disentangle_latents,
        checkpoint=PATHS.studies.disentangle_checkpoint,
    log:
        log_path(RESULTS, "disentangle", "train/{dis_dataset}/{dis_model}/seed{dis_seed}"),
    benchmark:
        benchmark_path(RESULTS, "disentangle", "train/{dis_dataset}/{dis_model}/seed{dis_seed}")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "disentangle_train", 1)
    resources:
        **rule_resources(RESOURCES, "disentangle_train"),
    params:
        options=DisentangleTrainOptions.from_config(config),
    script:
        "../scripts/disentangle_train.py"


rule disentangle_evaluate:
    input:
        lambda w: PATHS.studies.disentangle_latents.format(
            dis_dataset=w.dis_dataset,
            dis_model="ae" if w.dis_model in DIS_AE_DERIVED else w.dis_model,
            dis_seed=w.dis_seed,
        ),
    output:
        PATHS.studies.disentangle_scores,
    log:
        log_path(RESULTS, "disentangle", "evaluate/{dis_dataset}/{dis_model}/seed{dis_seed}"),
    benchmark:
        benchmark_path(RESULTS, "disentangle", "evaluate/{dis_dataset}/{dis_model}/seed{dis_seed}")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "disentangle_evaluate", 1)
    resources:
        **rule_resources(RESOURCES, "disentangle_evaluate"),
    params:
        options=DisentangleEvaluateOptions.from_config(config),
    script:
        "../scripts/disentangle_evaluate.py"


rule disentangle_report:
    input:
        [
            PATHS.studies.disentangle_scores.format(dis_dataset=d, dis_model=m, dis_seed=s)
            for d in DIS_DATASETS
            for m in DIS_EVALUATED
            for s in DIS_SEEDS
        ],
    output:
        md=PATHS.studies.markdown.format(study="disentangle"),
        html=PATHS.studies.html.format(study="disentangle"),
        table=PATHS.studies.disentangle_table2,
        differences=PATHS.studies.disentangle_differences,
        scores=PATHS.studies.disentangle_score_table,
        verdict=PATHS.studies.verdict.format(study="disentangle"),
    log:
        log_path(RESULTS, "disentangle", "report"),
    benchmark:
        benchmark_path(RESULTS, "disentangle", "report")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "disentangle_report", 1)
    resources:
        **rule_resources(RESOURCES, "disentangle_report"),
    params:
        options=DisentangleReportOptions.from_config(config),
    script:
        "../scripts/disentangle_report.py"


rule disentangle:
    input:
        rules.disentangle_report.output,
