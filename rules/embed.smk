# MAE pretraining on the screen's own tiles (unless a checkpoint is given) and streaming
# embedding, one job per (model, plate).

from phenoica.embed import EmbedOptions
from phenoica.models import TrainOptions
from phenoica.workflow import embed_rules


rule train_mae:
    input:
        stores=lambda w: [INPUTS.store(p) for p in training_plates(config, PLATES, w.model)],
    output:
        checkpoint=PATHS.embed.checkpoint,
        record=PATHS.embed.training,
    log:
        log_path(RESULTS, "train_mae", "{model}"),
    benchmark:
        benchmark_path(RESULTS, "train_mae", "{model}")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "train_mae", 2)
    resources:
        **rule_resources(RESOURCES, "train_mae"),
    params:
        # what training depends on: the train section, the entry's shape, channels and seed
        options=lambda w: TrainOptions.from_config(config, model=w.model),
        # the content of the user's stores it trains on (source zarr)
        stores=lambda w: INPUTS.training_stores_key(w.model),
    script:
        "../scripts/train_mae.py"


# One job per (model, plate), or with embed.plates_per_job > 1 one job per (model, group of
# plates, rules embed_g0000, ...): the model is built and compiled once per job; every plate
# keeps its own output (phenoica.workflow.embed_rules). update(): Snakemake does not
# delete an output before its job runs, and the job keeps a plate whose output records the same
# work (phenoica.embed._jobs), so a rerun job redoes only its changed plates.
for embed_rule in embed_rules(INPUTS):

    rule:
        name:
            embed_rule.name
        input:
            stores=embed_rule.stores,
            metadata=embed_rule.metadata,
            checkpoint=lambda w: INPUTS.checkpoint(w.model),
        output:
            [update(path) for path in embed_rule.outputs],
        log:
            log_path(RESULTS, "embed", embed_rule.log_wildcards),
        benchmark:
            benchmark_path(RESULTS, "embed", embed_rule.log_wildcards)
        conda:
            ENVS
        threads: rule_threads(RESOURCES, "embed", 2)
        resources:
            **rule_resources(RESOURCES, "embed"),
        params:
            options=lambda w: EmbedOptions.from_config(config, model=w.model),
            # the content of the user's checkpoint (models.<name>.checkpoint)
            checkpoint=lambda w: INPUTS.checkpoint_key(w.model),
        script:
            "../scripts/embed.py"
