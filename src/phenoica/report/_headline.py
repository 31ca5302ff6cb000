"""The report's headline: per model the readout that answers, its calls, the measure that ranks
them, a readout that saturates, how far the p-values reach, and the control constructs.

:func:`readout_status` reads what each (model, variant) could call from the hit and null tables
(:mod:`phenoica.hits`); :func:`headline` and :func:`control_headline` turn it into sentences for
the section :data:`phenoica.report._score_sections.HEADLINE`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from phenoica.classify import Readout, registered_readouts
from phenoica.contract import GUIDE
from phenoica.hits import SATURATION_SHARE, measure_phrase, saturation
from phenoica.report import _render as render
from phenoica.report._checks import variant_label

#: Names of the top-ranked calls a headline bullet gives.
TOP_NAMES = 3


def readout_status(hits: pd.DataFrame | None, null: pd.DataFrame | None) -> dict[tuple[str, str], dict[str, object]]:
    """Per (model, variant), from the hit and null tables: ``no_calls`` (why the classifier made
    no hit calls, absent when it did), each other readout's called and scored guides under
    ``NAME_hits`` / ``NAME_scored`` (``map_hits`` / ``map_scored`` for the mAP readout: present
    where it scored a guide), ``saturation`` (a row of :func:`phenoica.hits.saturation`), ``top``
    (the first :data:`TOP_NAMES` calls of any readout in rank order, as text) and the null's reach
    (``p_floor``, ``n_beyond_null``, ``n_tail_only_calls``)."""
    out: dict[tuple[str, str], dict[str, object]] = {}
    if null is not None and "calls" in null.columns:
        for row in null.to_dict("records"):
            entry = out.setdefault((row["model"], row["variant"]), {})
            if not bool(row["calls"]):
                entry["no_calls"] = str(row["reason"])
            elif "p_floor" in row:
                entry.update({k: row[k] for k in ("p_floor", "n_beyond_null", "n_tail_only_calls")})
    if hits is None or not len(hits):
        return out
    saturated = saturation(hits).set_index(["model", "variant"]) if "distance_sd" in hits.columns else None
    others = [r for r in registered_readouts()[1:] if r.statistic in hits.columns and r.hit in hits.columns]
    for (model, variant), sub in hits.groupby(["model", "variant"]):
        entry = out.setdefault((model, variant), {})
        for readout in others:
            scored = int(np.isfinite(sub[readout.statistic].to_numpy(dtype=float)).sum())
            if scored:
                entry[f"{readout.name}_hits"] = int(sub[readout.hit].astype(bool).sum())
                entry[f"{readout.name}_scored"] = scored
        if saturated is not None:
            entry["saturation"] = saturated.loc[(model, variant)].to_dict()
            entry["top"] = _top_calls(sub)
    return out


def _top_calls(hits: pd.DataFrame) -> str:
    """The first :data:`TOP_NAMES` guides called by any readout, in rank order, with the value of
    the measure that ranks them ('' when none is called or nothing is ranked)."""
    called = hits[any_readout_called(hits) & hits["rank"].notna()]
    called = called.sort_values("rank", kind="stable").head(TOP_NAMES)
    if called.empty:
        return ""
    measure = str(called["ranked_by"].iloc[0])
    parts = []
    for row in called.to_dict("records"):
        value = f"{row[measure]:.3g}"
        if measure == "distance_sd" and np.isfinite(row["distance_sd_low"]):
            value += f" [{row['distance_sd_low']:.3g}, {row['distance_sd_high']:.3g}]"
        parts.append(f"{render.md_text(row[GUIDE])} ({value})")
    return ", ".join(parts)


def any_readout_called(hits: pd.DataFrame) -> pd.Series:
    """Per hit-table row: whether any registered readout calls the guide (its ``hit`` column)."""
    called = pd.Series(False, index=hits.index)
    for readout in registered_readouts():
        if readout.hit in hits.columns:
            called |= hits[readout.hit].astype(bool)
    return called


def _answering(state: dict[str, object]) -> list[Readout]:
    """The readouts other than the classifier that scored guides in one (model, variant)."""
    return [r for r in registered_readouts()[1:] if f"{r.name}_hits" in state]


def _other_calls(state: dict[str, object], q_threshold: float) -> str:
    """The calls of the readouts other than the classifier in one (model, variant)
    (:func:`readout_status`), as a phrase ('' where none scored a guide)."""
    return "; ".join(
        f"{r.label} readout: {state[f'{r.name}_hits']}/{state[f'{r.name}_scored']} guides active at q < {q_threshold:g}"
        for r in _answering(state)
    )


def _ranking(state: dict[str, object]) -> str:
    """How the hits of one (model, variant) are ranked and the first of them, as a phrase ('' when
    nothing ranks them)."""
    sat = state.get("saturation")
    if not isinstance(sat, dict) or not sat.get("ranked_by"):
        return ""
    text = f"hits ranked by the {measure_phrase(str(sat['ranked_by']))}"
    if sat["ranked_by"] == "distance_sd":
        text += " (95% interval over replicate wells and folds)"
    return text + (f"; first: {state['top']}" if state.get("top") else "")


def _saturation(state: dict[str, object]) -> str:
    """Which readouts saturate in one (model, variant) and what ranks the hits instead, as a
    sentence ('' when none does)."""
    sat = state.get("saturation")
    if not isinstance(sat, dict):
        return ""
    parts = []
    for prefix, name, n_col in (("auroc", "AUROC", "n_scored"), ("map", "mAP", "n_map_scored")):
        if sat.get(f"{prefix}_saturated"):
            parts.append(
                f"**{name} saturates**: {sat[f'n_{prefix}_at_1']} of {sat[n_col]} scored guides "
                f"({sat[f'{prefix}_share_at_1']:.0%}) at 1.000, more than {SATURATION_SHARE:.0%}"
            )
    if not parts:
        return ""
    measure = str(sat.get("ranked_by") or "")
    saturated = {name for prefix, name in (("auroc", "AUROC"), ("map", "mAP")) if sat.get(f"{prefix}_saturated")}
    if not measure:
        instead = ""
    elif (measure == "mean_average_precision" and "mAP" in saturated) or (measure == "auroc" and "AUROC" in saturated):
        instead = "; no other measure scored these guides, so those at 1.000 share one rank"
    else:
        instead = f", so the {measure_phrase(measure)} ranks the hits instead"
    return "; ".join(parts) + instead + "."


def _reach(state: dict[str, object]) -> str:
    """What the null supports in one (model, variant): the p-value bound, how many guides lie
    beyond it and how many more the parametric tail alone would call ('' when no guide lies beyond)."""
    n_beyond = state.get("n_beyond_null")
    if not n_beyond or pd.isna(n_beyond):
        return ""
    floor, tail_only = float(state["p_floor"]), int(state.get("n_tail_only_calls") or 0)
    tail = (
        f"{tail_only} more guide(s) would be called only on the parametric tail beyond it, which is not used "
        "(a larger null, classify.n_null_guides, reaches them)"
        if tail_only
        else "the calls stand without the tail beyond it"
    )
    return (
        f"{int(n_beyond)} guides lie beyond the null's reach and are reported as p < {floor:.2g}, its bound "
        f"(`p_beyond_null`); {tail}."
    )


def headline(
    summary: pd.DataFrame,
    tests: pd.DataFrame,
    q_threshold: float = 0.05,
    status: dict[tuple[str, str], dict[str, object]] | None = None,
) -> list[str | render.Bullets]:
    """Short sentences with the numbers a reader wants first: one bullet per model, its variants
    and comparisons nested under it (a list for :class:`phenoica.report._render.Bullets`).
    ``status`` (:func:`readout_status`) says where the classifier could not call hits, what the
    mAP readout called there, which measure ranks the hits, which readout saturates and how far
    the p-values reach. A model whose classifier calls no hit in any variant leads with the mAP
    readout, the readout that can answer on its layout."""
    status = status or {}
    items: list[str | render.Bullets] = []
    for model in sorted(summary["model"].unique()):
        sub = summary[summary["model"] == model]
        scored = sub[np.isfinite(sub["auroc_mean"].to_numpy(dtype=float))]
        states = {v: status.get((model, v), {}) for v in sub["variant"]}
        classifier_calls = any(v in set(scored["variant"]) and "no_calls" not in states[v] for v in states)
        answers = [v for v in sub["variant"] if _answering(states[v])]
        if not classifier_calls and answers:
            items += _other_lead(model, answers, states, q_threshold, classifier_scored=not scored.empty)
        if scored.empty:
            items.append(
                f"Model {render.md_text(model)}: **the classifier scored no guide**, so it calls no hits (every "
                "(guide, fold) was skipped: the reasons are in `guide_folds.parquet`, the counts and the setting that "
                "would change them in the door's readout notes, `screen/validated.json`)."
            )
            continue
        items += _classifier_bullets(model, sub, scored, states, tests, q_threshold)
    return items


def _other_lead(
    model: str, variants: list[str], states: dict[str, dict[str, object]], q_threshold: float, classifier_scored: bool
) -> list[str | render.Bullets]:
    """The bullets of a model whose classifier calls no hit: the other readouts' calls and ranking first."""
    why = "makes no hit calls" if classifier_scored else "scores no guide"
    nested: list[str | render.Bullets] = []
    for variant in variants:
        state = states[variant]
        extra = "; ".join(x for x in (_ranking(state),) if x)
        nested.append(f"`{variant}`: **{_other_calls(state, q_threshold)}**" + (f"; {extra}" if extra else "") + ".")
        if _saturation(state):
            nested.append(f"`{variant}`: {_saturation(state)}")
    labels = sorted({r.label for v in variants for r in _answering(states[v])})
    lead = (
        f"Model {render.md_text(model)}: **the {' and '.join(labels)} readout{'s' if len(labels) > 1 else ''} "
        f"answer{'' if len(labels) > 1 else 's'} on this layout**; the classifier {why} here "
        "(below, and the door's readout notes in `screen/validated.json`)."
    )
    return [lead, render.Bullets(nested)]


