"""What the Snakemake DAG needs to know before any job runs: plates, digests, input lists, the
study pages to link, and the params of every rule. Nothing here writes a job's output: jobs
write through the library (e.g. :func:`phenoica.models.mae.record_training`).

Rule params are what Snakemake reruns a job for, so a rule passes exactly the values its
output depends on (:func:`job_params`), never a whole config section. Which keys reach which
rule is declared once, in the schema (``x-jobs``; :func:`phenoica.contract.config.key_jobs`): a key that
changes only speed, memory, storage layout or log output (``x-run-time: speed``) is never a
param, and scripts read those at run time (:func:`with_speed_settings`). Params are canonical (mapping keys
sorted), so reordering the keys of a config file reruns nothing.

Kept here (not in the .smk files) so that tests can call it without Snakemake.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from phenoica.contract import screen
from phenoica.contract.config import deep_merge, demo_plates, embedding_globs
from phenoica.contract.schema import key_jobs, package_schema
from phenoica.profiles.embeddings import expand_glob
from phenoica.report import render
from phenoica.utils.io import read_table
from phenoica.workflow.paths import output_paths


@functools.lru_cache(maxsize=4)
def _table(path: str) -> pd.DataFrame:
    return read_table(path, text_columns=screen.KEY_COLUMNS)


def user_table(path: Path | str) -> pd.DataFrame:
    """The user's metadata table or plate map, read once per process (DAG building reads it for
    the plate list, the per-plate digests and the screen check). Do not modify it."""
    return _table(str(path))


def _plate_list_table(config: Mapping[str, Any]) -> pd.DataFrame | None:
    """The user's table that lists plates: the metadata (zarr) or the plate map (images, ome_zarr)."""
    source = config["screen"]["source"]
    if source == "zarr":
        return _table(str(config["screen"]["metadata"]))
    if source in ("images", "ome_zarr", "loaddata"):
        return _table(str(config["screen"]["plate_map"]))
    return None


def screen_plates(config: Mapping[str, Any]) -> dict[str, str]:
    """{plate: batch} of the screen, in order; empty when the workflow starts from embeddings.

    Names are normalized as everywhere else (:func:`phenoica.contract.screen.normalize_names`: surrounding
    whitespace removed). An empty table, a missing plate or batch column (with the column
    probably meant) and a plate in two batches are errors naming the file.
    """
    source = config["screen"]["source"]
    if source == "demo":
        return {plate: batch for batch, plate in demo_plates(config["demo"])}
    if source == "embeddings":
        return {}
    table = _plate_list_table(config)
    name = config["screen"]["metadata"] if source == "zarr" else config["screen"]["plate_map"]
    per = "image" if source == "zarr" else "well"
    if len(table) == 0:
        raise screen.ScreenError(f"{name}: the table has no rows; expected one row per {per}")
    screen.check_columns(table.columns, (screen.PLATE, screen.BATCH), str(name), "the plate list needs")
    pairs = screen.normalize_names(table[[screen.PLATE, screen.BATCH]]).dropna().drop_duplicates()
    twice = pairs[pairs.duplicated(screen.PLATE, keep=False)]
    if len(twice):
        raise screen.ScreenError(f"{name}: plate {twice[screen.PLATE].iloc[0]!r} appears in more than one batch")
    plates = dict(zip(pairs[screen.PLATE], pairs[screen.BATCH]))
    screen.check_plate_names(plates, str(name))
    return plates


@functools.lru_cache(maxsize=4)
def plate_digests(path: str) -> dict[str, str]:
    """SHA-1 of each plate's rows of the table at ``path`` (one pass over the table), by
    normalized plate name."""
    table = _table(path)
    plates = screen.normalize_names(table[[screen.PLATE]])[screen.PLATE].astype(str)
    hashes = pd.util.hash_pandas_object(table, index=False).to_numpy()
    out = {}
    for plate, rows in pd.Series(np.arange(len(table))).groupby(plates.to_numpy(), sort=False):
        out[str(plate)] = hashlib.sha1(hashes[rows.to_numpy()].tobytes()).hexdigest()
    return out


