# phenoica: identifiable representations for cell-microscopy screens.
# Reads like a table of contents: config, validation (rules/common.smk), the stages, the target.

from snakemake.utils import min_version

min_version("8.20")


configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/embed.smk"
include: "rules/transform.smk"
include: "rules/classify.smk"
include: "rules/identifiability.smk"
include: "rules/report.smk"
include: "rules/disentangle.smk"
include: "rules/bilipschitz.smk"


onstart:
    print(f"phenoica: screen source {config['screen']['source']!r}, models {list(config['models'])}, results in {RESULTS}/")


onsuccess:
    print(f"phenoica: done. Report: {RESULTS}/report/index.html")


onerror:
    print(f"phenoica: a job failed; its log is under {RESULTS}/logs/. Rerunning resumes from finished work.")


rule all:
    default_target: True
    input:
        report_outputs(),