def _classifier_bullets(
    model: str,
    sub: pd.DataFrame,
    scored: pd.DataFrame,
    states: dict[str, dict[str, object]],
    tests: pd.DataFrame,
    q_threshold: float,
) -> list[str | render.Bullets]:
    """The bullets of a model whose classifier scored guides: its best variant, then per variant the
    calls, their ranking, saturation and the p-values' reach, then the comparisons."""
    hit_col = f"hits_q<{q_threshold:g}"
    best = scored.loc[scored["auroc_mean"].idxmax()]
    items: list[str | render.Bullets] = [
        f"Model {render.md_text(model)}: highest mean guide AUROC with **{variant_label(best['variant'])}** "
        f"(`{best['variant']}`, {best['auroc_mean']:.3f} over {best['n_guides_scored']} guides)."
    ]
    nested: list[str | render.Bullets] = []
    for _, r in sub.iterrows():
        n_hits = r[hit_col] if hit_col in r.index else pd.NA
        state = states[r["variant"]]
        if "no_calls" in state:
            hits = f"**no classifier hit calls**: {render.md_text(state['no_calls'])}"
        elif pd.isna(n_hits):
            hits = "no null pseudo-guides, no hit calls"
        else:
            hits = (
                f"**{n_hits}/{r['n_guides_scored']} guides are hits at q < {q_threshold:g}** "
                f"(null: {r['n_null_guides']} pseudo-guides, mean AUROC {r['null_auroc_mean']:.3f})"
            )
        if _answering(state):
            hits += f"; {_other_calls(state, q_threshold)}"
        if _ranking(state):
            hits += f"; {_ranking(state)}"
        line = (
            f"`{r['variant']}`: mean AUROC {r['auroc_mean']:.3f}, median {r['auroc_median']:.3f}, "
            f"{r['n_guides_skipped']} skipped; {hits}."
        )
        notes = [x for x in (_saturation(state), _reach(state)) if x]
        nested.append(line + "".join(f" {x}" for x in notes))
    t = tests[(tests["model"] == model) & (tests["metric"] == "auroc")]
    for _, r in t.iterrows():
        if r["n"] == 0:
            continue
        p = "no test" if pd.isna(r["p_value"]) else f"Wilcoxon p = {r['p_value']:.2g}"
        ci = "" if pd.isna(r["ci_low"]) else f", 95% CI [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
        nested.append(
            f"gene AUROC `{r['variant']}` - `{r['reference']}` over {r['n']} genes: "
            f"mean {r['mean_diff']:+.3f}{ci} ({p})."
        )
    items.append(render.Bullets(nested))
    return items


