# phenoica: identifiable representations for cell-microscopy screens.
# Reads like a table of contents: config, validation (rules/common.smk), the stages, the target.

from snakemake.utils import min_version

min_version("8.20")


# The demo's config.yaml is the run's config when no --configfile is given. A --configfile stands
# on its own: what it leaves out takes the schema's defaults, not the demo's small settings
# (docs/data.md). Several --configfile files are merged in order.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/screen.smk"
include: "rules/embed.smk"
include: "rules/profiles.smk"
include: "rules/transforms.smk"
include: "rules/splits.smk"
include: "rules/classify.smk"
include: "rules/hits.smk"
include: "rules/sweep.smk"
include: "rules/identifiability.smk"
include: "rules/biomap.smk"
include: "rules/report.smk"
include: "rules/disentangle.smk"
include: "rules/bilipschitz.smk"


# A name under resources that is no rule's is an error, not a silent fall-back to the default.
check_resource_rules(RESOURCES, resource_rules(os.path.join(workflow.basedir, "rules")))
# An output phenoica did not write in the results folder, or made with other settings than this
# run's (its job's stamp), is rebuilt, not trusted.
set_aside_untrusted()


onstart:
    # One run at a time writes the results folder (released when this process ends), and the
    # folder records the config it is built with (phenoica.workflow._results_folder).
    lock_results(RESULTS)
    record_build(RESULTS, WORKFLOW_DIR, config, REPLACED)
    KEY_CACHE.save()  # the keys the rules' params added
    print(
        f"phenoica: screen source {config['screen']['source']!r}, models {list(config['models'])}, results in {RESULTS}/"
    )


onsuccess:
    print(f"phenoica: done. Report: {PATHS.report.html}")


onerror:
    print(
        f"phenoica: a job failed; the error is at the end of its log under {RESULTS}/logs/ (named by rule and "
        "wildcards). Fix the cause and rerun the same command: finished jobs, embedded chunks and classified "
        "shards are kept and not redone. If a run was killed (kill -9, a lost node, a closed terminal) the next "
        "one stops with 'Directory cannot be locked' (LockException): make sure no other Snakemake runs here, "
        "then `snakemake --unlock` with the same options (--configfile ...), and rerun with --rerun-incomplete. "
        "See docs/cluster.md, Troubleshooting."
    )


rule all:
    default_target: True
    input:
        PATHS.report.markdown,
        PATHS.report.html,
