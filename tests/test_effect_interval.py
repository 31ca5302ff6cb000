"""The held-out distance's interval over replicate wells and folds: its error, its combination and its coverage."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from phenoica.classify._distance import ControlMoments, heldout_distance_se
from phenoica.contract import GENE, GUIDE
from phenoica.hits import _effects as E


def test_the_standard_error_matches_the_spread_of_the_distance_over_fresh_held_out_wells():
    """The direction fixed (one set of training rows), the held-out guide and control wells drawn
    again 2,000 times: the distances' SD is the reported standard error within 15%."""
    rng = np.random.default_rng(0)
    p = 20
    shift = np.r_[2.0, 1.0, np.zeros(p - 2)]
    train_ctrl = rng.normal(size=(64, p))
    train_guide = rng.normal(size=(4, p)) + shift
    moments = ControlMoments.of(train_ctrl)
    values, errors = [], []
    for _ in range(2000):
        d, se = heldout_distance_se(moments, train_guide, rng.normal(size=(4, p)) + shift, rng.normal(size=(64, p)))
        values.append(d)
        errors.append(se)
    assert np.std(values) == pytest.approx(np.median(errors), rel=0.15)


def test_folds_that_agree_within_their_wells_add_no_between_fold_variance():
    mean, low, high = E.wells_and_folds_interval(np.array([5.0, 5.2]), np.array([0.5, 0.5]), dof=6)
    half = (high - low) / 2
    assert mean == pytest.approx(5.1) and half == pytest.approx(2.447 * math.sqrt(0.5) * 0.5, rel=1e-3)
    _, wide_low, wide_high = E.wells_and_folds_interval(np.array([2.0, 8.0]), np.array([0.5, 0.5]), dof=6)
    assert wide_high - wide_low > 4 * half  # folds that disagree beyond their wells widen it
    # no error per fold (an older score table): the Student-t interval over folds, as before
    assert E.wells_and_folds_interval(np.array([5.0, 5.2]), np.array([np.nan, np.nan])) == E.fold_interval(
        np.array([5.0, 5.2])
    )


def test_a_guide_whose_wells_agree_gets_an_interval_that_excludes_zero_on_two_batches():
    """Two folds whose distances (15.4 and 16.0 SDs) agree within their wells' errors: the
    interval over folds alone spans 0 (one degree of freedom), the wells' does not."""
    rows = pd.DataFrame(
        {
            "model": "m",
            "variant": "v",
            GENE: "G",
            GUIDE: "g",
            "is_null_guide": False,
            "fold": ["b1", "b2"],
            "n_test_pos": 4,
            "distance_sd": [15.4, 16.0],
            "distance_se": [1.5, 1.6],
        }
    )
    (row,) = E.guide_distances(rows).to_dict("records")
    assert 10 < row["distance_sd_low"] < 15.4 and 16 < row["distance_sd_high"] < 21
    _, t_low, _ = E.fold_interval(rows["distance_sd"].to_numpy())
    assert t_low < 12  # the folds-only interval is about 4 times wider
    (gene,) = E.gene_distances(rows).to_dict("records")
    assert gene["distance_sd_low"] == pytest.approx(row["distance_sd_low"])


def test_coverage_on_two_batches_is_near_nominal():
    """The simulation of benchmarks/effect_interval_coverage.py, reduced: 2 batches of 4 guide and
    64 control wells, a guide 3 control SDs from the controls; the 95% interval covers the
    guide's distance in those batches in 88% to 99% of 300 draws."""
    rng = np.random.default_rng(1)
    p, covered = 30, 0
    for _ in range(300):
        direction = np.zeros(p)
        direction[rng.choice(p, 3, replace=False)] = rng.normal(size=3)
        shift = 3.0 * direction / np.linalg.norm(direction)
        offsets = rng.normal(size=(2, p))
        guide = [offsets[b] + shift + rng.normal(size=(4, p)) for b in range(2)]
        ctrl = [offsets[b] + rng.normal(size=(64, p)) for b in range(2)]
        d, se, truth = [], [], []
        for f in range(2):
            moments = ControlMoments.of(ctrl[1 - f])
            value, error = heldout_distance_se(moments, guide[1 - f], guide[f], ctrl[f])
            mean, sd = moments.mean_sd()
            u = (guide[1 - f].mean(axis=0) - mean) / sd**2
            d.append(value)
            se.append(error)
            truth.append(shift @ u / np.linalg.norm(u))
        _, low, high = E.wells_and_folds_interval(np.array(d), np.array(se), dof=6)
        covered += low <= np.mean(truth) <= high
    assert 0.88 <= covered / 300 <= 0.99
