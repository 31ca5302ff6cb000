# Screen data: one job per plate writes the plate's Zarr store and its metadata rows.
# Which rule produces them depends on screen.source; source zarr only splits the metadata.
# The whole screen was checked against the contract and the models when the DAG was built.
# A plate's jobs rerun when its rows of the user's table change (digest) or its pixels do
# (store: the content digest of the user's store, image files, or LoadData rows and the files
# they name), and only then.

from phenoica.screen import (
    DemoOptions,
    ImageIngestOptions,
    LoadDataIngestOptions,
    OmeZarrIngestOptions,
)

if SOURCE == "demo":

    rule simulate_truth:
        output:
            PATHS.screen.truth,
        log:
            log_path(RESULTS, "simulate_truth"),
        benchmark:
            benchmark_path(RESULTS, "simulate_truth")
        conda:
            ENVS
        threads: rule_threads(RESOURCES, "simulate_truth", 1)
        resources:
            **rule_resources(RESOURCES, "simulate_truth"),
        params:
            options=DemoOptions.from_config(config),
        script:
            "../scripts/simulate_truth.py"

    rule simulate_plate:
        output:
            store=directory(PATHS.screen.store),
            metadata=PATHS.screen.metadata,
            factors=PATHS.screen.factors,
        log:
            log_path(RESULTS, "simulate_plate", "{plate}"),
        benchmark:
            benchmark_path(RESULTS, "simulate_plate", "{plate}")
        conda:
            ENVS
        threads: rule_threads(RESOURCES, "simulate_plate", 1)
        resources:
            **rule_resources(RESOURCES, "simulate_plate"),
        params:
            # What a plate depends on (the rerun trigger): not the plate count, so adding
            # plates or batches leaves existing plates alone.
            options=DemoOptions.from_config(config),
        script:
            "../scripts/simulate_plate.py"


if SOURCE == "zarr":

    rule plate_metadata:
        input:
            table=ancient(config["screen"]["metadata"]),
            store=lambda w: INPUTS.store(w.plate),
        output:
            PATHS.screen.metadata,
        log:
            log_path(RESULTS, "plate_metadata", "{plate}"),
        benchmark:
            benchmark_path(RESULTS, "plate_metadata", "{plate}")
        conda:
            ENVS
        threads: rule_threads(RESOURCES, "plate_metadata", 1)
        resources:
            **rule_resources(RESOURCES, "plate_metadata"),
        params:
            digest=lambda w: INPUTS.plate_digest(w.plate),
            store=lambda w: INPUTS.plate_store_digest(w.plate),
        script:
            "../scripts/plate_metadata.py"


if SOURCE == "images":

    rule ingest_images:
        input:
            plate_map=ancient(config["screen"]["plate_map"]),
        output:
            store=directory(PATHS.screen.store),
            metadata=PATHS.screen.metadata,
        log:
            log_path(RESULTS, "ingest_images", "{plate}"),
        benchmark:
            benchmark_path(RESULTS, "ingest_images", "{plate}")
        conda:
            ENVS
        threads: rule_threads(RESOURCES, "ingest_images", 1)
        resources:
            **rule_resources(RESOURCES, "ingest_images"),
        params:
            options=ImageIngestOptions.from_config(config),
            digest=lambda w: INPUTS.plate_digest(w.plate),
            store=lambda w: INPUTS.plate_store_digest(w.plate),
        script:
            "../scripts/ingest_images.py"


if SOURCE == "ome_zarr":

    rule ingest_ome_zarr:
        input:
            plate_map=ancient(config["screen"]["plate_map"]),
            hcs=f"{config['screen']['ome_zarr_dir']}/{{plate}}.zarr",
        output:
            store=directory(PATHS.screen.store),
            metadata=PATHS.screen.metadata,
        log:
            log_path(RESULTS, "ingest_ome_zarr", "{plate}"),
        benchmark:
            benchmark_path(RESULTS, "ingest_ome_zarr", "{plate}")
        conda:
            ENVS
        threads: rule_threads(RESOURCES, "ingest_ome_zarr", 1)
        resources:
            **rule_resources(RESOURCES, "ingest_ome_zarr"),
        params:
            options=OmeZarrIngestOptions.from_config(config),
            digest=lambda w: INPUTS.plate_digest(w.plate),
            store=lambda w: INPUTS.plate_store_digest(w.plate),
        script:
            "../scripts/ingest_ome_zarr.py"


if SOURCE == "loaddata":  # CellProfiler LoadData CSV(s) + plate map (phenoica.screen._loaddata)

    rule ingest_loaddata:
        input:
            plate_map=ancient(config["screen"]["plate_map"]),
        output:
            store=directory(PATHS.screen.store),
            metadata=PATHS.screen.metadata,
        log:
            log_path(RESULTS, "ingest_loaddata", "{plate}"),
        benchmark:
            benchmark_path(RESULTS, "ingest_loaddata", "{plate}")
        conda:
            ENVS
        threads: rule_threads(RESOURCES, "ingest_loaddata", 1)
        resources:
            **rule_resources(RESOURCES, "ingest_loaddata"),
        params:
            options=LoadDataIngestOptions.from_config(config),
            digest=lambda w: INPUTS.plate_digest(w.plate),
            store=lambda w: INPUTS.plate_store_digest(w.plate),
        script:
            "../scripts/ingest_loaddata.py"
