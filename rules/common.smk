# The single place for helpers and validation: the config is checked against its JSON schema
# (defaults filled in) before any rule is defined; the screen's plate list is resolved here.

import os
import sys

# Rules import phenoica from this checkout, whichever environment runs them.
_SRC = os.path.join(workflow.basedir, "src")
sys.path.insert(0, _SRC)
# (Set, not required from the user: scripts and cluster jobs inherit it.)
os.environ.update(PYTHONPATH=os.pathsep.join([_SRC, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))

from phenoica.contract.config import run_models, validate_config
from phenoica.contract.schema import check_yaml_files, schema_enum
from phenoica.workflow import dag as wf
from phenoica.workflow.paths import benchmark_path, log_path, output_paths
from phenoica.variants.names import swept_variants

# Snakemake reads config files keeping the last of two equal keys without a word: read the
# files it was given (configfile, --configfile) again, strictly (a key twice names both lines).
check_yaml_files(workflow.configfiles)

# The models are exactly those the user names, else config.yaml's default_models (the demo's):
# Snakemake merges config files key by key, so the defaults have their own key
# (phenoica.contract.config.run_models).
_validated = validate_config(run_models(config))
config.clear()
config.update(_validated)

RESULTS = config["results"]
SOURCE = config["screen"]["source"]
MODELS = sorted(config["models"])  # by name: the order of keys in a config file counts for nothing
VARIANTS = list(config["transforms"]["variants"])
SWEPT = list(swept_variants(VARIANTS))  # the variants the component sweep scores
SHARDS = list(range(config["classify"]["n_shards"]))
PLATES = wf.screen_plates(config)  # {plate: batch}; empty when starting from embeddings
ENVS = "../envs/phenoica.yaml"
OUT = output_paths(RESULTS)  # every output's template, by stage (phenoica.workflow.paths)


def log_file(rule, wildcards=""):
    return log_path(RESULTS, rule, wildcards)


def benchmark_file(rule, wildcards=""):
    return benchmark_path(RESULTS, rule, wildcards)


# The door: the whole screen against the data contract, the analysis it will get and every
# model, before any job runs (a dry run too), for every source; a passed check is recorded
# under a key of all it read, so it runs again only when the screen, the tables, the stores,
# the embedding files or the models change.
from phenoica.workflow.validate import check_screen_once

check_screen_once(config, PLATES, OUT.screen.validated)


wildcard_constraints:
    plate=r"[^/]+",
    model=r"[^/]+",
    variant="|".join(schema_enum("transforms.variants")),
    shard=r"\d+",


def rule_threads(rule, fallback):
    """Threads: config resources.<name>.cpus, else resources.default.cpus, else fallback."""
    res = config["resources"]
    return (res.get(rule) or {}).get("cpus") or res["default"]["cpus"] or fallback


def rule_resources(rule):
    """Resources from config resources.<name> (over resources.default): mem_mb,
    runtime (minutes), partition and, when GPUs are asked for, gpu (count) and gpu_model, the
    names the SLURM executor plugin turns into --mem, --time, --partition and --gpus."""
    merged = dict(config["resources"]["default"])
    merged.update({k: v for k, v in (config["resources"].get(rule) or {}).items() if v not in (None, 0)})
    out = {k: merged[k] for k in ("mem_mb", "runtime") if merged.get(k)}
    if merged.get("partition"):
        out["slurm_partition"] = merged["partition"]
    if merged.get("gpus"):
        out["gpu"] = merged["gpus"]
        if merged.get("gpu_model"):
            out["gpu_model"] = merged["gpu_model"]
    return out


def store_path(plate):
    """The plate's Zarr store: produced by the workflow, or the user's (source zarr)."""
    if SOURCE == "zarr":
        return f"{config['screen']['plates_dir']}/{plate}.zarr"
    return OUT.screen.store.format(plate=plate)


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
    return given if given else OUT.embed.checkpoint.format(model=model)


def embedding_files(model):
    """Per-plate embedding parquets of a model (or the user's files, source embeddings)."""
    if SOURCE == "embeddings":
        return wf.embedding_inputs(config, model)
    return expand(OUT.embed.embedding, model=model, plate=PLATES)


def _fitted(template, **wildcards):
    """A fitted-transform file: fitted here, or the frozen one (transforms.frozen, a folder laid
    out as the results' transforms/)."""
    path = template.format(**wildcards)
    frozen = config["transforms"]["frozen"]
    return path.replace(f"{RESULTS}/transforms", frozen, 1) if frozen else path


def transform_file(model, variant):
    """A model's fitted transform of one variant."""
    return _fitted(OUT.transform.transform, model=model, variant=variant)


def fit_report_file(model):
    """The fit report beside a model's transforms."""
    return _fitted(OUT.transform.fit_report, model=model)


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
    return expand(OUT.classify.map, model=MODELS, variant=VARIANTS)


def truth_file():
    """The demo's per-guide ground truth (only the demo has one)."""
    return [OUT.screen.truth] if SOURCE == "demo" else []


def align_files():
    """Table 1 per variant, when there are two or more models to align."""
    if not (config["identifiability"]["align"] and len(MODELS) >= 2):
        return []
    return expand(OUT.identifiability.align, variant=VARIANTS)


def structural_files():
    """Factor-recovery scores per (model, variant), where ground-truth factors exist (demo)."""
    if not (config["identifiability"]["structural"] and SOURCE == "demo"):
        return []
    return expand(OUT.identifiability.structural, model=MODELS, variant=VARIANTS)


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
    return expand(OUT.biomap.gathered, kind=("recall", "coverage", "consistency", "neighbors", "batch_metrics"))


def biomap_heatmaps():
    """One clustered gene-map heatmap per (model, variant), when biomap is on."""
    if not config["biomap"]["enabled"]:
        return []
    return expand(OUT.biomap.heatmap, model=MODELS, variant=VARIANTS)


def report_outputs():
    return [OUT.report.markdown, OUT.report.html]


# Helpers of rules/embed.smk (grouped embed jobs) and rules/transform.smk (the component sweep).


def check_groups_channels(groups):
    """Every group of plates feeds each model one channel set (phenoica.embed.groups), checked
    before any job when the stores are the user's."""
    from pathlib import Path

    from phenoica.embed.groups import PlateJob, check_group_channels

    for model, spec in config["models"].items():
        for plates in groups.values():
            jobs = [PlateJob(Path(store_path(p)), None, Path(f"{p}.parquet")) for p in plates]
            check_group_channels(jobs, spec.get("channels"), f"models.{model}.channels")


def sweep_files():
    """The component sweep per model of transforms.sweep_models (none with frozen transforms or
    transforms.sweep_points 0)."""
    if config["transforms"]["frozen"] or not config["transforms"]["sweep_points"]:
        return []
    return expand(OUT.transform.sweep, model=wf.swept_models(config))
