# MAE pretraining on the screen's own tiles (unless a checkpoint is given) and streaming
# embedding, one job per (model, plate).

from phenoica.embed.groups import embed_groups
from phenoica.models.spec import training_spec


rule train_mae:
    input:
        stores=lambda w: [store_path(p) for p in wf.training_plates(config, PLATES, w.model)],
    output:
        checkpoint=OUT.embed.checkpoint,
        record=OUT.embed.training,
    log:
        log_file("train_mae", "{model}"),
    benchmark:
        benchmark_file("train_mae", "{model}")
    conda:
        ENVS
    threads: rule_threads("train_mae", 2)
    resources:
        **rule_resources("train_mae"),
    params:
        spec=lambda w: training_spec(config["models"][w.model]),
        train=wf.job_params(config, "train", "train_mae"),
        seed=lambda w: config["seed"] + config["models"][w.model]["seed"],
        device=config["embed"]["device"],
    script:
        "../scripts/train_mae.py"


# One job per (model, plate), or with embed.plates_per_job > 1 one job per (model, group of
# plates, rules embed_g0000, ...): the model is built and compiled once per job; every plate
# keeps its own output. update(): Snakemake does not delete an output before its job runs, and
# the job keeps a plate whose output records the same work (phenoica.embed.jobs), so a rerun
# job redoes only its changed plates.
EMBED_GROUPS = embed_groups(list(PLATES), config["embed"]["plates_per_job"])

if config["embed"]["plates_per_job"] == 1:

    rule embed:
        input:
            stores=lambda w: store_path(w.plate),
            metadata=OUT.screen.metadata,
            checkpoint=lambda w: checkpoint_path(w.model),
        output:
            update(OUT.embed.embedding),
        log:
            log_file("embed", "{model}/{plate}"),
        benchmark:
            benchmark_file("embed", "{model}/{plate}")
        conda:
            ENVS
        threads: rule_threads("embed", 2)
        resources:
            **rule_resources("embed"),
        params:
            spec=lambda w: wf.canonical(config["models"][w.model]),
            embed=wf.job_params(config, "embed", "embed"),
        script:
            "../scripts/embed.py"

else:
    if SOURCE == "zarr":  # the stores exist: a group of plates with two channel sets stops the DAG
        check_groups_channels(EMBED_GROUPS)
    for group, group_plates in EMBED_GROUPS.items():

        rule:
            name:
                f"embed_{group}"
            input:
                stores=[store_path(p) for p in group_plates],
                metadata=expand(OUT.screen.metadata, plate=group_plates),
                checkpoint=lambda w: checkpoint_path(w.model),
            output:
                [update(path) for path in expand(OUT.embed.embedding, model="{model}", plate=group_plates)],
            log:
                log_file("embed", f"{{model}}/{group}"),
            benchmark:
                benchmark_file("embed", f"{{model}}/{group}")
            conda:
                ENVS
            threads: rule_threads("embed", 2)
            resources:
                **rule_resources("embed"),
            params:
                spec=lambda w: wf.canonical(config["models"][w.model]),
                embed=wf.job_params(config, "embed", "embed"),
            script:
                "../scripts/embed.py"


rule gather_profiles:
    input:
        lambda w: embedding_files(w.model),
    output:
        OUT.embed.profiles,
    log:
        log_file("gather_profiles", "{model}"),
    benchmark:
        benchmark_file("gather_profiles", "{model}")
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
