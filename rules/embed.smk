# MAE pretraining on the screen's own tiles (unless a checkpoint is given) and streaming
# embedding, one job per (model, plate).

from phenoica.models.spec import training_spec


rule train_mae:
    input:
        stores=lambda w: [store_path(p) for p in wf.training_plates(config, PLATES, w.model)],
    output:
        checkpoint=f"{RESULTS}/models/{{model}}/encoder.safetensors",
        record=f"{RESULTS}/models/{{model}}/training.json",
    log:
        f"{RESULTS}/logs/train_mae/{{model}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train_mae/{{model}}.tsv"
    conda:
        ENVS
    threads: rule_threads("train_mae", 2)
    resources:
        **rule_resources("train_mae"),
    params:
        spec=lambda w: training_spec(config["models"][w.model]),
        train=wf.job_params(config, "train", drop=("plates", "max_plates")),  # the plates are the inputs
        seed=lambda w: config["seed"] + config["models"][w.model]["seed"],
        device=config["embed"]["device"],
    script:
        "../scripts/train_mae.py"


rule embed:
    input:
        store=lambda w: store_path(w.plate),
        metadata=f"{RESULTS}/screen/metadata/{{plate}}.parquet",
        checkpoint=lambda w: checkpoint_path(w.model),
    output:
        f"{RESULTS}/embeddings/{{model}}/{{plate}}.parquet",
    log:
        f"{RESULTS}/logs/embed/{{model}}/{{plate}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/embed/{{model}}/{{plate}}.tsv"
    conda:
        ENVS
    threads: rule_threads("embed", 2)
    resources:
        **rule_resources("embed"),
    params:
        spec=lambda w: wf.canonical(config["models"][w.model]),
        embed=wf.job_params(config, "embed"),
    script:
        "../scripts/embed.py"


rule gather_profiles:
    input:
        lambda w: embedding_files(w.model),
    output:
        f"{RESULTS}/profiles/{{model}}.parquet",
    log:
        f"{RESULTS}/logs/gather_profiles/{{model}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/gather_profiles/{{model}}.tsv"
    conda:
        ENVS
    threads: rule_threads("gather_profiles", 1)
    resources:
        **rule_resources("gather_profiles"),
    params:
        level=config["profiles"]["level"],
        embedding_column=config["screen"]["embedding_column"],
        features=wf.feature_params(config),
    script:
        "../scripts/gather_profiles.py"
