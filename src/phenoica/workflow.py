"""What the Snakemake DAG needs to know before any job runs: plates, digests, input lists.

Kept here (not in the .smk files) so that tests can call it without Snakemake.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from phenoica import screen
from phenoica.config import demo_plates
from phenoica.io import atomic_path, read_table
from phenoica.profiles import expand_glob


@functools.lru_cache(maxsize=4)
def _table(path: str) -> pd.DataFrame:
    return read_table(path)


def _plate_rows(config: Mapping[str, Any]) -> pd.DataFrame | None:
    """The user's table that lists plates: the metadata (zarr) or the plate map (images, ome_zarr)."""
    source = config["screen"]["source"]
    if source == "zarr":
        return _table(str(config["screen"]["metadata"]))
    if source in ("images", "ome_zarr"):
        return _table(str(config["screen"]["plate_map"]))
    return None


def screen_plates(config: Mapping[str, Any]) -> dict[str, str]:
    """{plate: batch} of the screen, in order; empty when the workflow starts from embeddings."""
    source = config["screen"]["source"]
    if source == "demo":
        return {plate: batch for batch, plate in demo_plates(config["demo"])}
    if source == "embeddings":
        return {}
    table = _plate_rows(config)
    name = config["screen"]["metadata"] if source == "zarr" else config["screen"]["plate_map"]
    for col in (screen.PLATE, screen.BATCH):
        if col not in table.columns:
            raise screen.ScreenError(f"{name}: missing required column {col}")
    pairs = table[[screen.PLATE, screen.BATCH]].astype(str).drop_duplicates()
    twice = pairs[pairs.duplicated(screen.PLATE, keep=False)]
    if len(twice):
        raise screen.ScreenError(f"{name}: plate {twice[screen.PLATE].iloc[0]!r} appears in more than one batch")
    return dict(zip(pairs[screen.PLATE], pairs[screen.BATCH]))


@functools.lru_cache(maxsize=4)
def _plate_digests(path: str) -> dict[str, str]:
    """SHA-1 of each plate's rows of the table at ``path`` (one pass over the table)."""
    table = _table(path)
    plates = table[screen.PLATE].astype(str)
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
    if source not in ("zarr", "images", "ome_zarr"):
        return ""
    path = config["screen"]["metadata"] if source == "zarr" else config["screen"]["plate_map"]
    return _plate_digests(str(path)).get(plate, "")


def training_record(results: str, model: str) -> Path:
    """Where train_mae records the plates a model was trained on."""
    return Path(results) / "models" / model / "training.json"


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


def embedding_inputs(config: Mapping[str, Any]) -> list[str]:
    """The user's embedding parquets (source embeddings): the files the glob matches."""
    return expand_glob(str(config["screen"]["embeddings"]))


def record_training(path: Path | str, stores: list[str], summary: Mapping[str, Any]) -> None:
    """Write the training record (plates trained on + summary) atomically."""
    plates = [Path(s).name.removesuffix(".zarr") for s in stores]
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps({"plates": plates, "summary": dict(summary)}, indent=2, default=str))


PLATE_COUNT_KEYS = ("n_batches", "plates_per_batch")


def plate_design_params(demo: Mapping[str, Any]) -> dict[str, Any]:
    """The demo keys one simulated plate depends on: all but the plate count, so that adding
    plates or batches does not re-simulate (and re-embed) the plates already made."""
    return {k: v for k, v in demo.items() if k not in PLATE_COUNT_KEYS}