def plate_digest(config: Mapping[str, Any], plate: str) -> str:
    """SHA-1 of one plate's rows in the user's table ('' for sources without one).

    Rules take the table as an ``ancient`` input and this digest as a param: adding a plate
    to the table changes no other plate's digest, so only the new plate's jobs run. All
    plates' digests come from one pass over the table (cached), so a screen of hundreds of
    plates and millions of rows builds its DAG quickly.
    """
    source = config["screen"]["source"]
    if source not in ("zarr", "images", "ome_zarr", "loaddata"):
        return ""
    path = config["screen"]["metadata"] if source == "zarr" else config["screen"]["plate_map"]
    return plate_digests(str(path)).get(plate, "")


#: Bytes read from each sampled file of a store by :func:`store_digest` (its first and last).
DIGEST_SAMPLE_BYTES = 4096
#: A store's metadata documents: small, read whole by :func:`store_digest`.
STORE_DOCUMENTS: tuple[str, ...] = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")
#: Files of a store whose sampled bytes enter :func:`store_digest` (spread over the sorted list).
DIGEST_SAMPLE_FILES = 4


def _sample(path: str, size: int) -> bytes:
    """The first and last :data:`DIGEST_SAMPLE_BYTES` of a file (a metadata document: whole)."""
    if Path(path).name in STORE_DOCUMENTS:
        return Path(path).read_bytes()
    with open(path, "rb") as fh:
        head = fh.read(DIGEST_SAMPLE_BYTES)
        if size > 2 * DIGEST_SAMPLE_BYTES:
            fh.seek(size - DIGEST_SAMPLE_BYTES)
        return head + fh.read(DIGEST_SAMPLE_BYTES)


