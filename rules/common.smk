# The single place for helpers and validation: the config is checked against its JSON schema
# (defaults filled in) before any rule is defined; the screen's plate list is resolved here.

import os
import sys

# Rules import phenoica from this checkout, whichever environment runs them.
_SRC = os.path.join(workflow.basedir, "src")
sys.path.insert(0, _SRC)
# (Set, not required from the user: scripts and cluster jobs inherit it.)
os.environ.update(PYTHONPATH=os.pathsep.join([_SRC, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))

from phenoica.config import check_yaml_files, run_models, validate_config
from phenoica import workflow as wf

# Snakemake reads config files keeping the last of two equal keys without a word: read the
# files it was given (configfile, --configfile) again, strictly (a key twice names both lines).
check_yaml_files(workflow.configfiles)

# The models are exactly those the user names: Snakemake merges --configfile dictionaries over
# config.yaml, which would keep the demo's models beside the user's (phenoica.config.run_models).
_given = getattr(getattr(workflow, "config_settings", None), "overwrite_config", None) or {}
_validated = validate_config(run_models(config, _given))
config.clear()
config.update(_validated)

RESULTS = config["results"]
SOURCE = config["screen"]["source"]
MODELS = sorted(config["models"])  # by name: the order of keys in a config file counts for nothing
VARIANTS = list(config["transforms"]["variants"])
SHARDS = list(range(config["classify"]["n_shards"]))
PLATES = wf.screen_plates(config)  # {plate: batch}; empty when starting from embeddings
ENVS = "../envs/phenoica.yaml"

# The door: the whole screen against the data contract, the analysis it will get and every
# model, before any job runs (a dry run too), for every source; a passed check is recorded
# under a key of all it read, so it runs again only when the screen, the tables, the stores,
# the embedding files or the models change.
from phenoica.validate import check_screen_once

check_screen_once(config, PLATES, f"{RESULTS}/screen/validated.json")


wildcard_constraints:
    plate=r"[^/]+",
    model=r"[^/]+",
    variant=r"base|pca|pca_ica|pca_rand|tvn",
    shard=r"\d+",


def rule_threads(rule, fallback):
    """Threads: config resources.<name>.cpus, else resources.default.cpus, else fallback."""
    res = config["resources"]
    return (res.get(rule) or {}).get("cpus") or res["default"]["cpus"] or fallback


def rule_resources(rule):
    """Resources from config resources.<name> (over resources.default): mem_mb,
    runtime (minutes) and, when GPUs are asked for, gpu (count) and gpu_model, the names the
    SLURM executor plugin turns into --mem, --time and --gpus."""
    merged = dict(config["resources"]["default"])
    merged.update({k: v for k, v in (config["resources"].get(rule) or {}).items() if v not in (None, 0)})
    out = {k: merged[k] for k in ("mem_mb", "runtime") if merged.get(k)}
    if merged.get("gpus"):
        out["gpu"] = merged["gpus"]
        if merged.get("gpu_model"):
            out["gpu_model"] = merged["gpu_model"]
    return out


def store_path(plate):
    """The plate's Zarr store: produced by the workflow, or the user's (source zarr)."""
    if SOURCE == "zarr":
        return f"{config['screen']['plates_dir']}/{plate}.zarr"
    return f"{RESULTS}/screen/plates/{plate}.zarr"


def plate_digest(plate):
    """Content digest of one plate's rows in the user's metadata table or plate map, so a
    plate's jobs rerun only when its own rows change (the table itself is an ancient input)."""
    return wf.plate_digest(config, plate)


def plate_store_digest(plate):
    """Content digest of the user's pixels of one plate (store, HCS plate or image files), so a
    store rewritten in place reruns that plate's jobs (a folder's time does not change then)."""
    return wf.plate_store_digest(config, plate)


def checkpoint_path(model):
    """The encoder weights of a model: the configured checkpoint, or the one train_mae writes."""
    given = config["models"][model]["checkpoint"]
    return given if given else f"{RESULTS}/models/{model}/encoder.safetensors"


def embedding_files(model):
    """Per-plate embedding parquets of a model (or the user's files, source embeddings)."""
    if SOURCE == "embeddings":
        return wf.embedding_inputs(config, model)
    return [f"{RESULTS}/embeddings/{model}/{plate}.parquet" for plate in PLATES]


def transform_dir(model):
    frozen = config["transforms"]["frozen"]
    return f"{frozen}/{model}" if frozen else f"{RESULTS}/transforms/{model}"


#: classify keys that only the gather (hit calls) or the mAP readout read: not classify's params.
GATHER_ONLY_CLASSIFY_KEYS = ("map_readout", "map_null_size", "null_model", "q_threshold")


def lightgbm_report_params():
    """The LightGBM parameters every classifier used (Table 6 + overrides), for the report;
    the thread count and log level are left out (they change no model)."""
    from phenoica.classify.params import lightgbm_params

    params = lightgbm_params(config["classify"], config["seed"])
    return wf.lightgbm_params_shown({k: v for k, v in params.items() if k != "seed"})


def map_files():
    """copairs mAP tables, one per (model, variant), when the readout is on."""
    if not config["classify"]["map_readout"]:
        return []
    return [f"{RESULTS}/scores/{m}/{v}/map.parquet" for m in MODELS for v in VARIANTS]


def truth_file():
    """The demo's per-guide ground truth (only the demo has one)."""
    return [f"{RESULTS}/screen/truth.parquet"] if SOURCE == "demo" else []


def align_files():
    """Table 1 per variant, when there are two or more models to align."""
    if not (config["identifiability"]["align"] and len(MODELS) >= 2):
        return []
    return [f"{RESULTS}/identifiability/align/{v}.parquet" for v in VARIANTS]


def structural_files():
    """Factor-recovery scores per (model, variant), where ground-truth factors exist (demo)."""
    if not (config["identifiability"]["structural"] and SOURCE == "demo"):
        return []
    return [f"{RESULTS}/identifiability/structural/{m}/{v}.parquet" for m in MODELS for v in VARIANTS]


BIOMAP_KINDS = ("neighbors", "guide_neighbors", "consistency", "recall", "coverage")


def biomap_annotation_files():
    """Annotation files the map reads (user files and the EFAAR wheel): a change reruns it."""
    cfg = config["biomap"]
    files = list(cfg["annotations"].values())
    if cfg["efaar_wheel"]:
        files.append(cfg["efaar_wheel"])
    return files


def biomap_tables():
    """The gathered biomap tables the report reads (none when biomap.enabled is off)."""
    if not config["biomap"]["enabled"]:
        return []
    return [
        f"{RESULTS}/biomap/{k}.parquet" for k in ("recall", "coverage", "consistency", "neighbors", "batch_metrics")
    ]


def biomap_heatmaps():
    """One clustered gene-map heatmap per (model, variant), when biomap is on."""
    if not config["biomap"]["enabled"]:
        return []
    return [f"{RESULTS}/biomap/{m}/{v}/heatmap.png" for m in MODELS for v in VARIANTS]


def report_outputs():
    out = [f"{RESULTS}/report/report.md", f"{RESULTS}/report/index.html"]
    return out


# Helpers of rules/embed.smk (grouped embed jobs) and rules/transform.smk (the component sweep).


def check_groups_channels(groups):
    """Every group of plates feeds each model one channel set (phenoica.embed_jobs), checked
    before any job when the stores are the user's."""
    from pathlib import Path

    from phenoica.embed_jobs import PlateJob, check_group_channels

    for model, spec in config["models"].items():
        for plates in groups.values():
            jobs = [PlateJob(Path(store_path(p)), None, Path(f"{p}.parquet")) for p in plates]
            check_group_channels(jobs, spec.get("channels"), f"models.{model}.channels")


def inherit_embed_resources(name):
    """Rule ``name`` (a grouped embed job) takes the --set-resources (a profile's set-resources)
    given for rule embed, e.g. a SLURM site's GPU partition; its own entry, if any, wins."""
    given = workflow.resource_settings.overwrite_resources
    if "embed" in given:
        resources = workflow.get_rule(name).resources
        resources.update(given["embed"])
        resources.update(given.get(name) or {})


def sweep_files():
    """The component sweep per model (none with frozen transforms or transforms.sweep_points 0)."""
    if config["transforms"]["frozen"] or not config["transforms"]["sweep_points"]:
        return []
    return [f"{RESULTS}/sweep/{m}.parquet" for m in MODELS]
