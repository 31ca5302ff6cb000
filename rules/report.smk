# The report: the sections of phenoica.report.write.SECTIONS (each reads inputs named as below), plus a
# Snakemake HTML report (`snakemake --report`);
# the hit gallery and the interactive results page beside it (docs/report.md).


from phenoica.report.gallery import gallery_model, gallery_reads_pixels


rule report:
    input:
        guide_folds=f"{RESULTS}/scores/guide_folds.parquet",
        guides=f"{RESULTS}/scores/guides.parquet",
        genes=f"{RESULTS}/scores/genes.parquet",
        maps=f"{RESULTS}/scores/map.parquet",
        hits=f"{RESULTS}/scores/hits.parquet",
        null=f"{RESULTS}/scores/null.parquet",
        fit_reports=[f"{transform_dir(m)}/fit_report.json" for m in MODELS],
        truth=truth_file(),
        table1=f"{RESULTS}/identifiability/table1.parquet",
        structural=f"{RESULTS}/identifiability/structural.parquet",
        biomap_tables=biomap_tables(),  # issue 15 hook: gene maps, recall, batch metrics
        biomap_heatmaps=biomap_heatmaps(),
        # issue 25: the image embeddings the gallery reads (none without pixels or when it is off)
        gallery_embeddings=embedding_files(gallery_model(config, MODELS)) if gallery_reads_pixels(config) else [],
        annotations=biomap_annotation_files(),
        sweep=sweep_files(),  # issue 21: the component sweep per model
    output:
        markdown=f"{RESULTS}/report/report.md",
        html=f"{RESULTS}/report/index.html",
        figures=report(
            directory(f"{RESULTS}/report/figures"),
            patterns=["{name}.png"],
            caption="../docs/report_caption.rst",
            category="Classification",
        ),
        tables=report(
            directory(f"{RESULTS}/report/tables"),
            patterns=["{name}.csv"],
            caption="../docs/report_caption.rst",
            category="Tables",
        ),
        gallery=directory(f"{RESULTS}/report/gallery"),
        interactive=f"{RESULTS}/report/interactive.html",
        interactive_assets=directory(f"{RESULTS}/report/interactive_assets"),
    log:
        f"{RESULTS}/logs/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report.tsv"
    conda:
        ENVS
    threads: rule_threads("report", 1)
    resources:
        **rule_resources("report"),
    params:
        models=MODELS,
        lightgbm=lightgbm_report_params(),
        q_threshold=config["classify"]["q_threshold"],
        seed=config["seed"],
        # The study pages that exist when the DAG is built, with their one-line verdicts: a
        # study finished since the last report reruns it; the default target never runs a study.
        studies=wf.study_pages(RESULTS),
        gallery=wf.canonical(config["gallery"]),
        channels=wf.canonical(config["channels"]),
        source=SOURCE,
        # paths, not inputs: a store moved since the run is named by the gallery, not rebuilt
        stores={plate: store_path(plate) for plate in PLATES},
        annotations=wf.job_params(
            config, "biomap", keys=("builtin_corum", "efaar_sources", "efaar_wheel", "annotations")
        ),
    script:
        "../scripts/report.py"
