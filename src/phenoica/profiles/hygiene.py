"""The field's profile hygiene, with the field's library (pycytominer), applied to a gathered
profile table as declared settings (:class:`Hygiene`):

1. **normalize** per plate against the plate's controls (``profiles.normalize``): pycytominer's
   ``normalize`` with ``samples`` the control rows, one plate at a time. Default ``none``: the
   exports phenoica is given are usually normalized already (pycytominer's
   ``*_normalized*`` files), and phenoica's own variants centre and scale on the controls; set
   ``mad_robustize`` (median and MAD of the controls, robust to a single outlier control well)
   for an export that is not.
2. **drop features with a missing value** (NaN, or an empty CSV field): the transforms need
   complete rows; a feature missing in some wells carries less than the wells would.
3. **drop constant features** (one value in every row): they carry nothing and make whitening
   singular.
4. **outlier features** (``profiles.outliers``, ``profiles.outlier_cutoff``): pycytominer's rule,
   a feature whose largest or smallest value exceeds the cutoff in absolute value
   (``pycytominer.cyto_utils.drop_outlier_features``, its default cutoff 500, the JUMP recipe's),
   dropped (default), clipped at +- the cutoff, or kept. On normalized profiles a value 500 MADs
   from the controls is a measurement artefact (a segmentation or correlation measure that
   failed), and one such well can dominate a whitening or a control mean.

The decisions read per-feature reductions only (:class:`FeatureStats`: missing count, minimum
and maximum), so they are exact over any row batches: the door takes them from the Parquet
footers' statistics before any job (:func:`footer_stats`), the ``gather_profiles`` job from the
rows as they stream. :func:`hygiene_plan` makes the decisions; :func:`apply_plan` applies them to
a row batch; :class:`HygienePlan` is written beside the profile table
(``profiles/{model}.hygiene.json``) and listed in the report.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from phenoica.utils.io import atomic_path

#: ``profiles.normalize``: pycytominer's per-plate normalizations against the controls, or none.
NORMALIZATIONS: tuple[str, ...] = ("none", "mad_robustize", "robustize", "standardize")
#: ``profiles.outliers``: what happens to an outlier feature.
OUTLIER_POLICIES: tuple[str, ...] = ("drop", "clip", "keep")
#: Names shown per list in a note.
EXAMPLES = 5


class Hygiene(NamedTuple):
    """The hygiene settings (``profiles.normalize``, ``profiles.outliers``,
    ``profiles.outlier_cutoff``)."""

    normalize: str = "none"
    outliers: str = "drop"
    outlier_cutoff: float = 500.0


@dataclass
class FeatureStats:
    """Per-feature reductions over row batches: rows seen, missing values, minimum and maximum
    of the values present (NaN where a feature has none)."""

    names: list[str]
    rows: int = 0
    missing: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    low: np.ndarray = field(default_factory=lambda: np.zeros(0))
    high: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self) -> None:
        d = len(self.names)
        if self.missing.size != d:
            self.missing = np.zeros(d, np.int64)
            self.low = np.full(d, np.inf)
            self.high = np.full(d, -np.inf)

    def update(self, X: np.ndarray) -> None:
        """Add a (rows x features) batch."""
        if X.shape[0] == 0:
            return
        X = np.asarray(X, dtype=np.float64)
        nan = np.isnan(X)
        self.rows += X.shape[0]
        self.missing += nan.sum(axis=0)
        with np.errstate(invalid="ignore"):
            self.low = np.fmin(self.low, np.nanmin(np.where(nan, np.inf, X), axis=0))
            self.high = np.fmax(self.high, np.nanmax(np.where(nan, -np.inf, X), axis=0))

    def extremes(self) -> pd.DataFrame:
        """The minimum and maximum as a two-row table (features as columns; NaN for a feature
        without a value): what pycytominer's outlier rule reads of the rows."""
        low = np.where(np.isfinite(self.low), self.low, np.nan)
        high = np.where(np.isfinite(self.high), self.high, np.nan)
        return pd.DataFrame([low, high], columns=self.names)


def footer_stats(sources: Sequence[Any], names: Sequence[str]) -> FeatureStats | None:
    """:class:`FeatureStats` of the ``names`` columns of Parquet files (paths or in-memory
    readers) from their footers' row-group statistics, reading no row; None when some row group
    lacks the statistics (a writer that left them out): the job then decides on the rows."""
    stats = FeatureStats(list(names))
    for source in sources:
        meta = pq.ParquetFile(source).metadata
        index = {meta.schema.column(i).name: i for i in range(meta.num_columns)}
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            stats.rows += group.num_rows
            for j, name in enumerate(names):
                column = group.column(index[name])
                s = column.statistics
                if s is None or not s.has_null_count:
                    return None
                stats.missing[j] += s.null_count
                if s.num_values == 0:
                    continue
                if not s.has_min_max:
                    return None
                stats.low[j] = min(stats.low[j], float(s.min))
                stats.high[j] = max(stats.high[j], float(s.max))
    return stats


