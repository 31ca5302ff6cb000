from phenoica.profiles import GatherOptions

# The profile table of each model: every plate's embeddings gathered, checked against the contract,
# at image or well level, with the profile hygiene applied (phenoica.profiles).


rule gather_profiles:
    input:
        lambda w: INPUTS.embeddings(w.model),
    output:
        table=PATHS.profiles.table,
        hygiene=PATHS.profiles.hygiene,
    log:
        log_path(RESULTS, "gather_profiles", "{model}"),
    benchmark:
        benchmark_path(RESULTS, "gather_profiles", "{model}")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "gather_profiles", 1)
    resources:
        **rule_resources(RESOURCES, "gather_profiles"),
    params:
        options=GatherOptions.from_config(config),
        # the user's embedding files' content (source embeddings): a file replaced reruns the gather
        inputs=lambda w: INPUTS.embeddings_key(w.model),
    script:
        "../scripts/gather_profiles.py"
