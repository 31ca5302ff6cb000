"""What the DAG needs of the studies, importable without torch or matplotlib: the names of the
jobs each study plans. The study modules (:mod:`~phenoica.studies.disentangle`,
:mod:`~phenoica.studies.bilipschitz`) import these from here, so each is defined once, and
building the DAG (every ``snakemake`` call, a dry run too) does not load the training code.
"""

from __future__ import annotations

from typing import Sequence

#: disentangle: the models scored from the AE's latents (no training job of their own).
AE_DERIVED: tuple[str, ...] = ("ae_ica", "ae_rand", "ae_oracle")

#: bilipschitz: its datasets, and the group of the models trained on all samples of one.
DATASETS: tuple[str, ...] = ("isometric", "digits", "mnist")
ALL_GROUP = "all"


def parse_group(group: str) -> int | None:
    """``"all"`` -> None; ``"digit{k}"`` -> k (a digit-specific model)."""
    if group == ALL_GROUP:
        return None
    if group.startswith("digit") and group[5:].isdigit():
        return int(group[5:])
    raise ValueError(f"group must be 'all' or 'digit<k>', got {group!r}")


def dataset_groups(dataset: str, per_digit: Sequence[int]) -> list[str]:
    """Model groups of a dataset: ``all``, plus ``digit{k}`` for labelled datasets."""
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    extra = [f"digit{int(k)}" for k in per_digit] if dataset != "isometric" else []
    return [ALL_GROUP, *extra]


def alpha_label(alpha: float) -> str:
    """The file-name form of an alpha (``f"{alpha:g}"``); ``float(alpha_label(a)) == a``."""
    return f"{float(alpha):g}"
