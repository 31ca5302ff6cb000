"""What the Snakemake DAG needs to know before any job runs: the screen's plates (from the user's
table, read once per process), the plates a model trains on, the user's embedding files, the
models the sweep runs for and the study pages to link. Nothing here writes a job's output: jobs
write through the library (e.g. :func:`phenoica.models.record_training`). Kept here (not in
the .smk files) so that tests can call it without Snakemake.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from phenoica.contract import (
    BATCH,
    KEY_COLUMNS,
    PLATE,
    ScreenError,
    check_columns,
    check_plate_names,
    demo_plates,
    embedding_globs,
    normalize_names,
    output_paths,
)
from phenoica.profiles import expand_glob
from phenoica.report import read_verdict
from phenoica.utils import read_table


@functools.lru_cache(maxsize=4)
def _table(path: str) -> pd.DataFrame:
    return read_table(path, text_columns=KEY_COLUMNS)


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

    Names are normalized as everywhere else (:func:`phenoica.contract.normalize_names`: surrounding
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
        raise ScreenError(f"{name}: the table has no rows; expected one row per {per}")
    check_columns(table.columns, (PLATE, BATCH), str(name), "the plate list needs")
    pairs = normalize_names(table[[PLATE, BATCH]]).dropna().drop_duplicates()
    twice = pairs[pairs.duplicated(PLATE, keep=False)]
    if len(twice):
        raise ScreenError(f"{name}: plate {twice[PLATE].iloc[0]!r} appears in more than one batch")
    plates = dict(zip(pairs[PLATE], pairs[BATCH]))
    check_plate_names(plates, str(name))
    return plates


def scored_models(config: Mapping[str, Any]) -> list[str]:
    """The models the readouts score and the hit calls call: the first ``classify.models`` in
    name order (every model when it is null). The others are still trained, embedded,
    transformed and aligned (Table 1)."""
    models = sorted(config["models"])
    n = config["classify"]["models"]
    return models if n is None else models[: int(n)]


def swept_models(config: Mapping[str, Any]) -> list[str]:
    """The models the component sweep runs for: the first ``sweep.models`` of the scored
    models (:func:`scored_models`; every scored model when it is null), since a sweep's chosen
    point is the main run's scores."""
    models = scored_models(config)
    n = config["sweep"]["models"]
    return models if n is None else models[: int(n)]


def training_record(results: str, model: str) -> Path:
    """Where train_mae records the plates a model was trained on (written by
    :func:`phenoica.models.record_training`)."""
    return Path(output_paths(results).embed.training.format(model=model))


def training_plates(config: Mapping[str, Any], plates: Mapping[str, str], model: str) -> list[str]:
    """Plates the MAE ``model`` trains on.

    ``train.plates`` if set; else, once the model is trained, the plates recorded beside its
    checkpoint (so plates added later never retrain it or re-embed finished plates); else the
    first ``train.max_plates`` plates by name. Delete ``encoder.safetensors`` and ``training.json`` of ``results/embed/{model}/`` to retrain.
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
        raise ScreenError(f"{where}: plate(s) {unknown} are not in the screen")
    return chosen


#: The studies with pages of their own (``{results}/studies/{name}/``), in the report's order.
STUDIES: tuple[str, ...] = ("disentangle", "bilipschitz")


def study_pages(results: str) -> list[dict[str, str]]:
    """The study pages that exist under ``results`` (each with a verdict file beside it, as
    :func:`phenoica.report.write_verdict` writes it): ``{"title", "verdict", "page"}`` each, for
    the main report to link. Read when the DAG is built, so the report reruns when a study's
    verdict appears or changes, and never makes the default target run a study."""
    folders = vars(output_paths(results).studies)
    pages = (read_verdict(Path(folders[name])) for name in STUDIES)
    return [page for page in pages if page is not None]


def embedding_inputs(config: Mapping[str, Any], model: str) -> list[str]:
    """The user's embedding parquets of ``model`` (source embeddings): the files its glob matches."""
    return expand_glob(embedding_globs(config)[model])
