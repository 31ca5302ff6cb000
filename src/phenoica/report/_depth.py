"""The report headline's depth sentence: how small a p-value each readout can report on this screen,
and so how many guides Benjamini-Hochberg could call a lone hit among.

BH calls a lone guide among m at q < ``q`` only when its p-value is below ``q / m``. So a readout
whose smallest reportable p-value is p calls a lone hit among at most ``q / p`` guides: with the
bounded null of 100 pseudo-guides (p >= 1/101) about 5, with a Pareto tail reaching 1e-10 about
500 million. The sentence gives both readouts' figures beside the screen's own number of guides,
so a user sees what a larger null would buy (docs/hit-calling.md, *Calls at genome depth*).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from phenoica.report import _render as render


def lone_call_reach(p_min: float, q_threshold: float) -> int:
    """The most guides m among which BH calls a lone guide of p-value ``p_min`` at q <
    ``q_threshold`` (p_min < q / m; 0 when ``p_min`` is not finite)."""
    if not math.isfinite(p_min) or p_min <= 0:
        return 0
    return max(0, math.ceil(q_threshold / p_min) - 1)


def _count(n: int) -> str:
    """A count as text: digits with thousands separators, or about 3 significant digits from a million."""
    return f"{n:,}" if n < 1_000_000 else f"about {n:.3g}"


def _classifier_part(null: pd.DataFrame, q_threshold: float) -> str:
    """The classifier readout's reach over the variants of one model ('' without a null)."""
    fitted = null[null["calls"].astype(bool)] if "calls" in null.columns else null.iloc[:0]
    if fitted.empty or "p_reach" not in fitted.columns:
        return ""
    reach = fitted["p_reach"].to_numpy(dtype=float)
    n_tail = int(fitted["tail"].astype(bool).sum()) if "tail" in fitted.columns else 0
    how = (
        f"a Pareto tail fitted beyond the pseudo-guides in {n_tail} of {len(fitted)} variant(s)"
        if n_tail
        else "no tail fitted, so no lower than 1/(n_null + 1)"
    )
    low, high = float(np.nanmin(reach)), float(np.nanmax(reach))
    span = f"{low:.2g}" if math.isclose(low, high) else f"{low:.2g} to {high:.2g}"
    return (
        f"the classifier readout reports p-values down to {span} ({how}): a lone hit among up to "
        f"{_count(lone_call_reach(high, q_threshold))} guides in every variant"
    )


def _map_part(hits: pd.DataFrame, q_threshold: float) -> str:
    """The mAP readout's smallest p-value over the variants of one model ('' when none scored)."""
    if "map_p_value" not in hits.columns:
        return ""
    p = hits["map_p_value"].to_numpy(dtype=float)
    p = p[np.isfinite(p)]
    if not p.size:
        return ""
    low = float(p.min())
    return (
        f"the mAP readout's smallest p-value here is {low:.2g} (a lone hit among up to "
        f"{_count(lone_call_reach(low, q_threshold))} guides; classify.map_max_null_size caps its draws, and under the "
        "random-rank null, classify.map_null's default, a guide at mAP 1 cannot go below the chance that one random "
        "ranking puts all its wells first: docs/hit-calling.md)"
    )


def depth_headline(null: pd.DataFrame | None, hits: pd.DataFrame | None, q_threshold: float) -> list[str]:
    """One sentence per model: the smallest p-value each readout can report, how many guides BH
    could call a lone hit among, and how many guides the screen has (empty without a hit table)."""
    if hits is None or not len(hits):
        return []
    out = []
    for model, sub in hits.groupby("model", sort=True):
        n_guides = int(sub.groupby("variant").size().max())
        own = null[null["model"] == model] if null is not None and "model" in null.columns else pd.DataFrame()
        parts = [x for x in (_classifier_part(own, q_threshold), _map_part(sub, q_threshold)) if x]
        if not parts:
            continue
        out.append(
            f"**How deep the calls go** in {render.md_text(str(model))} ({n_guides:,} guides; BH calls a lone hit "
            f"among m guides at p < {q_threshold:g} / m): " + "; ".join(parts) + "."
        )
    return out
