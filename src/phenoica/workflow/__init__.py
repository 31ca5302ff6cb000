"""Above every stage, what the Snakemake rules need before any job: the door (:mod:`._validate`,
the whole screen checked first; each plate's geometry, :mod:`._geometry`), the screen's plates
and the files found on disk (:mod:`._dag`), the content digests of the user's inputs
(:mod:`._digests`), the rules' input lists (:mod:`._rule_inputs`) and resources
(:mod:`._rule_resources`), what is guaranteed of the results folder beyond Snakemake's rerun
triggers (:mod:`._provenance`, the guarantees and their checks before any job; the owner, record and
lock of the folder, :mod:`._results_folder`; every job's stamp, :mod:`._stamps`), and the configuration
reference (:mod:`.config_reference`, a command line).
The output paths are the contract's (``phenoica.contract.OUTPUTS``)."""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_dag": ["screen_plates", "study_pages", "training_plates"],
        "_digests": ["KeyCache", "file_key", "plate_store_digest", "store_digest", "use_key_cache"],
        "_provenance": ["RuleFiles", "check_stamps", "reconcile", "untrusted_outputs"],
        "_results_folder": ["check_results_folder", "lock_results", "record_build"],
        "_rule_inputs": ["BIOMAP_KINDS", "RuleInputs", "embed_rules", "replaced_folders"],
        "_stamps": ["run_job", "write_stamp"],
        "_rule_resources": ["check_resource_rules", "resource_rules", "rule_resources", "rule_threads"],
        "_validate": ["check_screen_once"],
    },
)
