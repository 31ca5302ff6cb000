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
rows, streamed (:func:`clean_profiles`). :func:`hygiene_plan` makes the decisions;
:func:`apply_plan` applies them to a row batch; :class:`HygienePlan` is written beside the
profile table (``profiles/{model}.hygiene.json``) and listed in the report.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from phenoica.contract import CONTROL, PERT_TYPE, PLATE, ScreenError
from phenoica.profiles._tables import DEFAULT_BATCH_ROWS, batch_features, write_batches
from phenoica.utils import atomic_path

log = logging.getLogger(__name__)

#: ``profiles.normalize``: pycytominer's per-plate normalizations against the controls, or none.
NORMALIZATIONS: tuple[str, ...] = ("none", "mad_robustize", "robustize", "standardize")
#: ``profiles.outliers``: what happens to an outlier feature.
OUTLIER_POLICIES: tuple[str, ...] = ("drop", "clip", "keep")
#: Names shown per list in a note.
EXAMPLES = 5
#: The fewest features a profile table may keep: the transforms whiten and rotate at least 2.
MIN_FEATURES = 2


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
    control_constant: dict[str, list[str]] = field(default_factory=dict)  # feature -> the plates

    @property
    def dropped(self) -> list[str]:
        """Every feature dropped."""
        out = self.missing + self.constant + list(self.control_constant)
        return out + (list(self.outliers) if self.outlier_policy == "drop" else [])

    def too_few(self, where: str, total: int) -> str | None:
        """Why the plan leaves too few features (fewer than :data:`MIN_FEATURES` of ``total``),
        naming the features dropped per reason and the settings that decide them; None when
        enough are kept."""
        if len(self.kept) >= MIN_FEATURES:
            return None
        why = [
            f"{len(names)} {label}: {_names(list(names))}"
            for label, names in (
                ("with a missing value", self.missing),
                ("constant", self.constant),
                ("constant on a plate's control wells", self.control_constant),
                (f"beyond +-{self.outlier_cutoff:g} (profiles.outlier_cutoff)", self.outliers),
            )
            if names and (label[:6] != "beyond" or self.outlier_policy == "drop")
        ]
        return (
            f"{where}: the profile hygiene keeps {len(self.kept)} of {total} feature(s) ({'; '.join(why)}); the "
            f"transforms need at least {MIN_FEATURES}. Check the export's features, or change what decides them: "
            "profiles.outliers: clip (or keep), a larger profiles.outlier_cutoff, profiles.normalize"
        )

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
        if self.control_constant:
            shown = "; ".join(
                f"{k} (plate {', '.join(v[:3])})" for k, v in list(self.control_constant.items())[:EXAMPLES]
            )
            out.append(
                f"{where}: {len(self.control_constant)} feature(s) constant on a plate's control wells dropped: {shown}"
                f"{' ...' if len(self.control_constant) > EXAMPLES else ''}; normalizing against controls with no spread "
                f"({self.normalize}) divides by zero, so their values are no measurement (not outliers)"
            )
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


def import_pycytominer() -> Any:
    """pycytominer, imported without its side effect: its import switches pandas' copy-on-write
    mode on for the whole process (a pandas 3 setting), which makes arrays that other code
    writes to read-only; the mode is put back as it was."""
    with pd.option_context("mode.copy_on_write", pd.options.mode.copy_on_write):
        import pycytominer
        import pycytominer.cyto_utils  # noqa: F401
    return pycytominer


def _names(names: Sequence[str]) -> str:
    return ", ".join(names[:EXAMPLES]) + (f" ... ({len(names) - EXAMPLES} more)" if len(names) > EXAMPLES else "")


