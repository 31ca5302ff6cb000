"""classify.fast_leaf: a sampled training set's min_data_in_leaf, scaled by its share of the
controls or kept as configured. Below the cap either is exact to the byte; above it the models
train with the leaf the setting names (guides and pseudo-guides alike, the weights unchanged),
and the door's no-split check counts against that leaf."""

from __future__ import annotations

import lightgbm
import numpy as np
import pandas as pd
import pytest

from phenoica.classify import (
    ClassifyOptions,
    SplitOptions,
    classify_guides,
    guides_of,
    leave_one_batch_out,
    null_guide_design,
)
from phenoica.classify._capacity import classifier_capacity
from phenoica.classify._protocol import ControlSample, sample_leaf
from phenoica.contract import validate_config
from phenoica.screen import arrayed
from tests.test_classify import CFG, batch_folds, classify_options, make_table
from tests.test_classify_protocol import EXACT_DIGEST, _digest, _scores

#: LightGBM's own train, taken before any test patches it
LGB_TRAIN = lightgbm.train

#: the small arrayed screen of tests/test_arrayed.py: 2 batches of 4 plates, 16 control wells a plate
SMALL = arrayed.ArrayedDesign(n_effect_genes=3, n_null_genes=2, n_latent=4, n_features=12)


@pytest.fixture(scope="module")
def table4() -> pd.DataFrame:
    return make_table(n_batches=4)  # 180 training controls a fold


def test_configured_leaf_below_the_cap_is_exact_to_the_byte(table4):
    exact = _scores(table4, "exact")
    below = _scores(table4, "fast", fast_train_controls=180, fast_leaf="configured")
    pd.testing.assert_frame_equal(below, exact)  # pseudo-guides and distances too
    assert _digest(below) == EXACT_DIGEST


def test_the_leaf_known_answers():
    """C of N drawn, min_data_in_leaf L: scaled, L x C / N rounded and at least 1; configured, L;
    every control kept, L either way. The weight N / C is the same under both."""
    assert sample_leaf(20, 64, 256, scaled=True) == 5
    assert sample_leaf(20, 64, 16_548, scaled=True) == 1
    assert sample_leaf(20, 64, 16_548, scaled=False) == 20
    assert sample_leaf(20, 300, 300, scaled=True) == sample_leaf(20, 300, 300, scaled=False) == 20
    # the share first, then the leaf, as the sample's scaled leaf was computed before the setting
    # existed (22 x 100 / 176 is 12.5, but 22 x (100 / 176) rounds up): runs of that time keep their scores
    assert sample_leaf(22, 100, 176, scaled=True) == 13
    assert ControlSample(np.arange(100), 176).params({"min_data_in_leaf": 22})["min_data_in_leaf"] == 13
    rows = np.arange(0, 256, 2)
    scaled, kept = ControlSample(rows, 256), ControlSample(rows, 256, scale_leaf=False)
    assert scaled.weight == kept.weight == 2.0
    assert scaled.params({})["min_data_in_leaf"] == 10 and kept.params({})["min_data_in_leaf"] == 20
    assert kept.params({"min_data_in_leaf": 3, "lambda_l1": 5.0}) == {"min_data_in_leaf": 3, "lambda_l1": 5.0}
    whole = ControlSample(rows, len(rows), scale_leaf=False)
    assert whole.weight is None and whole.params({"a": 1}) == {"a": 1}


def _trained(table, monkeypatch, **cfg) -> tuple[pd.DataFrame, list[tuple[int, float, int]]]:
    """The score table of every guide and 3 pseudo-guides under fast at a cap of 100 (of 180), and
    the (min_data_in_leaf, largest row weight, rows) of every model LightGBM trained."""
    import phenoica.classify._guide_model as guide_model

    seen: list[tuple[int, float, int]] = []
    train = LGB_TRAIN

    def recording(params, data, **kwargs):
        booster = train(params, data, **kwargs)
        weight = data.get_weight()
        seen.append((int(params["min_data_in_leaf"]), float(np.max(weight)), data.num_data()))
        return booster

    monkeypatch.setattr(guide_model.lgb, "train", recording)
    options = classify_options(
        dict(CFG, concentration=True, protocol="fast", fast_train_controls=100, lightgbm={"min_data_in_leaf": 7}, **cfg)
    )
    scores = classify_guides(
        table, None, batch_folds(table), options, "base", "m", nulls=null_guide_design(table, 3, 0)
    )
    return scores, seen


