"""Where on the plate: the simulator's position effect, the plate's wells, the position summary on
the control wells (phenoica.hits._positions), the position-aware null (phenoica.classify._null) and
the report's plate maps (phenoica.report._plates_section)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from phenoica.classify import control_mask, null_guide_design, null_layout_choice, position_null_design
from phenoica.contract import BATCH, CONTROL, GUIDE, PERT_TYPE, PLATE, WELL
from phenoica.hits import plate_grid
from phenoica.hits._positions import plate_wells, position_summary, well_grid_position
from phenoica.screen import arrayed

#: The scenario's screen, smaller in features (the position effect acts on the programmes).
PLANTED = dataclasses.replace(arrayed.POSITION_DESIGN, n_features=60, n_latent=12)
NO_POSITION = dataclasses.replace(PLANTED, edge_effect=0.0, row_gradient=0.0)


def _profiles(design: arrayed.ArrayedDesign, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    return arrayed.screen_profiles(design, seed)


# --------------------------------------------------------------------------- the simulator


def test_new_effects_off_leave_the_default_screen_as_it_was():
    """The default design draws nothing new: no reference columns, controls in the central block,
    and the profiles equal to those of a design that names every new field at its off value."""
    default, truth = _profiles(arrayed.ArrayedDesign(n_effect_genes=3, n_null_genes=2, n_latent=4, n_features=12))
    off = arrayed.ArrayedDesign(
        n_effect_genes=3, n_null_genes=2, n_latent=4, n_features=12, control_layout="centre", edge_effect=0.0,
        row_gradient=0.0, n_allele_genes=0,
    )  # fmt: skip
    again, _ = _profiles(off)
    pd.testing.assert_frame_equal(default, again)
    assert arrayed.REFERENCE not in default.columns and "reference" not in truth.columns
    assert set(default.loc[default[PERT_TYPE] == CONTROL, WELL]) == set(arrayed.well_names(16))


def test_position_effect_shifts_edge_wells_and_rows_as_declared():
    design = arrayed.ArrayedDesign(n_latent=4, n_features=12, edge_effect=2.0, row_gradient=3.0)
    wells = ["A01", "H12", "P24", "H01", "C05"]
    shifts = arrayed.position_shifts(design, wells, seed=0)
    edge_p = np.flatnonzero(np.abs(shifts[0]) > 0)  # A01: edge and first row
    assert shifts.shape == (5, 4)
    # the edge programme: 2.0 on the edge wells (A01, P24, H01), 0 inside (H12, C05)
    edge = [p for p in range(4) if set(np.round(shifts[:, p], 6)) <= {0.0, 2.0} and shifts[:, p].any()]
    assert len(edge) == 1 and shifts[[0, 2, 3], edge[0]].tolist() == [2.0, 2.0, 2.0]
    assert shifts[[1, 4], edge[0]].tolist() == [0.0, 0.0]
    row = [p for p in edge_p if p != edge[0]][0]
    np.testing.assert_allclose(shifts[:, row], 3.0 * (np.array([0, 7, 15, 7, 2]) / 15 - 0.5))
    assert not arrayed.position_shifts(arrayed.ArrayedDesign(), wells, 0).any()


def test_scattered_controls_and_allele_pairs():
    profiles, truth = _profiles(PLANTED)
    controls = profiles[profiles[PERT_TYPE] == CONTROL]
    assert controls.groupby(PLATE).size().eq(64).all() and controls.groupby(GUIDE)[WELL].nunique().eq(16).all()
    assert controls.groupby(WELL)[GUIDE].nunique().eq(1).all()  # the same construct at a well on every plate
    edge = [well_grid_position(w) for w in controls[WELL].unique()]
    assert any(r in (0, 15) or c in (0, 23) for r, c in edge)  # controls reach the edge
    alleles = truth[truth["reference"] != ""]
    assert len(alleles) == 4 * 3 and alleles["differs_from_reference"].sum() == 4 * 2
    assert set(alleles["reference"]) <= set(truth[GUIDE])
    # an allele carries its wild type's shift; a differing one more programmes
    for _, row in alleles.iterrows():
        wild = truth.set_index(GUIDE).loc[row["reference"], "programmes"]
        assert row["programmes"].startswith(wild)
        assert (row["programmes"] != wild) == row["differs_from_reference"]
    assert set(profiles.loc[profiles[GUIDE].isin(alleles[GUIDE]), arrayed.REFERENCE]) == set(alleles["reference"])


# --------------------------------------------------------------------------- the plate's wells


def test_well_names_grids_and_edges():
    assert well_grid_position("A01") == (0, 0) and well_grid_position(" P24 ") == (15, 23)
    assert well_grid_position("AF48") == (31, 47) and well_grid_position("well-3") is None
    assert plate_grid(8, 12) == (8, 12) and plate_grid(9, 2) == (16, 24) and plate_grid(20, 30) == (32, 48)
    table = pd.DataFrame(
        {
            BATCH: "b", PLATE: "p", WELL: ["A01", "A01", "C05", "H12"], "Metadata_Gene": ["g", "g", "h", "n"],
            GUIDE: ["g1", "g1", "h1", "n1"], PERT_TYPE: ["perturbation", "perturbation", "perturbation", CONTROL],
            "Metadata_Count_Cells": [100, 300, 50, 80], "f": [1.0, 2.0, 3.0, 4.0],
        }
    )  # fmt: skip
    wells = plate_wells(table)
    assert wells[WELL].tolist() == ["A01", "C05", "H12"]  # a well's image rows are one
    assert wells["edge"].tolist() == [True, False, True]  # an 8 x 12 grid: column 12 is its edge
    assert wells["cell_count"].tolist() == [200.0, 50.0, 80.0]
    assert set(wells["cell_count_column"]) == {"Metadata_Count_Cells"}
    assert plate_wells(table.drop(columns="Metadata_Count_Cells"))["cell_count"].isna().all()


# --------------------------------------------------------------------------- the position summary


def test_position_summary_finds_the_planted_effect_and_not_its_absence():
    planted = position_summary(_profiles(PLANTED)[0], "m", seed=0, n_permutations=199).set_index("measure")
    for measure in ("position", "edge", "row"):
        assert planted.loc[measure, "p_value"] <= 0.01, measure
    assert planted.loc["edge", "r2"] > 5 * planted.loc["edge", "r2_null"]
    absent = position_summary(_profiles(NO_POSITION)[0], "m", seed=0, n_permutations=199).set_index("measure")
    assert absent.loc["edge", "r2"] < 2 * absent.loc["edge", "r2_null"]
    assert absent.loc["row", "r2"] < 1.5 * absent.loc["row", "r2_null"]


def test_position_summary_says_what_it_cannot_measure():
    central, _ = _profiles(arrayed.ArrayedDesign(n_effect_genes=3, n_null_genes=2, n_latent=4, n_features=12))
    summary = position_summary(central, "m", seed=0, n_permutations=19).set_index("measure")
    assert summary.loc["edge", "note"] == "not measured: no control well at an edge"
    assert np.isnan(summary.loc["edge", "r2"]) and np.isfinite(summary.loc["position", "r2"])
    one_plate = central[central[PLATE] == "plate01"]
    summary = position_summary(one_plate, "m", seed=0, n_permutations=19).set_index("measure")
    assert summary.loc["position", "note"].startswith("not measured: every position is on one plate")
    without = position_summary(central.drop(columns=WELL), "m", seed=0).set_index("measure")
    assert (without["note"] == "not measured: no Metadata_Well column").all()


# --------------------------------------------------------------------------- the position-aware null


def test_auto_takes_the_position_aware_null_by_the_stated_rule():
    central, _ = _profiles(arrayed.ArrayedDesign(n_effect_genes=3, n_null_genes=2, n_latent=4, n_features=12))
    choice = null_layout_choice(central, "auto", 100)
    assert choice.layout == "plain" and choice.position_capacity == 16  # 4 constructs x 4 positions
    assert null_layout_choice(central, "auto", 32).layout == "position"  # 16 >= half of 32
    assert null_layout_choice(central, "auto", 33).layout == "plain"
    assert null_layout_choice(central, "position", 100).layout == "position"
    assert null_layout_choice(central, "plain", 10).layout == "plain"
    scattered, _ = _profiles(PLANTED)
    assert null_layout_choice(scattered, "auto", 100).position_capacity == 64
    with pytest.raises(ValueError, match="null_layout"):
        null_layout_choice(central, "nearby", 10)


def test_the_null_layout_table_holds_a_capped_count_of_many_control_positions(tmp_path):
    """An image-level table whose controls sit at hundreds of wells allows C(300, 30) position-aware
    pseudo-guides, beyond a 64-bit integer: the count is capped, and the table is written."""
    from phenoica.classify._null import CAPACITY_CAP
    from phenoica.contract import GENE
    from phenoica.hits._positions import null_layout_table

    wells = [f"W{i:03d}" for i in range(300)]
    rows = [{GENE: "NT", GUIDE: "NT_1", PERT_TYPE: CONTROL, WELL: w} for w in wells]
    rows += [{GENE: "G1", GUIDE: "G1_1", PERT_TYPE: "perturbation", WELL: f"X{i:02d}"} for i in range(30)]
    table = pd.DataFrame(rows).assign(**{BATCH: "B1", PLATE: "P1"})
    layouts = null_layout_table({"m": table}, "auto", 100)
    assert layouts["position_capacity"].tolist() == [CAPACITY_CAP] and layouts["layout"].tolist() == ["position"]
    layouts.to_parquet(tmp_path / "null_layout.parquet")


def test_position_aware_pseudo_guides_copy_a_guide_at_one_position():
    table, _ = _profiles(PLANTED)
    design = position_null_design(table, 100, seed=3)
    assert len(design) == 64  # every distinct (construct, position) once: the positions allow no more
    ctrl = control_mask(table)
    seen = set()
    for g in design:
        sub = table.iloc[g.rows]
        assert g.is_null and ctrl[g.rows].all()
        assert sub[WELL].nunique() == 1 and sub[GUIDE].nunique() == 1  # one construct at one position
        assert sub[PLATE].nunique() == 8  # on every plate of the template guide
        seen.add((sub[GUIDE].iloc[0], sub[WELL].iloc[0]))
    assert len(seen) == 64
    again = position_null_design(table, 100, seed=3)
    assert all(np.array_equal(a.rows, b.rows) for a, b in zip(design, again))
    fewer = position_null_design(table, 10, seed=3)
    assert all(np.array_equal(a.rows, b.rows) for a, b in zip(fewer, design[:10]))
    # the plain null is the one it always was; auto picks position here
    plain = null_guide_design(table, 5, seed=3)
    assert all(t.iloc[g.rows][WELL].nunique() > 1 for t, g in ((table, g) for g in plain))
    auto = null_guide_design(table, 100, seed=3, layout="auto")
    assert all(np.array_equal(a.rows, b.rows) for a, b in zip(auto, design))


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["exact", "fast"])
def test_the_position_aware_null_keeps_guides_without_effect_uncalled_at_edges(protocol):
    """The arrayed scenario's screen with its planted position effect (variant base, leave one
    batch out, the schema's defaults): against the plain null, guides without effect are called
    (their position's effect, learned by their classifiers, is in no pseudo-guide); against the
    position-aware null none is, and the calls' observed FDR stays at or below nominal
    (benchmarks/position_null.py measures both over draws: the plain null's FDR above nominal).
    Under both protocols: ``fast`` trains on 128 of a fold's 256 training controls, weighted to
    stand for all of them (unweighted, its calls against the position-aware null fell to none)."""
    from phenoica.classify import NULL_GENE, ClassifyOptions, GuideSamples, SplitOptions, classify_guides, make_folds
    from phenoica.contract import validate_config
    from phenoica.hits import screen_calls

    table, truth = _profiles(arrayed.POSITION_DESIGN, seed=0)
    cfg = validate_config({})
    options = ClassifyOptions.from_config(cfg)._replace(concentration=False, protocol=protocol)
    assert options.max_train_controls in (None, 128)
    folds = make_folds(table, SplitOptions.from_config(cfg))
    nulls = {name: null_guide_design(table, 100, 0, layout=name) for name in ("plain", "position")}
    targets = [GuideSamples(NULL_GENE, f"{n}:{g.guide}", g.rows, True) for n, gs in nulls.items() for g in gs]
    rows = classify_guides(table, None, folds, options, "base", "m", nulls=targets)
    effect = truth.set_index(GUIDE)["has_effect"]
    false, calls = {}, {}
    for name in nulls:
        keep = ~rows["is_null_guide"] | rows[GUIDE].str.startswith(f"{name}:")
        guides = screen_calls(rows[keep].reset_index(drop=True), None, "parametric", 0.05)["guides"]
        called = guides[~guides["is_null_guide"] & guides["hit"]]
        false[name] = called[~called[GUIDE].map(effect).astype(bool)][GUIDE].tolist()
        calls[name] = len(called)
    assert len(false["plain"]) >= 2 and false["position"] == [], false
    assert calls["position"] >= 16  # it still calls (the effect genes shift twice what a position does)


# --------------------------------------------------------------------------- the report's plate maps


def test_the_report_draws_a_plate_map_per_batch_and_says_whether_positions_matter(tmp_path):
    from phenoica.report import ReportInputs
    from phenoica.report._plates_section import build_plates, construct_values
    from phenoica.report._sections import ReportContext
    from tests.report_fixtures import report_options

    profiles, _ = _profiles(PLANTED)
    wells = plate_wells(profiles)
    guides = profiles.loc[profiles[PERT_TYPE] != CONTROL, ["Metadata_Gene", GUIDE]].drop_duplicates()
    hits = guides.assign(model="m", variant="base", auroc=0.7, map_q_value=np.nan)
    none = pd.DataFrame()
    inputs = ReportInputs(
        guide_folds=none, guides=none, genes=none, hits=hits, plate_wells=wells,
        positions=position_summary(profiles, "m", seed=0, n_permutations=99),
        null_layout=pd.DataFrame([{"model": "m", "setting": "auto", "layout": "position", "reason": "auto: ...",
                                   "position_capacity": 64}]),
    )  # fmt: skip
    out = build_plates(inputs, ReportContext(tmp_path / "report", report_options(), none, none, none))
    assert sorted(p.name for p in (tmp_path / "report" / "plates").glob("*.png")) == ["batch1.png", "batch2.png"]
    text = " ".join(str(b) for b in out.page[0].blocks)
    assert "m: positions matter on this screen: position explains" in text
    assert (
        "the classifier's null is position" in text
        and "control wells (over all plates) sit at the plate's edge" in text
    )
    assert list(out.tables["positions"]["measure"]) == ["position", "edge", "row", "column"]
    # the readout that scored more constructs is shown
    values, label = construct_values(inputs)
    assert label.startswith("held-out AUROC") and (values["value"] == 0.7).all()
    only_map = ReportInputs(guide_folds=none, guides=none, genes=none, hits=hits.assign(auroc=np.nan, map_q_value=0.01))
    assert construct_values(only_map)[1].startswith("mAP q-value")
    # without the plate's tables the section adds nothing (its folder exists for the report rule)
    empty = build_plates(ReportInputs(guide_folds=none, guides=none, genes=none), ReportContext(
        tmp_path / "other", report_options(), none, none, none))  # fmt: skip
    assert empty.page == [] and (tmp_path / "other" / "plates").is_dir()
