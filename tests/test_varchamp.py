"""A real screen in CI, run as a user runs it: the shipped VarChAMP Batch 12 export
(data/varchamp-batch12/, the authors' file unchanged) through config/scenarios/varchamp.yaml, with a
config and no code, to the report. What is known of it is asserted: the door's notes, the run's
completion, the positive controls standing apart from the negative controls in the readout that
can answer (the mAP readout: 4 wells of a construct on one plate leave the classifier nothing to
train on), and calls stable across two seeds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.test_workflow import REPO, SCENARIOS, snakemake

#: The positive-control constructs of the export (Metadata_node_type PC and cPC), after whitespace
#: is stripped: ALK and one allele, and four gene / allele pairs.
POSITIVE = [
    "ALK",
    "ALK_Arg1275Gln",
    "AGXT",
    "AGXT_Asp201Asn",
    "GSS",
    "GSS_Arg125Cys",
    "HPRT1",
    "HPRT1_His204Asp",
    "KLH3",
    "KHL3_Cys164Phe",
]
NEGATIVE = ["MAPK9", "PRKACB", "RHEB", "SLIRP"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """The scenario run once, in a folder holding its config and the shipped data."""
    work = tmp_path_factory.mktemp("varchamp")
    shutil.copy(SCENARIOS / "varchamp.yaml", work / "config.yaml")
    (work / "data").symlink_to(REPO / "data")
    snakemake(work)
    return work / yaml.safe_load((SCENARIOS / "varchamp.yaml").read_text())["results"]


@pytest.mark.slow
def test_the_real_screen_runs_to_the_report_with_the_doors_notes(run):
    record = json.loads((run / "screen" / "validated.json").read_text())
    notes = "\n".join(record["notes"])
    assert "screen.rows keeps 360 of 719 rows" in notes
    assert "8 row(s) without a gene, guide or role dropped as empty wells" in notes
    assert "'HPRT1 ' -> 'HPRT1'" in notes
    assert "Nuclei_Correlation_Costes_Mito_DNA" in notes and "dropped (profiles.outliers: drop)" in notes
    classifier = next(n for n in record["notes"] if n.startswith("readout classifier"))
    assert (
        "lower classify.min_train_samples to 3" in classifier and "in_distribution" not in classifier.split("Ways")[1]
    )
    plan = json.loads((run / "profiles" / "cellprofiler.hygiene.json").read_text())
    assert plan["missing"] and "Nuclei_Correlation_Costes_Mito_DNA" in plan["outliers"]
    page = (run / "report" / "report.md").read_text()
    assert "## Profile hygiene" in page and (run / "report" / "index.html").exists()
    sweep = pd.read_parquet(run / "sweep" / "cellprofiler.parquet")
    assert len(sweep) > 0


@pytest.mark.slow
def test_positive_controls_stand_apart_from_the_negative_controls(run):
    """In the mAP readout (base variant), the positive-control constructs are active and rank
    above the perturbations' median; the negative-control constructs are the reference."""
    maps = pd.read_parquet(run / "classify" / "map.parquet")
    base = maps[maps["variant"] == "base"].set_index("Metadata_Guide")
    positive = base.loc[[g for g in POSITIVE if g in base.index]]
    assert len(positive) == len(POSITIVE)
    others = base.drop(index=positive.index)
    assert (positive["map_q_value"] < 0.05).sum() >= 8, positive[["mean_average_precision", "map_q_value"]]
    assert positive["mean_average_precision"].median() > others["mean_average_precision"].median()
    assert not set(NEGATIVE) & set(base.index)  # the controls are the reference, not scored as guides


@pytest.mark.slow
def test_the_map_calls_are_stable_across_two_seeds(run, tmp_path):
    """The mAP readout run again with another seed on the run's own profiles changes at most 2%
    of the calls, in every variant."""
    from phenoica.classify import MapReadoutOptions, guide_map_files
    from phenoica.contract import validate_config

    cfg = validate_config(yaml.safe_load((SCENARIOS / "varchamp.yaml").read_text()))
    variants = cfg["transforms"]["variants"]
    profiles = {v: run / "transforms" / "cellprofiler" / f"{v}.parquet" for v in variants}
    calls = []
    for seed in (0, 1):
        options = MapReadoutOptions.from_config({**cfg, "seed": seed})
        outputs = {v: tmp_path / str(seed) / f"{v}.parquet" for v in variants}
        guide_map_files(profiles, outputs, options, model="cellprofiler")
        table = pd.concat([pd.read_parquet(p) for p in outputs.values()])
        calls.append(table.set_index(["variant", "Metadata_Guide"])["map_q_value"] < 0.05)
    flipped = float(np.mean(calls[0].sort_index().to_numpy() != calls[1].sort_index().to_numpy()))
    assert flipped <= 0.02, flipped
