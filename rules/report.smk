# Tables and figures in the paper's shapes, plus a Snakemake HTML report (`snakemake --report`).


rule report:
    input:
        guide_folds=f"{RESULTS}/scores/guide_folds.parquet",
        guides=f"{RESULTS}/scores/guides.parquet",
        genes=f"{RESULTS}/scores/genes.parquet",
        maps=f"{RESULTS}/scores/map.parquet",
        fit_reports=[f"{transform_dir(m)}/fit_report.json" for m in MODELS],
        truth=truth_file(),
        table1=f"{RESULTS}/identifiability/table1.parquet",
        structural=f"{RESULTS}/identifiability/structural.parquet",
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
    params:
        models=MODELS,
        seed=config["seed"],
    threads: rule_threads("report", 1)
    resources:
        **rule_resources("report"),
    log:
        f"{RESULTS}/logs/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report.tsv"
    conda:
        ENVS
    script:
        "../scripts/report.py"
