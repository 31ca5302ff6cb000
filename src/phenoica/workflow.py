"""What the Snakemake DAG needs to know before any job runs: plates, digests, input lists.

Kept here (not in the .smk files) so that tests can call it without Snakemake.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any, Mapping

import pandas as pd

from phenoica import screen
from phenoica.config import demo_plates
from phenoica.io import read_table
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


def plate_digest(config: Mapping[str, Any], plate: str) -> str:
    """SHA-1 of one plate's rows in the user's table ('' for sources without one).

    Rules take the table as an ``ancient`` input and this digest as a param: adding a plate
    to the table changes no other plate's digest, so only the new plate's jobs run.
    """
    table = _plate_rows(config)
    if table is None:
        return ""
    rows = table[table[screen.PLATE].astype(str) == plate]
    payload = pd.util.hash_pandas_object(rows.reset_index(drop=True), index=True).to_numpy().tobytes()
    return hashlib.sha1(payload).hexdigest()


def training_plates(config: Mapping[str, Any], plates: Mapping[str, str]) -> list[str]:
    """Plates the MAE trains on: ``train.plates`` if set, else the first ``train.max_plates``
    plates by name. Plates added later (later names) do not change the set, so adding plates
    never retrains the model or re-embeds the plates already done."""
    given = config["train"].get("plates")
    if given:
        unknown = [p for p in given if p not in plates]
        if unknown:
            raise screen.ScreenError(f"config key train.plates: plate(s) {unknown} are not in the screen")
        return list(given)
    return sorted(plates)[: config["train"]["max_plates"]]


def embedding_inputs(config: Mapping[str, Any]) -> list[str]:
    """The user's embedding parquets (source embeddings): the files the glob matches."""
    return expand_glob(str(config["screen"]["embeddings"]))
