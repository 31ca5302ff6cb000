# The report: the sections of phenoica.report.SECTIONS (each reads inputs named as below), plus a
# Snakemake HTML report (`snakemake --report`);
# the hit gallery and the interactive results page beside it (docs/report.md).


from phenoica.report import ReportOptions

REPORT_OPTIONS = ReportOptions.from_config(config)


rule report:
    input:
        guide_folds=PATHS.classify.guide_folds,
        guides=PATHS.hits.guides,
        genes=PATHS.hits.genes,
        maps=PATHS.classify.maps,
        retrieval=PATHS.classify.retrievals,  # replicate retrieval across batches, per variant
        hits=PATHS.hits.hits,
        null=PATHS.hits.null,
        controls=PATHS.hits.controls,
        fit_reports=[INPUTS.fit_report(m) for m in MODELS],
        profile_hygiene=expand(PATHS.profiles.hygiene, model=MODELS),
        truth=INPUTS.truth(),
        table1=PATHS.identifiability.table1,
        structural=PATHS.identifiability.structural_table,
        biomap_tables=INPUTS.biomap_tables(),  # gene maps, recall, batch metrics
        biomap_heatmaps=INPUTS.biomap_heatmaps(),
        # the image embeddings the gallery reads (none without pixels or when it is off)
        gallery_embeddings=(
            INPUTS.embeddings(REPORT_OPTIONS.gallery_model_of(SCORED)) if REPORT_OPTIONS.gallery_reads_pixels else []
        ),
        annotations=INPUTS.biomap_annotations(),
        sweep=INPUTS.sweeps(),  # the component sweep per model
        plate_wells=PATHS.hits.plate_wells,  # the plate maps, the position summary, the null's layout
        positions=PATHS.hits.positions,
        null_layout=PATHS.hits.null_layout,
        reference=INPUTS.reference(),  # each construct against its reference, when one is declared
    output:
        markdown=PATHS.report.markdown,
        html=PATHS.report.html,
        figures=report(
            directory(PATHS.report.figures),
            patterns=["{name}.png"],
            caption="../docs/report_caption.rst",
            category="Classification",
        ),
        tables=report(
            directory(PATHS.report.tables),
            patterns=["{name}.csv"],
            caption="../docs/report_caption.rst",
            category="Tables",
        ),
        plates=directory(PATHS.report.plates),
        gallery=directory(PATHS.report.gallery),
        interactive=PATHS.report.interactive,
        interactive_assets=directory(PATHS.report.interactive_assets),
    log:
        log_path(RESULTS, "report"),
    benchmark:
        benchmark_path(RESULTS, "report")
    conda:
        ENVS
    threads: rule_threads(RESOURCES, "report", 1)
    resources:
        **rule_resources(RESOURCES, "report"),
    params:
        options=REPORT_OPTIONS,
        model_names=MODELS,
        # The study pages that exist when the DAG is built, with their one-line verdicts: a
        # study finished since the last report reruns it; the default target never runs a study.
        studies=study_pages(RESULTS),
        # paths, not inputs: a store moved since the run is named by the gallery, not rebuilt
        stores={plate: INPUTS.store(plate) for plate in PLATES},
        # "Notes on this run": the door's notes, and the sweep points skipped (from the sweep's logs)
        notes=DOOR_NOTES,
        sweep_logs=INPUTS.sweep_logs(),
        # the content of the user's files it reads: annotations, frozen transforms' fit reports
        user_files=INPUTS.report_files_key(),
    script:
        "../scripts/report.py"
