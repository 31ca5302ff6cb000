"""The report's "Profile hygiene" section: what the profiles stage dropped, clipped or normalized,
per model (the plan :func:`phenoica.profiles.clean_profiles` wrote as
``profiles/{model}.hygiene.json``), so that a feature that left the analysis is never a silent loss."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from phenoica.report._inputs import ReportInputs
from phenoica.report._sections import ReportContext, Section, SectionOutput, table_section

#: Why a feature left the analysis, by the plan's list that holds it.
REASONS: dict[str, str] = {
    "missing": "a missing value",
    "constant": "constant",
    "control_constant": "constant on a plate's controls",
    "outliers": "outlier",
}
#: What ``profiles.outliers`` does to an outlier feature, in words.
OUTLIER_ACTIONS: dict[str, str] = {"drop": "dropped", "clip": "clipped", "keep": "kept"}


def hygiene_table(plans: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per feature the hygiene touched: model, feature, reason, what was done, and an
    outlier's largest absolute value."""
    rows = []
    for model, plan in plans.items():
        for reason, label in REASONS.items():
            listed = plan.get(reason) or []
            for feature in listed:
                largest = listed[feature] if isinstance(listed, Mapping) else None
                action = OUTLIER_ACTIONS[plan["outlier_policy"]] if reason == "outliers" else "dropped"
                rows.append(
                    {"model": model, "feature": feature, "reason": label, "action": action, "largest_abs": largest}
                )
    return pd.DataFrame(rows, columns=["model", "feature", "reason", "action", "largest_abs"])


def build_hygiene(inputs: ReportInputs, ctx: ReportContext) -> SectionOutput:
    """The hygiene's decisions per model, one sentence each, and every touched feature in
    ``profile_hygiene.csv``."""
    if not inputs.present("profile_hygiene"):
        return SectionOutput()
    plans = inputs.profile_hygiene or {}
    table = hygiene_table(plans)
    lines = []
    for model, plan in plans.items():
        kept = len(plan["kept"])
        total = kept + len(plan["dropped"])
        norm = "not normalized" if plan["normalize"] == "none" else f"normalized per plate ({plan['normalize']})"
        lines.append(
            f"{model}: {kept} of {total} features analysed ({norm}; {len(plan['missing'])} with a missing value and "
            f"{len(plan['constant'])} constant dropped; {len(plan['outliers'])} beyond +-{plan['outlier_cutoff']:g} "
            f"{OUTLIER_ACTIONS[plan['outlier_policy']]})."
        )
    note = " ".join(lines) + (
        f" Every feature touched: `{ctx.rel(ctx.table_path('profile_hygiene'))}`." if len(table) else ""
    )
    shown = table.head(20)
    return SectionOutput({"profile_hygiene": table}, page=[table_section("Profile hygiene", note, shown)])


HYGIENE = Section("profile_hygiene", ("profile_hygiene",), build_hygiene)
