"""The classifier null's size: ``classify.n_null_guides`` as a count or ``auto`` (a tenth of the
screen's guides, between 100 and 600), resolved on the screen's table wherever the null is drawn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from phenoica.classify import (
    AUTO_NULL_MAX,
    AUTO_NULL_MIN,
    null_count,
    null_guide_count,
    null_guide_design,
    null_layout_choice,
)
from phenoica.contract import (
    BATCH,
    CONTROL,
    GENE,
    GUIDE,
    PERT_TYPE,
    PERTURBATION,
    PLATE,
    WELL,
    ConfigError,
    validate_config,
)
from phenoica.hits import HitOptions
from phenoica.hits._reference import null_size
from phenoica.workflow._analysis import _null_size_notes


def screen(n_guides: int, control_wells: int = 24) -> pd.DataFrame:
    """One batch of 2 plates: per plate ``control_wells`` control wells and one well of each of
    ``n_guides`` guides (2 guides a gene)."""
    rows = []
    for p in range(2):
        wells = [("NTC", "NTC_1", CONTROL)] * control_wells
        wells += [(f"G{g // 2:05d}", f"G{g // 2:05d}_{g % 2}", PERTURBATION) for g in range(n_guides)]
        for w, (gene, guide, ptype) in enumerate(wells):
            rows.append({BATCH: "B0", PLATE: f"P{p}", WELL: f"W{w:05d}", GENE: gene, GUIDE: guide, PERT_TYPE: ptype})
    return pd.DataFrame(rows)


def test_auto_is_a_tenth_of_the_guides_between_100_and_600():
    assert (AUTO_NULL_MIN, AUTO_NULL_MAX) == (100, 600)
    sizes = {0: 100, 36: 100, 999: 100, 1000: 100, 1001: 101, 2345: 235, 5991: 600, 6000: 600, 10_000: 600}
    assert {m: null_count("auto", m) for m in sizes} == sizes
    assert null_count("auto", 100_000) == 600


def test_auto_leaves_a_small_screen_at_100_and_draws_the_same_null():
    """A screen of a few guides (the demo's size) keeps the fixed default's null, pseudo-guide for
    pseudo-guide; a count passes through."""
    t = screen(40)
    assert null_guide_count("auto", t) == 100 and null_guide_count(37, t) == 37 and null_guide_count(0, t) == 0
    auto, fixed = null_guide_design(t, "auto", seed=3), null_guide_design(t, 100, seed=3)
    assert len(auto) == 100 and all(np.array_equal(a.rows, b.rows) for a, b in zip(auto, fixed, strict=True))


def test_auto_grows_with_a_large_screen_and_keeps_the_first_pseudo_guides():
    """2,500 guides: 250 pseudo-guides, the first 100 those of a null of 100; past 6,000 guides the
    null stops at 600."""
    t = screen(2500)
    design = null_guide_design(t, "auto", seed=3)
    assert len(design) == 250 and design[-1].guide == "null_0250"
    first = null_guide_design(t, 100, seed=3)
    assert all(np.array_equal(a.rows, b.rows) for a, b in zip(design[:100], first, strict=True))
    assert null_guide_count("auto", screen(7000)) == 600


def test_auto_keeps_the_layout_a_null_of_100_takes():
    """A large screen whose control positions give 120 distinct position-aware pseudo-guides: a null
    of 100 takes the position layout (120 >= 50); under auto (250 pseudo-guides) the layout is still
    decided at 100, so the larger null stays position-aware (stopped at its capacity), where a count
    of 250 asks for 125 distinct draws and falls back to plain."""
    t = screen(2500, control_wells=120)
    assert null_layout_choice(t, "auto", 100).layout == "position"
    assert null_layout_choice(t, "auto", 250).layout == "plain"
    choice = null_layout_choice(t, "auto", "auto")
    assert choice.layout == "position" and "the 100 at which classify.n_null_guides auto decides" in choice.reason
    assert null_layout_choice(t, "plain", "auto").layout == "plain"


def test_the_door_says_what_auto_resolves_to():
    notes = _null_size_notes(screen(2500), "auto")
    assert notes[0].startswith("classify.n_null_guides auto: 250 pseudo-guides for 2500 guides")
    assert not any("auto" in n for n in _null_size_notes(screen(2500), 100))
    assert not any("auto" in n for n in _null_size_notes(screen(400), "auto"))  # the floor: nothing to say


def test_auto_validates_and_calls_and_a_bad_size_is_refused():
    cfg = validate_config({"classify": {"n_null_guides": "auto"}})
    assert cfg["classify"]["n_null_guides"] == "auto" and HitOptions.from_config(cfg).with_null
    assert validate_config({})["classify"]["n_null_guides"] == "auto"
    with pytest.raises(ConfigError, match="classify.n_null_guides"):
        validate_config({"classify": {"n_null_guides": "lots"}})
    for bad in ("lots", -1, 2.5):
        with pytest.raises(ValueError, match="classify.n_null_guides"):
            null_guide_count(bad, screen(4))  # type: ignore[arg-type]


def test_the_reference_null_under_auto_follows_its_pairs():
    """The reference readout's null under auto: 100 contrasts, or more where a lone pair needs them
    (2 m / q, always above a tenth of the pairs); none with 0."""
    assert null_size(1, "auto", 0.05) == 100 == null_size(1, 100, 0.05)
    assert null_size(5, "auto", 0.05) == 200 and null_size(3000, "auto", 0.05) == 120_000
    assert null_size(3000, 0, 0.05) == 0
