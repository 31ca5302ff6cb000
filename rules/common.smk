# Reads and validates: the config against its JSON schema (defaults filled in) before any rule is
# defined, the screen's plates, and the whole screen at the door. What the rules read is decided
# by the library (phenoica.workflow._rule_inputs, .rule_resources; paths: phenoica.contract._paths).

import os
import sys

# Rules import phenoica from this checkout, whichever environment runs them.
_SRC = os.path.join(workflow.basedir, "src")
sys.path.insert(0, _SRC)
# (Set, not required from the user: scripts and cluster jobs inherit it.)
os.environ.update(PYTHONPATH=os.pathsep.join([_SRC, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))

from phenoica.contract import (
    benchmark_path,
    check_yaml_files,
    log_path,
    planned_demo_note,
    run_models,
    schema_enum,
    validate_config,
)
from phenoica.transforms import swept_variants
from phenoica.workflow import (
    RuleInputs,
    check_resource_rules,
    check_results_folder,
    check_screen_once,
    lock_results,
    reconcile,
    record_build,
    replaced_folders,
    resource_rules,
    rule_resources,
    rule_threads,
    screen_plates,
    study_pages,
    training_plates,
    use_key_cache,
)

# Snakemake keeps the last of two equal keys of a config file without a word: read the files
# it was given (configfile, --configfile) again, strictly (a key twice names both lines). The
# models are those the user names, else config.yaml's default_models (phenoica.contract.run_models).
check_yaml_files(workflow.configfiles)
# A config that names no screen plans the simulated demo: said in the log and validated.json.
_CONFIG_NOTES = [n for n in [planned_demo_note(config)] if n]
_validated = validate_config(run_models(config))
config.clear()
config.update(_validated)

RESULTS = config["results"]
SOURCE = config["screen"]["source"]
RESOURCES = config["resources"]
PLATES = screen_plates(config)  # {plate: batch}; empty when starting from embeddings
INPUTS = RuleInputs(config, PLATES)  # every rule's input lists
PATHS = INPUTS.out  # every output's template, by stage (phenoica.contract._paths)
MODELS = INPUTS.models
SCORED = INPUTS.scored_models  # the models the readouts score and the hits call (classify.models)
VARIANTS = INPUTS.variants
SWEPT = list(swept_variants(VARIANTS))  # the variants the component sweep scores
SHARDS = list(range(config["classify"]["n_shards"]))
ENVS = "../envs/phenoica.yaml"

# The results folder is phenoica's alone (phenoica.workflow._provenance, whose docstring lists what
# it guarantees beyond Snakemake's rerun triggers): only its own files, checked by the main process
# before anything is written there; its outputs are reconciled with their jobs' receipts and stamps
# once every rule is defined (set_aside_untrusted, from the Snakefile).
WORKFLOW_DIR = os.getcwd()
REPLACED, STORES = replaced_folders(PATHS, PLATES, SOURCE)
if workflow.is_main_process:
    check_results_folder(RESULTS, WORKFLOW_DIR, config, REPLACED, STORES)

# The user's files are keyed on their content (phenoica.workflow._digests): the door's key and the
# rules' params; a file's bytes are read again only when its stat signature changed (the cache in
# the results folder, written by the main process).
KEY_CACHE = use_key_cache(RESULTS)

# The door: the whole screen against the data contract, the analysis and every model, before
# any job runs (a dry run too); recorded under a key of all it read, so it runs again only when
# the screen, the tables, the stores, the embedding files or the models change.
# Its notes are listed in the report ("Notes on this run").
DOOR_NOTES = check_screen_once(config, PLATES, PATHS.screen.validated, notes=_CONFIG_NOTES)["notes"]
if workflow.is_main_process:
    KEY_CACHE.save()


wildcard_constraints:
    plate=r"[^/]+",
    model=r"[^/]+",
    variant="|".join(schema_enum("transforms.variants")),
    shard=r"\d+",


def set_aside_untrusted():
    """Outputs phenoica did not write, or made with other settings than this run's, are set aside
    and rebuilt; outputs no record describes are refused to another workflow folder (the main
    process, once every rule is defined; phenoica.workflow._provenance.reconcile)."""
    if not workflow.is_main_process:
        return []
    adopt = bool(config.get("adopt_results"))
    return reconcile(RESULTS, WORKFLOW_DIR, workflow.rules, adopt, workflow.output_settings.dryrun)