def hygiene_plan(
    stats: FeatureStats, hygiene: Hygiene, control_constant: Mapping[str, list[str]] | None = None
) -> HygienePlan:
    """The decisions of the module's steps 2-4 on a table's :class:`FeatureStats` (after the
    normalization, when there is one). The outlier rule is pycytominer's, applied to the
    features' minimum and maximum (the same features as on the rows). ``control_constant``:
    the features the normalization found without spread on a plate's control wells (feature ->
    plates), dropped as such before the other rules see them."""
    drop_outlier_features = import_pycytominer().cyto_utils.drop_outlier_features
    names = stats.names
    flat = {n: list(p) for n, p in (control_constant or {}).items() if n in set(names)}
    missing = [n for n, m in zip(names, stats.missing) if m > 0 and n not in flat]
    gone = set(missing) | set(flat)
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
        control_constant=flat,
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
    unchanged. A plate without control rows is an error (the door refuses such a screen first)."""
    normalize = import_pycytominer().normalize
    if not is_control.any():
        plate = table[PLATE].iloc[0] if PLATE in table.columns and len(table) else "?"
        raise ScreenError(
            f"plate {plate}: no control rows, so profiles.normalize {method!r} cannot normalize it against its "
            "controls; set profiles.normalize: none, or leave the plate out"
        )
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
    )
    return out.drop(columns=[flag])[list(table.columns)]


def write_plan(plan: HygienePlan, path: Path | str) -> None:
    """The plan as JSON, atomically."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(plan.as_dict(), indent=1, sort_keys=True))


def read_plan(path: Path | str) -> dict[str, Any]:
    """A written plan (:meth:`HygienePlan.as_dict`)."""
    return json.loads(Path(path).read_text())


def _features_of(schema: pa.Schema) -> list[str]:
    """The feature columns of a profile schema (every column that is not ``Metadata_*``)."""
    return [n for n in schema.names if not n.startswith("Metadata_")]


def _batches(path: Path, batch_rows: int) -> Iterator[pa.RecordBatch]:
    yield from pq.ParquetFile(path).iter_batches(batch_size=batch_rows)


def control_spread_zero(controls: np.ndarray, method: str) -> np.ndarray:
    """Per feature of a plate's control rows (rows x features): whether the spread
    ``profiles.normalize`` divides by is zero (the MAD for ``mad_robustize``, the interquartile
    range for ``robustize``, the standard deviation for ``standardize``); missing values left out."""
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a feature without a control value: all-NaN
        if method == "mad_robustize":
            spread = np.nanmedian(np.abs(controls - np.nanmedian(controls, axis=0)), axis=0)
        elif method == "robustize":
            spread = np.nanpercentile(controls, 75, axis=0) - np.nanpercentile(controls, 25, axis=0)
        else:
            spread = np.nanstd(controls, axis=0)
    return np.asarray(spread == 0)


def _normalized_plates(
    path: Path, method: str, batch_rows: int, flat: dict[str, list[str]] | None = None
) -> Iterator[pa.RecordBatch]:
    """The profile table at ``path``, plate by plate, normalized against each plate's controls
    (:func:`normalize_plate`), in the table's own schema; the features without spread on a
    plate's controls (:func:`control_spread_zero`) are added to ``flat`` (feature -> plates)."""
    schema = pq.read_schema(path)
    features = _features_of(schema)
    for plate in pq.read_table(path, columns=[PLATE]).column(PLATE).unique().to_pylist():
        frame = pq.read_table(path, filters=[(PLATE, "==", plate)]).to_pandas()
        is_control = (frame[PERT_TYPE].astype(str) == CONTROL).to_numpy()
        if flat is not None and is_control.any():
            zero = control_spread_zero(frame.loc[is_control, features].to_numpy(dtype=np.float64), method)
            for name in np.asarray(features)[zero]:
                flat.setdefault(str(name), []).append(str(plate))
        frame = normalize_plate(frame, features, is_control, method)
        log.info(
            "normalize: plate %s, %d rows, %s against its %d control rows", plate, len(frame), method, is_control.sum()
        )
        yield from pa.Table.from_pandas(frame, schema=schema, preserve_index=False).to_batches(max_chunksize=batch_rows)


def _counted(batches: Iterator[pa.RecordBatch], stats: FeatureStats) -> Iterator[pa.RecordBatch]:
    """``batches`` as they are, their features added to ``stats`` on the way."""
    for batch in batches:
        stats.update(batch_features(batch, stats.names))
        yield batch


def _applied(batches: Iterator[pa.RecordBatch], schema: pa.Schema, plan: HygienePlan) -> Iterator[pa.RecordBatch]:
    """``batches`` (of ``schema``) with the plan applied, in :func:`_plan_schema`."""
    meta = [f.name for f in schema if f.name.startswith("Metadata_")]
    names = _features_of(schema)
    out_schema = _plan_schema(schema, plan)
    for batch in batches:
        X = np.asarray(apply_plan(batch_features(batch, names), names, plan), dtype=np.float32)
        arrays = [batch.column(m) for m in meta] + [pa.array(np.ascontiguousarray(X[:, j])) for j in range(X.shape[1])]
        yield pa.RecordBatch.from_arrays(arrays, schema=out_schema)


