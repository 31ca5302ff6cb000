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

DIS = PATHS.studies.disentangle
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
        latents=f"{DIS}/{{dis_dataset}}/{{dis_model}}/seed{{dis_seed}}/latents.npz",
        checkpoint=f"{DIS}/{{dis_dataset}}/{{dis_model}}/seed{{dis_seed}}/model.safetensors",
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
        lambda w: f"{DIS}/{w.dis_dataset}/{'ae' if w.dis_model in DIS_AE_DERIVED else w.dis_model}/seed{w.dis_seed}/latents.npz",
    output:
        f"{DIS}/{{dis_dataset}}/{{dis_model}}/seed{{dis_seed}}/scores.parquet",
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
        [f"{DIS}/{d}/{m}/seed{s}/scores.parquet" for d in DIS_DATASETS for m in DIS_EVALUATED for s in DIS_SEEDS],
    output:
        md=f"{DIS}/report.md",
        html=f"{DIS}/index.html",
        table=f"{DIS}/table2.csv",
        differences=f"{DIS}/differences.csv",
        scores=f"{DIS}/scores.csv",
        verdict=f"{DIS}/verdict.json",
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