@dataclass
class HygienePlan:
    """What the hygiene does to a profile table's features: the features kept (in order), those
    dropped per reason (with an outlier's largest absolute value), the clip bound (None: no
    clipping) and the normalization."""

    kept: list[str]
    missing: list[str]
    constant: list[str]
    outliers: dict[str, float]
    outlier_policy: str
    outlier_cutoff: float
    normalize: str
    rows: int

    @property
    def dropped(self) -> list[str]:
        """Every feature dropped."""
        out = self.missing + self.constant
        return out + (list(self.outliers) if self.outlier_policy == "drop" else [])

    @property
    def clip(self) -> float | None:
        """The bound values are clipped to (+- it), when outlier features are clipped."""
        return self.outlier_cutoff if self.outlier_policy == "clip" and self.outliers else None

    @property
    def changes(self) -> bool:
        """Whether applying the plan changes the table."""
        return bool(self.dropped) or self.clip is not None

    def notes(self, where: str) -> list[str]:
        """One line per reason, naming counts, the first features and (outliers) their largest
        absolute values."""
        out = []
        if self.missing:
            out.append(f"{where}: {len(self.missing)} feature(s) with a missing value dropped: {_names(self.missing)}")
        if self.constant:
            out.append(f"{where}: {len(self.constant)} constant feature(s) dropped: {_names(self.constant)}")
        if self.outliers:
            worst = sorted(self.outliers.items(), key=lambda kv: -kv[1])
            shown = ", ".join(f"{k} ({v:.4g})" for k, v in worst[:EXAMPLES]) + (" ..." if len(worst) > EXAMPLES else "")
            what = {"drop": "dropped", "clip": f"clipped at +-{self.outlier_cutoff:g}", "keep": "kept as they are"}
            out.append(
                f"{where}: {len(self.outliers)} feature(s) hold values beyond +-{self.outlier_cutoff:g} "
                f"(profiles.outlier_cutoff; largest absolute values: {shown}), {what[self.outlier_policy]} "
                f"(profiles.outliers: {self.outlier_policy}); the other features' largest is within the cutoff"
            )
        return out

    def as_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready values (what ``profiles/{model}.hygiene.json`` holds)."""
        out = asdict(self)
        out["dropped"] = self.dropped
        return out


def _names(names: Sequence[str]) -> str:
    return ", ".join(names[:EXAMPLES]) + (f" ... ({len(names) - EXAMPLES} more)" if len(names) > EXAMPLES else "")


def hygiene_plan(stats: FeatureStats, hygiene: Hygiene) -> HygienePlan:
    """The decisions of the module's steps 2-4 on a table's :class:`FeatureStats` (after the
    normalization, when there is one). The outlier rule is pycytominer's, applied to the
    features' minimum and maximum (the same features as on the rows)."""
    from pycytominer.cyto_utils import drop_outlier_features

    names = stats.names
    missing = [n for n, m in zip(names, stats.missing) if m > 0]
    gone = set(missing)
    constant = [n for n, lo, hi in zip(names, stats.low, stats.high) if n not in gone and not hi > lo]
    gone |= set(constant)
    extremes = stats.extremes()  # outliers are listed whatever the policy (kept ones too)
    rest = [n for n in names if n not in gone]
    flagged = drop_outlier_features(extremes, features=rest, outlier_cutoff=hygiene.outlier_cutoff) if rest else []
    largest = extremes.abs().max()
    outliers = {n: float(largest[n]) for n in flagged}
    plan = HygienePlan(
        kept=[],
        missing=missing,
        constant=constant,
        outliers=outliers,
        outlier_policy=hygiene.outliers,
        outlier_cutoff=float(hygiene.outlier_cutoff),
        normalize=hygiene.normalize,
        rows=stats.rows,
    )
    dropped = set(plan.dropped)
    plan.kept = [n for n in names if n not in dropped]
    return plan


def apply_plan(X: np.ndarray, names: Sequence[str], plan: HygienePlan) -> np.ndarray:
    """A (rows x ``names``) batch with the plan applied: the kept features, in the plan's order,
    clipped where the plan clips."""
    index = {n: i for i, n in enumerate(names)}
    out = X[:, [index[n] for n in plan.kept]]
    if plan.clip is not None:
        out = np.clip(out, -plan.clip, plan.clip)
    return out


def normalize_plate(table: pd.DataFrame, features: Sequence[str], is_control: np.ndarray, method: str) -> pd.DataFrame:
    """One plate's rows normalized against its control rows by pycytominer's ``normalize``
    (``method``: ``mad_robustize``, ``robustize`` or ``standardize``); the metadata columns
    unchanged. A plate without control rows is an error (checked earlier by the contract)."""
    from pycytominer import normalize

    if not is_control.any():
        raise ValueError("a plate without control rows cannot be normalized against its controls")
    frame = table.reset_index(drop=True).copy()
    flag = "__phenoica_control__"
    frame[flag] = np.asarray(is_control, dtype=bool)
    meta = [c for c in frame.columns if c not in set(features)]
    out = normalize(
        frame,
        features=list(features),
        meta_features=meta,
        samples=f"`{flag}` == True",
        method=method,
        output_type=None,
    )
    return out.drop(columns=[flag])[list(table.columns)]


def write_plan(plan: HygienePlan, path: Path | str) -> None:
    """The plan as JSON, atomically."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(plan.as_dict(), indent=1, sort_keys=True))


def read_plan(path: Path | str) -> dict[str, Any]:
    """A written plan (:meth:`HygienePlan.as_dict`)."""
    return json.loads(Path(path).read_text())