def test_the_models_train_on_the_leaf_the_setting_names(table4, monkeypatch):
    """Above the cap, every model (guides, their concentration models and pseudo-guides) trains
    with min_data_in_leaf 7 as configured, or round(7 x 100 / 180) = 4 scaled; the rows weigh
    180 / 100 under both, and the scores differ where the leaf does."""
    kept, seen_kept = _trained(table4, monkeypatch, fast_leaf="configured")
    scaled, seen_scaled = _trained(table4, monkeypatch, fast_leaf="scaled")
    n_models = 4 * (4 * 3 + 3)  # 4 folds x (4 guides x 3 models + 3 pseudo-guides)
    assert len(seen_kept) == len(seen_scaled) == n_models
    assert {leaf for leaf, _, _ in seen_kept} == {7} and {leaf for leaf, _, _ in seen_scaled} == {4}
    weights = [w for _, w, _ in seen_kept + seen_scaled]
    assert weights == pytest.approx([180 / 100] * 2 * n_models, rel=1e-6)  # float32 in LightGBM
    assert [n for _, _, n in seen_kept] == [n for _, _, n in seen_scaled]
    assert (kept["status"] == "ok").all() and (kept["n_train_neg"] <= 100).all()
    assert kept["is_null_guide"].sum() == 3 * 4
    assert not np.allclose(kept["auroc"], scaled["auroc"])


def test_the_door_counts_no_split_against_the_leaf_the_models_use():
    """The small arrayed screen's folds train a guide's 4 wells against 64 controls; a cap of 16
    and min_data_in_leaf 12: configured, 20 rows < 2 x 12, no split anywhere, and the door says
    so, as the engine's models then show (every model without a split); scaled, the leaf is 3 and
    the models split; exact trains on 68 rows."""
    table, _ = arrayed.screen_profiles(SMALL, 0)
    config = validate_config({})
    splits = SplitOptions.from_config(config)
    notes = {}
    for protocol, leaf in (("fast", "configured"), ("fast", "scaled"), ("exact", "configured")):
        options = classify_options(dict(protocol=protocol, fast_train_controls=16, fast_leaf=leaf))
        notes[protocol, leaf] = classifier_capacity(table, splits, options, "parametric", 0, min_data_in_leaf=12)
    refused = notes["fast", "configured"]
    assert not refused.calls
    assert (
        "largest training set against that leaf holds 20 rows" in refused.reason
        and "min_data_in_leaf its models use, 12" in refused.reason
    )
    assert notes["fast", "scaled"].calls and "no split" not in notes["fast", "scaled"].reason
    assert notes["exact", "configured"].calls and "no split" not in notes["exact", "configured"].reason
    # what the engine then does on two guides: no split under configured, splits under scaled
    guides, folds = guides_of(table)[:2], leave_one_batch_out(table)
    for leaf, split in (("configured", False), ("scaled", True)):
        cfg = dict(CFG, protocol="fast", fast_train_controls=16, fast_leaf=leaf, lightgbm={"min_data_in_leaf": 12})
        out = classify_guides(table, guides, folds, classify_options(cfg), "base", "m")
        assert (out["status"] == "ok").all() and (out["n_train_neg"] == 16).all()
        assert out["sparsity"].notna().any() == split and (out["auroc"] == 0.5).all() != split


def test_the_leaf_reruns_only_the_runs_it_changes():
    """The classify params name fast_leaf only where it changes the scores: fast with the leaf as
    configured; exact, and fast with the scaled leaf (the protocol before the key), keep the
    params of the runs made before it."""
    params = {}
    for protocol in ("exact", "fast"):
        for leaf in ("scaled", "configured"):
            config = validate_config({"classify": {"protocol": protocol, "fast_leaf": leaf}})
            params[protocol, leaf] = repr(ClassifyOptions.from_config(config))
    assert params["exact", "scaled"] == params["exact", "configured"] and "fast_leaf" not in params["exact", "scaled"]
    assert "fast_leaf" not in params["fast", "scaled"]
    assert "fast_leaf='configured'" in params["fast", "configured"]
    assert len(set(params.values())) == 3
