"""The report headline's depth sentence: each readout's smallest p-value and the lone call it allows."""

from __future__ import annotations

import pandas as pd

from phenoica.report._depth import depth_headline, lone_call_reach


def test_lone_call_reach_is_the_bh_cut_inverted():
    assert lone_call_reach(1 / 101, 0.05) == 5  # the bounded null of 100 pseudo-guides
    assert lone_call_reach(5e-7, 0.05) == 100_000 - 1 or lone_call_reach(5e-7, 0.05) == 100_000
    assert lone_call_reach(1e-10, 0.05) == 500_000_000 - 1 or lone_call_reach(1e-10, 0.05) == 500_000_000
    assert lone_call_reach(float("nan"), 0.05) == 0


def test_the_depth_sentence_names_both_readouts_and_the_screens_size():
    null = pd.DataFrame(
        {
            "model": ["m", "m"],
            "variant": ["base", "pca"],
            "calls": [True, True],
            "tail": [True, False],
            "p_reach": [1e-10, 1 / 101],
        }
    )
    hits = pd.DataFrame(
        {"model": "m", "variant": ["base"] * 3 + ["pca"] * 3, "map_p_value": [1e-5, 0.2, 0.5, 2e-5, 0.3, 0.9]}
    )
    (line,) = depth_headline(null, hits, 0.05)
    assert "3 guides" in line and "down to 1e-10 to 0.0099" in line and "1 of 2 variant(s)" in line
    assert "among up to 5 guides in every variant" in line  # the worse variant decides
    assert "smallest p-value here is 1e-05" in line and "4,999 guides" in line
    assert depth_headline(null, None, 0.05) == []
    (deep,) = depth_headline(null.assign(p_reach=1e-10), hits, 0.05)
    assert "among up to about 5e+08 guides" in deep
