# Tables and figures in the paper's shapes, plus a Snakemake HTML report (`snakemake --report`).


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
    script:
        "../scripts/report.py"