def store_digest(path: Path | str, pattern: str = "**/*") -> str:
    """A content digest of a plate's files (a Zarr or OME-Zarr store, or the image files of a
    plate): SHA-1 over every file's relative path, size and modification time (ns), plus the
    first and last bytes of a few files spread over the store and the whole of its small
    metadata documents (``zarr.json``, ``.zarray``, ``.zattrs``, ``.zgroup``).

    A rule takes it as a param, so that a store rewritten in place (same names, new pixels:
    new times, and where those were kept, new sampled bytes) reruns that plate's jobs, while a
    store left alone plans nothing. One ``os.scandir`` walk and a few small reads per plate;
    ``benchmarks/store_digest.py`` measures it on a genome-scale plate list. ``''`` when the
    path does not exist (the screen check reports that).
    """
    root = Path(path)
    if not root.exists():
        return ""
    files = [(root.name, str(root), root.stat())] if root.is_file() else sorted(_walk(str(root), ""))
    h = hashlib.sha1()
    for rel, _, st in files:
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    documents = [f for f in files if f[0].rsplit("/", 1)[-1] in STORE_DOCUMENTS]
    chunks = [f for f in files if f[0].rsplit("/", 1)[-1] not in STORE_DOCUMENTS]
    step = max(1, len(chunks) // DIGEST_SAMPLE_FILES)
    for _, full, st in documents + chunks[::step][:DIGEST_SAMPLE_FILES]:
        h.update(_sample(full, st.st_size))
    return h.hexdigest()


def _walk(root: str, prefix: str) -> Iterable[tuple[str, str, Any]]:
    """(relative path, path, stat) of every file below ``root`` (symlinks followed)."""
    with os.scandir(root) as entries:
        for entry in entries:
            rel = f"{prefix}{entry.name}"
            if entry.is_dir():
                yield from _walk(entry.path, rel + "/")
            elif entry.is_file():
                yield rel, entry.path, entry.stat()


def plate_store_digest(config: Mapping[str, Any], plate: str) -> str:
    """The content digest of what ingesting one plate reads (its rule's ``store`` param):
    :func:`store_digest` of the Zarr store (source zarr), of the OME-Zarr HCS plate (ome_zarr),
    or of the plate's image files (images: the plate's folder below ``images_dir`` when the
    pattern starts with ``{plate}/``; else the files the pattern matches for the plate; the whole
    ``images_dir`` for a pattern without ``{plate}``, whose files are every plate's). Source
    loaddata: the channel mapping, each site's files as the plate's rows of the LoadData CSVs name
    them (:func:`phenoica.sources.loaddata.plate_inputs`), and each file's path, size and time
    with the first and last bytes of a few of them, as :func:`store_digest` hashes a store's
    files. So editing a plate's rows of a CSV, or rewriting an image they name, reruns that
    plate alone. ``''`` for sources without user pixels (demo, embeddings)."""
    cfg = config["screen"]
    source = cfg["source"]
    if source == "zarr":
        return store_digest(Path(cfg["plates_dir"]) / f"{plate}.zarr")
    if source == "ome_zarr":
        return store_digest(Path(cfg["ome_zarr_dir"]) / f"{plate}.zarr")
    if source == "images":
        pattern = str(cfg["image_pattern"])
        if pattern.startswith("{plate}/"):
            return store_digest(Path(cfg["images_dir"]) / plate)
        if "{plate}" not in pattern:
            return store_digest(cfg["images_dir"])
        from phenoica.sources.images import discover_images

        files = discover_images(cfg["images_dir"], pattern, plate)["path"].tolist()
        header = pattern
    elif source == "loaddata":
        from phenoica.sources.loaddata import plate_inputs

        header, files = plate_inputs(cfg["loaddata"], cfg["loaddata_channels"], cfg["loaddata_illum"], plate)
    else:
        return ""
    lines, present = [header, "\n"], []
    for name in files:
        try:
            st = os.stat(name)
        except OSError:
            lines.append(f"{name}\0absent\n")
            continue
        lines.append(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n")
        present.append((name, st.st_size))
    h = hashlib.sha1("".join(lines).encode())
    for name, size in present[:: max(1, len(present) // DIGEST_SAMPLE_FILES)][:DIGEST_SAMPLE_FILES]:
        h.update(_sample(name, size))
    return h.hexdigest()


def swept_models(config: Mapping[str, Any]) -> list[str]:
    """The models the component sweep runs for: the first ``transforms.sweep_models`` in name
    order (every model when it is null)."""
    models = sorted(config["models"])
    n = config["transforms"]["sweep_models"]
    return models if n is None else models[: int(n)]


def feature_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """The feature-column keys of ``config["screen"]`` that gather_profiles reads (source
    embeddings chooses its features by them; phenoica's own embeddings are the default,
    ``emb_``): its params, so that declaring other features regathers the profiles."""
    keys = ("feature_prefix", "feature_regex", "feature_columns")
    return {k: config["screen"][k] for k in keys}


def training_record(results: str, model: str) -> Path:
    """Where train_mae records the plates a model was trained on (written by
    :func:`phenoica.models.mae.record_training`)."""
    return Path(output_paths(results).embed.training.format(model=model))


def training_plates(config: Mapping[str, Any], plates: Mapping[str, str], model: str) -> list[str]:
    """Plates the MAE ``model`` trains on.

    ``train.plates`` if set; else, once the model is trained, the plates recorded beside its
    checkpoint (so plates added later never retrain it or re-embed finished plates); else the
    first ``train.max_plates`` plates by name. Delete ``results/models/{model}`` to retrain.
    """
    given = config["train"].get("plates")
    record = training_record(config["results"], model)
    if given:
        chosen = list(given)
    elif record.exists():
        chosen = list(json.loads(record.read_text())["plates"])
    else:
        chosen = sorted(plates)[: config["train"]["max_plates"]]
    unknown = [p for p in chosen if p not in plates]
    if unknown:
        where = "config key train.plates" if given else str(record)
        raise screen.ScreenError(f"{where}: plate(s) {unknown} are not in the screen")
    return chosen


#: The studies with pages of their own (``{results}/studies/{name}/``), in the report's order.
STUDIES: tuple[str, ...] = ("disentangle", "bilipschitz")


def study_pages(results: str) -> list[dict[str, str]]:
    """The study pages that exist under ``results`` (each with a verdict file beside it, as
    :func:`phenoica.report.render.write_verdict` writes it): ``{"title", "verdict", "page"}`` each, for
    the main report to link. Read when the DAG is built, so the report reruns when a study's
    verdict appears or changes, and never makes the default target run a study."""
    folders = vars(output_paths(results).studies)
    pages = (render.read_verdict(Path(folders[name])) for name in STUDIES)
    return [page for page in pages if page is not None]


def embedding_inputs(config: Mapping[str, Any], model: str) -> list[str]:
    """The user's embedding parquets of ``model`` (source embeddings): the files its glob matches."""
    return expand_glob(embedding_globs(config)[model])


# --------------------------------------------------------------------------- rule params


def canonical(value: Any) -> Any:
    """``value`` with every mapping's keys sorted (recursively): the params Snakemake records
    are compared as text, so key order must not count."""
    if isinstance(value, Mapping):
        return {str(k): canonical(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def _entries(
    values: Mapping[str, Any], schema: Mapping[str, Any]
) -> Iterable[tuple[str, Any, Mapping[str, Any], bool]]:
    """``(key, value, key schema, is a run-time key)`` for each entry of a config mapping."""
    props = schema.get("properties") or {}
    speed_only = set(schema.get("x-speed-only-keys", ()))
    for key, value in values.items():
        sub = props.get(key) or {}
        yield key, value, sub, bool(sub.get("x-run-time")) or key in speed_only


def _reaching(
    values: Mapping[str, Any], schema: Mapping[str, Any], job: str | None, inherited: tuple[str, ...]
) -> dict[str, Any]:
    """The entries of ``values`` whose declared jobs (the key's ``x-jobs``, else ``inherited``)
    include ``job`` (every entry when ``job`` is None), run-time keys left out, mappings
    filtered the same way inside."""
    out: dict[str, Any] = {}
    for key, value, sub, run_time in _entries(values, schema):
        jobs = tuple(sub.get("x-jobs", inherited))
        if run_time or (job is not None and job not in jobs):
            continue
        out[key] = _reaching(value, sub, job, jobs) if isinstance(value, Mapping) else value
    return out


def _run_time_only(values: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value, sub, run_time in _entries(values, schema):
        if run_time:
            out[key] = value
        elif isinstance(value, Mapping):
            inner = _run_time_only(value, sub)
            if inner:
                out[key] = inner
    return out


@functools.lru_cache(maxsize=1)
def _annotated_jobs() -> frozenset[str]:
    """Every rule some key of the package's schema reaches (read once per process)."""
    return frozenset(job for jobs in key_jobs().values() for job in jobs)


def _section_schema(section: str) -> Mapping[str, Any]:
    properties = package_schema()["properties"]
    if section not in properties:
        raise KeyError(f"the config schema has no section {section!r}")
    return properties[section]


def job_params(config: Mapping[str, Any], section: str, job: str) -> dict[str, Any]:
    """The values of ``config[section]`` the output of rule ``job`` depends on: the keys whose
    schema annotation (``x-jobs``, the key's own or its section's) names ``job``, without the
    run-time keys (``x-run-time``), mapping keys sorted (:func:`canonical`).

    Rules pass this (or single values) as params, so that Snakemake reruns a job only when a
    value it reads changes; which keys reach which job is declared once, in the schema.
    """
    schema = _section_schema(section)
    if job not in _annotated_jobs():
        raise KeyError(f"no config key of the schema reaches a job {job!r} (x-jobs annotations)")
    return canonical(_reaching(config[section], schema, job, tuple(schema.get("x-jobs", ()))))


def without_run_time(config: Mapping[str, Any], section: str) -> dict[str, Any]:
    """``config[section]`` without its run-time keys (``x-run-time``), mapping keys sorted: what
    a reader of the whole section (the check at the door) depends on."""
    return canonical(_reaching(config.get(section) or {}, _section_schema(section), None, ()))


def speed_settings(config: Mapping[str, Any], section: str) -> dict[str, Any]:
    """The run-time-only keys of ``config[section]`` that are set (speed-only and screen-size
    keys, nested as in the config): what a script adds to its params at run time."""
    return _run_time_only(config.get(section) or {}, _section_schema(section))


def with_speed_settings(params: Mapping[str, Any], config: Mapping[str, Any], section: str) -> dict[str, Any]:
    """A job's params for ``config[section]`` completed with the section's run-time-only keys:
    what a script hands the library. The only way a script reads ``snakemake.config``."""
    return deep_merge(params, speed_settings(config, section))


def lightgbm_report_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """The LightGBM parameters every classifier used (Table 6 + ``classify.lightgbm``, canonical
    names), for the report: without the seed, the thread count, the log level and the other
    keys that change only speed or logs (``x-speed-only-keys``)."""
    from phenoica.classify.params import lightgbm_params  # imports lightgbm: only when asked for

    speed_only = set(_section_schema("classify")["properties"]["lightgbm"]["x-speed-only-keys"])
    params = lightgbm_params(config["classify"], config["seed"])
    return canonical({k: v for k, v in params.items() if k not in speed_only and k != "seed"})


def splits_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """What the folds depend on: the scheme, and for ``in_distribution`` its share, repeats and
    the seed (leave-one-batch-out draws nothing)."""
    splits = config["splits"]
    if splits["scheme"] == "leave_one_batch_out":
        return {"scheme": splits["scheme"]}
    return canonical({**job_params(config, "splits", "splits"), "seed": config["seed"]})