#: What screens of the field report as the share of active perturbations (about half of CRISPR guides
#: are phenotypically active in Cell Painting screens: Kalinin et al. 2025, "A versatile information
#: retrieval framework for evaluating profile strength and similarity", Nature Communications).
FIELD_ACTIVE_SHARE = "about half of CRISPR guides in Cell Painting screens (Kalinin et al. 2025)"


def control_headline(controls: pd.DataFrame | None, summary: pd.DataFrame, q_threshold: float) -> list[str]:
    """One sentence per (model, variant) whose control constructs are themselves called hits
    against the pseudo-guide null, with the guides' hit rate beside what screens of the kind
    report; one sentence when every construct passed."""
    if controls is None:
        return []
    hit_col = f"hits_q<{q_threshold:g}"
    out = []
    called = controls[controls["hit"].astype(bool)]
    for (model, variant), sub in controls.groupby(["model", "variant"], sort=True):
        hits = sub[sub["hit"].astype(bool)]
        if hits.empty:
            continue
        row = summary[(summary["model"] == model) & (summary["variant"] == variant)]
        rate = ""
        if len(row) and hit_col in row.columns and pd.notna(row[hit_col].iloc[0]) and row["n_guides_scored"].iloc[0]:
            share = float(row[hit_col].iloc[0]) / float(row["n_guides_scored"].iloc[0])
            rate = f" The guides' hit rate here is {share:.0%}, beside {FIELD_ACTIVE_SHARE}."
        out.append(
            f"**Controls are not one homogeneous null** in {render.md_text(model)} / `{variant}`: control construct(s) "
            f"{', '.join(render.md_text(g) for g in hits[GUIDE])} ({len(hits)} of {len(sub)}) called hits against the other "
            "controls, "
            f"so the guides' calls mix their own phenotype with that difference and mean less.{rate} See "
            "'Control constructs' for the features that separate them; choose other controls, or drop the "
            "construct, if it is not inert."
        )
    tested = np.isfinite(controls["p_value"].to_numpy(dtype=float))
    if called.empty and tested.any():
        out.append(
            f"Control constructs checked as a null: none of {controls[GUIDE].nunique()} is called a hit against "
            "the other controls in any model and variant."
        )
    elif len(controls) and not tested.any():
        out.append(
            f"Control constructs: {controls[GUIDE].nunique()} scored against the other controls ('Control "
            "constructs'), but not called: there is no null to call them against."
        )
    return out
