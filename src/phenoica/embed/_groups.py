"""Which plates an embedding job takes, planned when the workflow's DAG is built.

``embed.plates_per_job`` consecutive plates make one job (:func:`embed_groups`); each plate of a
job is a :class:`PlateJob` (store, metadata, output); a job feeds its model one channel set, so
:func:`check_group_channels` refuses, before any work, a group whose stores disagree. The
workflow imports this module when it builds the DAG, so it reads only the stores' attributes:
no model, no torch (the embedding itself is :mod:`phenoica.embed._jobs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from phenoica.contract import ScreenError, channel_indices, plate_channels


@dataclass(frozen=True, eq=False)
class PlateJob:
    """One plate of a job: its store, its metadata (table or file) and its output parquet."""

    store: Path
    metadata: pd.DataFrame | Path | str
    out: Path

    @property
    def name(self) -> str:
        return self.out.name.removesuffix(".parquet")


def embed_groups(plates: Sequence[str], plates_per_job: int) -> dict[str, list[str]]:
    """Jobs of ``plates_per_job`` consecutive plates (the last may be smaller), named
    ``g0000, g0001, ...``: plates added at the end of a screen join the last job or new ones."""
    if plates_per_job < 1:
        raise ValueError(f"embed.plates_per_job must be >= 1, got {plates_per_job}")
    plates = list(plates)
    return {
        f"g{i // plates_per_job:04d}": plates[i : i + plates_per_job] for i in range(0, len(plates), plates_per_job)
    }


def check_group_channels(plates: Sequence[PlateJob], channels: Sequence[str] | None, key: str) -> list[str]:
    """The channels fed to the model, the same for every plate of the job, else ScreenError
    naming the plates of each channel set (before any work). With ``channels`` (config key
    ``key``) every store must hold them; without, the stores' own channel lists must agree."""
    if channels:
        for plate in plates:
            channel_indices(plate.store, channels, key)  # ScreenError naming the store and the key
        return list(channels)
    sets: dict[tuple[str, ...], list[str]] = {}
    for plate in plates:
        sets.setdefault(tuple(plate_channels(plate.store)), []).append(plate.name)
    if len(sets) > 1:
        listed = "; ".join(f"{list(chans)}: plates {names}" for chans, names in sets.items())
        raise ScreenError(
            f"one embedding job got plates with different channel sets ({listed}); the model takes one set: "
            "name it with config key models.<model>.channels, or keep plates_per_job at 1"
        )
    return list(next(iter(sets)))
