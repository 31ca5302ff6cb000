"""The readouts of a screen, each one registered unit.

A readout scores every guide of a screen against its controls and calls hits at a known error
rate. The workflow has two: the classifier (LightGBM per guide and fold, against its pseudo-guide
null) and the mAP readout (copairs average precision against the plates' control wells, with a
permutation null). Each is a :class:`Readout` registered under its name
(:func:`register_readout`, as encoders are with ``register_model``), and everything that speaks of
readouts loops over :func:`registered_readouts`, in registration order:

- the door's capacity count (:func:`readout_capacity`: what each readout can score on a screen's
  table before any job runs);
- the hit table (:func:`phenoica.hits.hit_table`: one column group per readout, each built by its
  :attr:`Readout.guide_table` at the gather step), the calls' agreement
  (:func:`phenoica.hits.agreement_classes`, :func:`phenoica.hits.readout_agreement`) and the
  notes on what a (model, variant) could not call;
- the report: the headline's calls per readout, the hits shown, the agreement section.

So a new readout is one registration: how it counts its capacity on a screen's table, how it reads
its per-guide table at the gather step, and the names of its columns. The first registered
readout (the classifier) is the primary one: its rows define the hit table's guides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import pandas as pd

from phenoica.classify._distance import DISTANCE_COLUMNS
from phenoica.classify._options import ClassifyOptions, SplitOptions
from phenoica.contract import GENE, GUIDE

if TYPE_CHECKING:
    from phenoica.classify._capacity import ReadoutCapacity

#: The columns that identify a guide in every readout's per-guide table.
GUIDE_KEYS: tuple[str, ...] = ("model", "variant", GENE, GUIDE)


@dataclass(frozen=True)
class ReadoutInputs:
    """What the gather step holds when it builds the hit table: the guide summary with the
    classifier's calls (``guides``: real guides and pseudo-guides, as
    :func:`phenoica.hits.call_guides` returns it), the mAP readout's per-guide table (``map_table``,
    :func:`phenoica.classify.guide_map`'s columns; None where it did not run) and the q-value below
    which a guide is a hit."""

    guides: pd.DataFrame
    map_table: pd.DataFrame | None
    q_threshold: float = 0.05


#: (screen table, validated workflow config, the table's folds or None) -> what the readout scores.
CapacityCount = Callable[[pd.DataFrame, Mapping[str, Any], "Sequence[Any] | None"], "ReadoutCapacity"]
#: The gather step's inputs -> the readout's per-guide table (``GUIDE_KEYS`` and its columns), or
#: None where it did not run.
GuideTable = Callable[[ReadoutInputs], "pd.DataFrame | None"]


@dataclass(frozen=True)
class Readout:
    """One readout: its names, its hit-table columns and the functions that count and read it.

    ``name`` names it in notes and table values (``classifier_only``); ``label`` is how the report
    writes it (``mAP``); ``short`` names it in combined column names (``spearman_auroc_map``).
    ``statistic``, ``p_value``, ``q_value`` and ``hit`` are its hit-table columns; ``columns`` all
    the hit-table columns it contributes, in order (``hit`` among them or computed as ``q_value <
    q_threshold``). ``enabled`` says whether a workflow config runs it; ``capacity`` counts what it
    scores on a screen's table (``needs_units``: only once the classified units are counted, not on
    a plate map read before the images). ``guide_table`` reads its per-guide table at the gather
    step. ``scored_when`` says what a guide needs to be scored, for the note of a (model, variant)
    where it scored none."""

    name: str
    label: str
    short: str
    statistic: str
    p_value: str
    q_value: str
    hit: str
    columns: tuple[str, ...]
    enabled: Callable[[Mapping[str, Any]], bool]
    capacity: CapacityCount
    guide_table: GuideTable
    needs_units: bool = False
    scored_when: str = ""


_READOUTS: dict[str, Readout] = {}


def register_readout(readout: Readout) -> Readout:
    """Register ``readout`` under its name (once); returns it."""
    if readout.name in _READOUTS:
        raise ValueError(f"readout {readout.name!r} is registered twice")
    clash = [r.name for r in _READOUTS.values() if set(r.columns) & set(readout.columns)]
    if clash:
        raise ValueError(f"readout {readout.name!r} shares hit-table columns with {clash}")
    _READOUTS[readout.name] = readout
    return readout


def unregister_readout(name: str) -> None:
    """Remove the readout registered under ``name`` (a readout added for one analysis or test)."""
    _READOUTS.pop(name, None)


def registered_readouts() -> tuple[Readout, ...]:
    """Every registered readout, in registration order (the classifier first)."""
    return tuple(_READOUTS.values())


# The capacity counts import the classifier's engine (and LightGBM): the hit calls, which read the
# registry, do not.


def _classifier_capacity(
    table: pd.DataFrame, config: Mapping[str, Any], folds: Sequence[Any] | None
) -> ReadoutCapacity:
    from phenoica.classify._capacity import classifier_capacity
    from phenoica.classify._lightgbm_params import min_data_in_leaf_of

    cfg = config["classify"]
    # what is scored does not depend on LightGBM's parameters (the door checks those on their own)
    options = ClassifyOptions.from_config({**config, "classify": {**cfg, "lightgbm": {}}})
    splits = SplitOptions.from_config(config)
    leaf = min_data_in_leaf_of(cfg["lightgbm"])
    return classifier_capacity(table, splits, options, config["hits"]["null_model"], config["seed"], folds, leaf)


def _map_capacity(table: pd.DataFrame, config: Mapping[str, Any], folds: Sequence[Any] | None) -> ReadoutCapacity:
    from phenoica.classify._capacity import map_capacity

    options = config["classify"]
    q = float(config["hits"]["q_threshold"])
    return map_capacity(table, q, int(options["map_max_null_size"]), str(options["map_null"]))


def _classifier_table(inputs: ReadoutInputs) -> pd.DataFrame:
    guides = inputs.guides
    real = guides[~guides["is_null_guide"].astype(bool)]
    return real[[*GUIDE_KEYS, *CLASSIFIER.columns]]


def _map_table(inputs: ReadoutInputs) -> pd.DataFrame | None:
    table = inputs.map_table
    if table is None or not len(table):
        return None
    return table[[*GUIDE_KEYS, "mean_average_precision", "map_p_value", "map_q_value"]]


CLASSIFIER = register_readout(
    Readout(
        name="classifier",
        label="classifier",
        short="auroc",
        statistic="auroc",
        p_value="p_value",
        q_value="q_value",
        hit="hit",
        columns=(
            "n_folds_ok",
            "auroc",
            *DISTANCE_COLUMNS,
            "p_value",
            "p_beyond_null",
            "q_value",
            "hit",
        ),
        enabled=lambda config: True,
        capacity=_classifier_capacity,
        guide_table=_classifier_table,
        needs_units=True,
        scored_when="a scored fold needs classify.min_train_samples training and classify.min_test_samples "
        "held-out rows",
    )
)

MAP = register_readout(
    Readout(
        name="map",
        label="mAP",
        short="map",
        statistic="mean_average_precision",
        p_value="map_p_value",
        q_value="map_q_value",
        hit="map_hit",
        columns=("mean_average_precision", "map_p_value", "map_q_value", "map_hit"),
        enabled=lambda config: bool(config["classify"]["map_readout"]),
        capacity=_map_capacity,
        guide_table=_map_table,
        scored_when="guides need 2 wells or more, on plates with control wells",
    )
)


def readout_capacity(
    table: pd.DataFrame, config: Mapping[str, Any], units_known: bool = True, folds: Sequence[Any] | None = None
) -> tuple[list[ReadoutCapacity], list[str], list[str]]:
    """Every readout the workflow ``config`` (validated) runs, on a screen's table: (capacities,
    problems, notes). A note per readout that leaves guides unscored or cannot call hits (the
    count, the first names, the setting that would change it); a problem only when no readout can
    score any guide. ``units_known`` False (a plate map read before the images are counted) skips
    the readouts that count the classified units (the classifier's training counts would be lower
    bounds). ``folds``: the table's folds, when the caller built them already."""
    enabled = [r for r in registered_readouts() if r.enabled(config)]
    counted = [r for r in enabled if units_known or not r.needs_units]
    out = [r.capacity(table, config, folds) for r in counted]
    notes = [f"readout {c.readout}: {c.reason}" for c in out if c.reason]
    problems = []
    if out and len(out) == len(enabled) and not any(c.n_scored for c in out):
        problems.append(
            "no readout can score any guide: " + "; ".join(f"{c.readout}: {c.reason}" for c in out if c.reason)
        )
    return out, problems, notes
