"""The map_readout job: each variant's profile table read once, its mAP readout
(:func:`phenoica.classify.guide_map`) and its replicate retrieval across batches
(:func:`phenoica.classify.guide_retrieval`) written beside each other."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping

import pandas as pd

from phenoica.classify._map_depth import map_null_choice
from phenoica.classify._map_readout import guide_map, guide_map_within_plate, well_profiles
from phenoica.classify._options import MapReadoutOptions
from phenoica.classify._retrieval import guide_retrieval, retrieval_axis
from phenoica.utils import check_same_variants, write_parquet


def guide_map_files(
    profiles: Mapping[str, Path | str],
    outputs: Mapping[str, Path | str],
    options: MapReadoutOptions,
    *,
    model: str,
    log: logging.Logger | None = None,
    retrievals: Mapping[str, Path | str] | None = None,
) -> None:
    """The mAP readout of each variant of ``model`` (:func:`guide_map` on its profile table, or
    :func:`guide_map_within_plate` where :func:`phenoica.classify.map_null_choice` takes the
    within-plate null; the choice logged), one variant after the other: ``profiles`` maps a variant to its profile table, ``outputs``
    to the parquet it writes (atomically); ``retrievals`` (variant -> parquet) adds each variant's
    replicate retrieval (:func:`guide_retrieval`, at most ``options.retrieval_max_guides``
    constructs and ``options.retrieval_max_wells`` wells) from the same table, and logs what it is retrieved across, or why nothing is."""
    log = log or logging.getLogger(__name__)
    check_same_variants(profiles, outputs, "profiles")
    for i, (variant, out_path) in enumerate(outputs.items(), 1):
        table = pd.read_parquet(profiles[variant])
        choice = map_null_choice(well_profiles(table), options.map_null, options.seed, model, variant)
        log.info("variant %s: the mAP readout's null is %s (%s)", variant, choice.null, choice.reason)
        out = (guide_map_within_plate if choice.null == "within_plate" else guide_map)(
            table,
            variant=variant,
            model=model,
            seed=options.seed,
            null_size=options.map_null_size,
            max_null_size=options.map_max_null_size,
            q_threshold=options.q_threshold,
            log=log,
        )
        write_parquet(out, out_path)
        log.info(
            "variant %s (%d of %d): mAP for %d guides; %d with q < 0.05",
            variant,
            i,
            len(outputs),
            len(out),
            int((out["map_q_value"] < 0.05).sum()),
        )
        if retrievals is not None:
            _write_retrieval(table, retrievals[variant], options, model, variant, log)


def _write_retrieval(
    table: pd.DataFrame,
    out_path: Path | str,
    options: MapReadoutOptions,
    model: str,
    variant: str,
    log: logging.Logger,
) -> None:
    """One variant's replicate retrieval, written atomically and logged."""
    out = guide_retrieval(
        table,
        model=model,
        variant=variant,
        max_guides=options.retrieval_max_guides,
        max_wells=options.retrieval_max_wells,
        seed=options.seed,
    )
    write_parquet(out, out_path)
    if out.empty:
        log.info("variant %s: no replicate retrieval: %s", variant, retrieval_axis(well_profiles(table))[1])
        return
    log.info(
        "variant %s: replicate retrieval across %s %.3f (mean over %d guides)",
        variant,
        out["across"].iloc[0],
        float(out["retrieval"].mean()),
        len(out),
    )