def _plan_schema(schema: pa.Schema, plan: HygienePlan) -> pa.Schema:
    """A profile schema's metadata columns, then the plan's kept features as float32."""
    meta = [f for f in schema if f.name.startswith("Metadata_")]
    return pa.schema(meta + [pa.field(n, pa.float32()) for n in plan.kept])


def clean_profiles(path: Path | str, hygiene: Hygiene, batch_rows: int = DEFAULT_BATCH_ROWS) -> HygienePlan:
    """Apply the profile hygiene to the profile table at ``path`` (rewritten atomically, in row
    groups of ``batch_rows``, only when the hygiene changes it) and return its plan: normalized
    plate by plate when ``hygiene.normalize`` says so, then the features with a missing value,
    constant and outlier features dropped or clipped (:func:`hygiene_plan`). Streamed: memory
    holds a row batch (and, when normalizing, one plate). Fewer than :data:`MIN_FEATURES` kept is
    an error naming the features dropped (:meth:`HygienePlan.too_few`)."""
    path = Path(path)
    schema = pq.read_schema(path)
    stats = FeatureStats(_features_of(schema))
    normalized = path.with_name(f".{path.name}.normalized.parquet")
    source = path
    flat: dict[str, list[str]] = {}
    try:
        if hygiene.normalize != "none":
            plates = _normalized_plates(path, hygiene.normalize, batch_rows, flat)
            write_batches(_counted(plates, stats), normalized, schema, batch_rows)
            source = normalized
        else:
            for _ in _counted(_batches(path, batch_rows), stats):
                pass
        plan = hygiene_plan(stats, hygiene, flat)
        for note in plan.notes("profiles"):
            log.warning("%s", note)
        problem = plan.too_few(str(path), len(stats.names))
        if problem:
            raise ScreenError(problem)
        if plan.changes:
            write_batches(
                _applied(_batches(source, batch_rows), schema, plan), path, _plan_schema(schema, plan), batch_rows
            )
        elif source != path:
            os.replace(source, path)
    finally:
        normalized.unlink(missing_ok=True)
    return plan


def planned_hygiene(plan: Any, profiles: Mapping[str, Any]) -> HygienePlan | None:
    """What the hygiene will drop or clip on the embedding files of ``plan`` (a
    :class:`phenoica.profiles._embeddings.EmbeddingPlan`), decided before any job from the files'
    footer statistics (no row is read) with a validated config's ``profiles`` section; None when
    it cannot be known there: the profiles are normalized first, or a file lacks the statistics.
    The ``gather_profiles`` job decides on the rows, by the same rule (:func:`clean_profiles`)."""
    if profiles["normalize"] != "none" or not plan.files:
        return None
    stats = footer_stats([f.source() for f in plan.files], plan.files[0].features)
    if stats is None:
        return None
    return hygiene_plan(stats, Hygiene(profiles["normalize"], profiles["outliers"], float(profiles["outlier_cutoff"])))


def normalize_problems(table: pd.DataFrame, method: str) -> list[str]:
    """Under ``profiles.normalize`` ``method`` (not ``none``), the plates of a screen's table
    without a control row, which cannot be normalized against their controls: one problem
    naming them (five, then a count); none otherwise."""
    if method == "none" or PLATE not in table.columns:
        return []
    has = table[PERT_TYPE].astype(str).eq(CONTROL).groupby(table[PLATE].astype(str)).any()
    bare = sorted(has.index[~has.to_numpy()])
    if not bare:
        return []
    more = f" and {len(bare) - EXAMPLES} more" if len(bare) > EXAMPLES else ""
    return [
        f"profiles.normalize {method!r} normalizes each plate against its own control rows, and {len(bare)} plate(s) "
        f"hold none: {', '.join(bare[:EXAMPLES])}{more}; set profiles.normalize: none (an export normalized already), "
        "or leave those plates out (screen.rows)"
    ]
