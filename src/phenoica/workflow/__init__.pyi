# The face of phenoica.workflow for type checkers and editors: its __init__.py's lazy_face list as
# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.
from ._dag import screen_plates as screen_plates
from ._dag import study_pages as study_pages
from ._dag import training_plates as training_plates
from ._digests import KeyCache as KeyCache
from ._digests import file_key as file_key
from ._digests import plate_store_digest as plate_store_digest
from ._digests import store_digest as store_digest
from ._digests import use_key_cache as use_key_cache
from ._provenance import RuleFiles as RuleFiles
from ._provenance import check_stamps as check_stamps
from ._provenance import reconcile as reconcile
from ._provenance import untrusted_outputs as untrusted_outputs
from ._results_folder import check_results_folder as check_results_folder
from ._results_folder import lock_results as lock_results
from ._results_folder import record_build as record_build
from ._rule_inputs import BIOMAP_KINDS as BIOMAP_KINDS
from ._rule_inputs import RuleInputs as RuleInputs
from ._rule_inputs import embed_rules as embed_rules
from ._rule_inputs import replaced_folders as replaced_folders
from ._rule_resources import check_resource_rules as check_resource_rules
from ._rule_resources import resource_rules as resource_rules
from ._rule_resources import rule_resources as rule_resources
from ._rule_resources import rule_threads as rule_threads
from ._stamps import run_job as run_job
from ._stamps import write_stamp as write_stamp
from ._validate import check_screen_once as check_screen_once

__all__ = [
    "BIOMAP_KINDS",
    "check_resource_rules",
    "check_results_folder",
    "check_screen_once",
    "check_stamps",
    "embed_rules",
    "file_key",
    "KeyCache",
    "lock_results",
    "plate_store_digest",
    "reconcile",
    "record_build",
    "replaced_folders",
    "resource_rules",
    "rule_resources",
    "rule_threads",
    "RuleFiles",
    "RuleInputs",
    "run_job",
    "screen_plates",
    "store_digest",
    "study_pages",
    "training_plates",
    "untrusted_outputs",
    "use_key_cache",
    "write_stamp",
]
