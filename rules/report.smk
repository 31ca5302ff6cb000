# The report: the sections of phenoica.report.write.SECTIONS (each reads inputs named as below), plus a
# Snakemake HTML report (`snakemake --report`);
# the hit gallery and the interactive results page beside it (docs/report.md).


from phenoica.report.options import ReportOptions

REPORT_OPTIONS = ReportOptions.from_config(config)


rule report:
    input:
        guide_folds=OUT.classify.guide_folds,
        guides=OUT.hits.guides,
        genes=OUT.hits.genes,
        maps=OUT.classify.maps,
        hits=OUT.hits.hits,
        null=OUT.hits.null,
        controls=OUT.hits.controls,
        fit_reports=[IN.fit_report(m) for m in MODELS],
        truth=IN.truth(),
        table1=OUT.identifiability.table1,
        structural=OUT.identifiability.structural_table,
        biomap_tables=IN.biomap_tables(),  # gene maps, recall, batch metrics
        biomap_heatmaps=IN.biomap_heatmaps(),
        # the image embeddings the gallery reads (none without pixels or when it is off)
        gallery_embeddings=(
            IN.embeddings(REPORT_OPTIONS.gallery_model_of(MODELS)) if REPORT_OPTIONS.gallery_reads_pixels else []
        ),
        annotations=IN.biomap_annotations(),
        sweep=IN.sweeps(),  # the component sweep per model
    output:
        markdown=OUT.report.markdown,
        html=OUT.report.html,
        figures=report(
            directory(OUT.report.figures),
            patterns=["{name}.png"],
            caption="../docs/report_caption.rst",
            category="Classification",
        ),
        tables=report(
            directory(OUT.report.tables),
            patterns=["{name}.csv"],
            caption="../docs/report_caption.rst",
            category="Tables",
        ),
        gallery=directory(OUT.report.gallery),
        interactive=OUT.report.interactive,
        interactive_assets=directory(OUT.report.interactive_assets),
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
        stores={plate: IN.store(plate) for plate in PLATES},
    script:
        "../scripts/report.py"
