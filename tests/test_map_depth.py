"""Which null the mAP readout takes on a screen (classify.map_null: auto) and how deep each null
reaches, counted at the door from the layout (phenoica.classify._map_depth)."""

from __future__ import annotations

import dataclasses
import logging
from math import comb

import numpy as np
import pandas as pd
import pytest

from phenoica.classify import (
    MapReadoutOptions,
    guide_map_files,
    guide_map_within_plate,
    map_null_choice,
    well_profiles,
)
from phenoica.classify._capacity import map_capacity
from phenoica.classify._map_depth import map_p_floors
from phenoica.contract import CONTROL, PERT_TYPE, PLATE, WELL, validate_config
from phenoica.screen import POSITION_DESIGN, arrayed, screen_profiles


@pytest.fixture(scope="module")
def screen() -> pd.DataFrame:
    return arrayed.screen_profiles(arrayed.ArrayedDesign(), 0)[0]


def test_the_floors_are_the_atom_of_one_ranking_and_the_count_of_permutations(screen):
    """The arrayed layout (8 wells a guide, one a plate, 16 control wells a plate): one random
    ranking puts a guide's 7 positives above its 16 negatives with probability 1 / C(23, 7); the
    within-plate null has 17 choices a plate, 17^8 in all; both no lower than 1 / (cap + 1)."""
    floors = map_p_floors(screen, 10**12)
    assert len(floors) == 48 and (floors["n_wells"] == 8).all()
    assert floors["random_rank"].to_numpy() == pytest.approx(1 / comb(23, 7))
    assert floors["within_plate"].to_numpy() == pytest.approx(17.0**-8)
    capped = map_p_floors(screen, 10_000_000)
    assert capped["within_plate"].to_numpy() == pytest.approx(1 / 10_000_001)
    assert capped["random_rank"].to_numpy() == pytest.approx(1 / comb(23, 7))


def test_the_door_says_when_no_lone_hit_can_be_called_and_how_deep_each_null_goes():
    """Two plates (one well of each guide a plate, 16 control wells each): the random-rank null
    reaches 1/17 and the within-plate null 1/17^2, so among 48 guides neither calls a lone hit,
    and the door says so with both figures; the arrayed layout of 8 plates reaches 48 guides by
    either (no note, the figures in the counts)."""
    small = arrayed.screen_profiles(dataclasses.replace(arrayed.ArrayedDesign(), plates_per_batch=1), 0)[0]
    cap = map_capacity(small, 0.05, 10_000_000, "random_rank")
    assert cap.units["p_min_random_rank"] == pytest.approx(1 / 17)
    assert cap.units["p_min_within_plate"] == pytest.approx(1 / 289)
    assert cap.units["lone_reach_random_rank"] == 0 and cap.units["lone_reach_within_plate"] == 14
    assert "cannot call a lone hit among this screen's 48 guides" in cap.reason
    assert "0.059 under the random-rank null" in cap.reason and "0.0035 under the within-plate null" in cap.reason
    assert "independent" in cap.reason
    assert "even with the within-plate null" in map_capacity(small, 0.05, 10_000_000, "within_plate").reason
    assert "auto" in map_capacity(small, 0.05, 10_000_000, "auto").reason
    full = map_capacity(arrayed.screen_profiles(arrayed.ArrayedDesign(), 0)[0], 0.05, 10_000_000, "random_rank")
    assert full.reason == "" and full.units["lone_reach_random_rank"] == 12_257


def test_auto_takes_the_within_plate_null_where_positions_carry_no_effect(screen):
    choice = map_null_choice(well_profiles(screen), "auto", 0, "m", "base")
    assert choice.null == "within_plate" and choice.p_value > 0.05
    assert "48 guide(s) hold one well on two or more of their plates" in choice.reason


def test_auto_keeps_the_random_rank_null_where_the_control_wells_show_a_position_effect():
    """The arrayed screen with edge and row effects (64 control wells scattered over each plate):
    a position's control wells are alike across plates, and the within-plate null would not hold."""
    table = screen_profiles(POSITION_DESIGN, 0)[0]
    choice = map_null_choice(well_profiles(table), "auto", 0, "m", "base")
    assert choice.null == "random_rank" and choice.p_value <= 0.05
    assert "positions carry an effect" in choice.reason


def test_auto_decides_from_the_layout_where_it_can(screen):
    """Without Metadata_Well the random-rank null (positions unknown); with every guide's wells
    moved to another position on each plate, the within-plate null whatever the controls show;
    the explicit settings are taken as they are."""
    wells = well_profiles(screen)
    assert map_null_choice(wells.drop(columns=[WELL]), "auto", 0).null == "random_rank"
    moved = wells.copy()
    guides = moved[PERT_TYPE] != CONTROL
    moved.loc[guides, WELL] = moved.loc[guides, WELL].astype(str) + "_" + moved.loc[guides, PLATE].astype(str)
    assert map_null_choice(moved, "auto", 0).null == "within_plate"
    table = screen_profiles(POSITION_DESIGN, 0)[0]
    assert map_null_choice(well_profiles(table), "within_plate", 0).null == "within_plate"
    assert map_null_choice(wells, "random_rank", 0).null == "random_rank"
    with pytest.raises(ValueError, match="classify.map_null"):
        map_null_choice(wells, "exact", 0)


def test_the_map_job_takes_the_null_auto_chooses_and_logs_why(tmp_path, screen, caplog):
    path = tmp_path / "base.parquet"
    screen.to_parquet(path, index=False)
    options = MapReadoutOptions.from_config(validate_config({"classify": {"map_null": "auto"}}))
    with caplog.at_level(logging.INFO):
        guide_map_files({"base": path}, {"base": tmp_path / "map.parquet"}, options, model="m")
    assert "the mAP readout's null is within_plate (auto: 48 guide(s)" in caplog.text
    alone = guide_map_within_plate(screen, "base", "m", seed=0)
    np.testing.assert_array_equal(pd.read_parquet(tmp_path / "map.parquet")["map_p_value"], alone["map_p_value"])
