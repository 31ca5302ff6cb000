"""Embedding files: their footers read and checked before any row (:func:`plan_files`,
:func:`plan_embeddings`), then their row batches validated as they stream (:func:`read_blocks`;
the data contract across files kept by :class:`GeneTypes`)."""

from __future__ import annotations

import glob
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from phenoica.contract import (
    BATCH,
    CONTROL,
    GENE,
    GUIDE,
    KEY_COLUMNS,
    PERT_TYPE,
    PROFILE_COLUMNS,
    SITE,
    ScreenError,
    feature_name,
    normalize_names,
    validate_profile_metadata,
)
from phenoica.profiles._columns import FeatureSelection, check_row_counters, choose_features, is_identifier, list_matrix
from phenoica.profiles._tables import Rows, as_float32, batch_features, data_columns, is_numeric_type, open_parquet
from phenoica.screen import ExportSpec, file_rows, parquet_source
from phenoica.utils import duplicate_header_problem

log = logging.getLogger(__name__)


@dataclass
class EmbeddingFile:
    """What the footer of one embedding file says: its data columns, metadata and features."""

    path: str
    columns: list[str]
    metadata: list[str]
    features: list[str]  # numeric feature columns read as they are (besides the embedding column)
    spec: ExportSpec = ExportSpec()  # how the file's columns and rows become the contract's

    def source(self) -> Any:
        """What a Parquet reader opens for this file (:func:`phenoica.screen.parquet_source`)."""
        return parquet_source(self.path, self.spec)


@dataclass
class EmbeddingPlan:
    """The files and the output's metadata schema (the union over the files, types unified)."""

    files: list[EmbeddingFile]
    metadata: pa.Schema
    embedding_column: str | None
    left_out: list[str]  # numeric columns that are not features (the union over the files)
    notes: list[str] = field(default_factory=list)  # features some files lack, left out (screen.feature_sets)


def _plain_type(dtype: pa.DataType) -> pa.DataType:
    """Dictionary-encoded columns are written as their values."""
    return dtype.value_type if pa.types.is_dictionary(dtype) else dtype


def plan_files(
    paths: Sequence[Path | str],
    embedding_column: str | None,
    selection: FeatureSelection | None = None,
    spec: ExportSpec = ExportSpec(),
) -> EmbeddingPlan:
    """Read every file's footer (an export that is not a Parquet file in the contract: its
    translated table, :mod:`phenoica.screen._exports`): columns, the features chosen
    (:func:`choose_features`) and checked (:func:`check_row_counters`), the features every file
    has (:func:`shared_features`), and one metadata schema for all files."""
    selection = selection or FeatureSelection()
    files: list[EmbeddingFile] = []
    fields: dict[str, list[tuple[str, pa.Field]]] = {}
    left_out: dict[str, None] = {}
    for path in paths:
        path = str(path)
        if not Path(path).exists():
            raise FileNotFoundError(f"{path}: embedding file not found")
        source = parquet_source(path, spec)
        try:
            schema = pq.read_schema(source)
        except (pa.ArrowInvalid, OSError) as exc:
            raise ScreenError(f"{path}: not a readable parquet file ({exc})") from None
        repeated = duplicate_header_problem(schema.names, path)
        if repeated:
            raise ScreenError(repeated)
        columns = data_columns(schema)
        meta = [c for c in columns if str(c).startswith("Metadata_")]
        if embedding_column is not None and embedding_column not in columns:
            raise ScreenError(f"{path}: embedding column {embedding_column!r} not found; columns are {columns[:12]}")
        exclude = [embedding_column] if embedding_column is not None else []
        if embedding_column is not None:
            features: list[str] = []
            left = [
                c for c in columns if c not in meta and c != embedding_column and is_numeric_type(schema.field(c).type)
            ]
        else:
            features, left = choose_features(schema, columns, selection, path, exclude)
            check_row_counters(path, schema, features, selection, parquet_source(path, spec))
        left_out.update(dict.fromkeys(left))
        for name in meta:
            fields.setdefault(name, []).append((path, schema.field(name)))
        files.append(EmbeddingFile(path, columns, meta, features, spec))
    shared, notes = shared_features(files, selection)
    for file in files:
        file.features = shared
    out = []
    for name, seen in fields.items():
        if name in PROFILE_COLUMNS:
            out.append(pa.field(name, pa.string()))
            continue
        try:
            unified = pa.unify_schemas(
                [pa.schema([pa.field(name, _plain_type(f.type))]) for _, f in seen], promote_options="permissive"
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            kinds = {}
            for path, f in seen:
                kinds.setdefault(str(_plain_type(f.type)), path)
            types = ", ".join(f"{t} in {p}" for t, p in kinds.items())
            if name in (*KEY_COLUMNS, SITE):  # a column phenoica reads: the files must agree
                raise ScreenError(f"column {name} has incompatible types across files: {types}") from None
            notes.append(
                f"column {name} has other types in different files ({types}); phenoica does not read it, so it is "
                "carried into the profile tables as text"
            )
            out.append(pa.field(name, pa.string()))
            continue
        out.append(unified.field(name))
    return EmbeddingPlan(files, pa.schema(out), embedding_column, list(left_out), notes)


def shared_features(files: Sequence[EmbeddingFile], selection: FeatureSelection) -> tuple[list[str], list[str]]:
    """The features the files are read with, and a note per file that has features others lack.

    Exports feature-selected per batch carry different feature sets. ``selection.across_files``
    says what then happens: ``"common"`` keeps the features every file has (in the first file's
    order) and notes, per file, how many of its own were left out and the first names; it refuses
    when fewer than ``selection.min_shared`` of the smallest file's features remain, since the
    files then measure different things. ``"identical"`` refuses any difference."""
    if not files:
        return [], []
    reference = files[0]
    if all(set(f.features) == set(reference.features) for f in files):
        return list(reference.features), []  # the same features (in any order): read in the first file's
    common = set.intersection(*(set(f.features) for f in files))
    if selection.across_files == "identical":
        other = next(f for f in files if set(f.features) != set(reference.features))
        raise ScreenError(
            f"{other.path}: feature columns differ from {reference.path} ({len(other.features)} vs "
            f"{len(reference.features)} columns{_first_difference(other.features, reference.features)}); "
            "screen.feature_sets is 'identical' ('common' keeps the features every file has)"
        )
    shared = [c for c in reference.features if c in common]
    smallest = min(files, key=lambda f: len(f.features))
    if len(shared) < max(1.0, selection.min_shared * len(smallest.features)):
        sizes = ", ".join(f"{f.path}: {len(f.features)}" for f in files[:6])
        raise ScreenError(
            f"the embedding files share {len(shared)} feature column(s), fewer than screen.min_shared_features = "
            f"{selection.min_shared:g} of the smallest file's {len(smallest.features)} ({smallest.path}); feature "
            f"columns per file: {sizes}{' ...' if len(files) > 6 else ''}. Files this different measure different "
            "things: export them from one feature selection, or lower screen.min_shared_features"
        )
    notes = []
    for f in files:
        extra = [c for c in f.features if c not in common]
        if extra:
            notes.append(
                f"{f.path}: {len(extra)} of its {len(f.features)} feature column(s) are not in every file and are left "
                f"out (screen.feature_sets: common keeps the {len(shared)} all files have): "
                f"{', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}"
            )
    return shared, notes


def plan_embeddings(
    paths: Sequence[Path | str],
    embedding_column: str | None = None,
    selection: FeatureSelection | None = None,
    spec: ExportSpec = ExportSpec(),
) -> tuple[list[str], list[str]]:
    """(the feature columns, the numeric columns left out) of a set of embedding files, from
    their footers (and their integer feature columns): every check of the feature columns
    :func:`write_profiles` makes, before any row is read. The features of a list-valued
    ``embedding_column`` are named ``emb_0000 ...`` once read: here they are ``[column]``."""
    plan = plan_files(paths, embedding_column, selection, spec)
    features = plan.files[0].features if plan.files else []
    return (features or [str(embedding_column)]), plan.left_out


def log_left_out(plan: EmbeddingPlan, selection: FeatureSelection | None) -> None:
    """The numeric columns that are not features, once, in the log."""
    if not plan.left_out:
        return
    ids = [c for c in plan.left_out if is_identifier(c)]
    other = [c for c in plan.left_out if c not in set(ids)]
    how = (
        f"embedding_column {plan.embedding_column!r}"
        if plan.embedding_column is not None
        else (selection or FeatureSelection()).describe()
    )
    log.info(
        "features: %d numeric column(s) left out (not chosen by %s): identifier/location columns %s; others %s",
        len(plan.left_out),
        how,
        ids,
        other,
    )


def _first_difference(a: Sequence[str], b: Sequence[str]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"; column {i} is {x!r}, expected {y!r}"
    return ""


@dataclass
class _Block:
    """One validated row batch of an embedding file."""

    batch: pa.RecordBatch  # the file's columns
    features: np.ndarray  # float32 (rows x D)
    names: list[str]  # feature names
    start: Rows  # the file's numbers of its rows (:data:`phenoica.profiles._tables.Rows`)


class GeneTypes:
    """The data contract across files, kept as the files stream by: no gene a control in one
    file and a perturbation in another, no guide under two genes, and (:meth:`finish`) controls
    in every batch."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[str, str]] = {}
        self.guides: dict[str, tuple[str, str]] = {}
        self.batches: dict[str, bool] = {}

    def update(self, meta: pd.DataFrame, source: str) -> None:
        pairs = meta[[GENE, PERT_TYPE]].astype(str).drop_duplicates()
        for gene, kind in zip(pairs[GENE].tolist(), pairs[PERT_TYPE].tolist()):
            known = self.seen.setdefault(gene, (kind, source))
            if known[0] != kind:
                raise ScreenError(
                    f"gene {gene!r} is listed under both PertTypes: {known[0]} in {known[1]}, {kind} in {source}"
                )
        pairs = meta[[GUIDE, GENE]].astype(str).drop_duplicates()
        for guide, gene in zip(pairs[GUIDE].tolist(), pairs[GENE].tolist()):
            known = self.guides.setdefault(guide, (gene, source))
            if known[0] != gene:
                raise ScreenError(
                    f"guide {guide!r} is listed under 2 genes: {known[0]!r} in {known[1]}, {gene!r} in {source}; "
                    "a guide targets one gene"
                )
        controls = meta[PERT_TYPE].astype(str) == CONTROL
        for batch, has in pd.Series(controls.to_numpy()).groupby(meta[BATCH].astype(str).to_numpy()).any().items():
            self.batches[str(batch)] = self.batches.get(str(batch), False) or bool(has)

    def finish(self, sources: Sequence[str]) -> None:
        """Raise ScreenError if a batch of the files has no control row."""
        missing = sorted(b for b, has in self.batches.items() if not has)
        if missing:
            shown = ", ".join(map(str, sources[:3])) + (" ..." if len(sources) > 3 else "")
            raise ScreenError(
                f"{shown}: batch(es) {missing[:10]} have no control rows ({PERT_TYPE} == {CONTROL!r}); every "
                "batch needs controls: they are the reference its profiles are centred on and classified against"
            )


def read_blocks(
    file: EmbeddingFile, plan: EmbeddingPlan, batch_rows: int, reference: list[str] | None, genes: GeneTypes | None
) -> Iterator[_Block]:
    """Row batches of one embedding file, validated: profile metadata (if ``genes`` is given),
    the embedding column expanded, no infinite feature value (a missing one, NaN, is kept: the
    profiles stage drops the features that hold one), feature names equal to ``reference``."""
    numbers = file_rows(file.path, file.spec)  # an export's rows by their numbers in the file
    with open_parquet(file.path, file.spec) as pf:
        start = 0
        for batch in pf.iter_batches(batch_size=batch_rows, columns=file.columns):
            if batch.num_rows == 0:
                continue
            rows: Rows = start if numbers is None else numbers[start : start + batch.num_rows]
            if genes is not None:
                present = [c for c in PROFILE_COLUMNS if c in file.columns]
                meta = normalize_names(batch.select(present).to_pandas())
                meta.index = pd.RangeIndex(start, start + len(meta)) if numbers is None else rows  # rows of the file
                validate_profile_metadata(meta, source=file.path)
                genes.update(meta, file.path)
            X, names = _block_features(batch, file, plan, reference, rows)
            bad = [names[j] for j in np.flatnonzero(np.isinf(X).any(axis=0))]
            if bad:
                raise ScreenError(
                    f"{file.path}: infinite values (inf) in feature column(s) {bad[:10]}; a missing value (NaN, or an "
                    "empty CSV field) is allowed: the profiles stage drops features that hold one"
                )
            reference = names
            yield _Block(batch, X, names, rows)
            start += batch.num_rows


def _block_features(
    batch: pa.RecordBatch, file: EmbeddingFile, plan: EmbeddingPlan, reference: list[str] | None, start: Rows
) -> tuple[np.ndarray, list[str]]:
    """float32 features of a row batch and their names (the embedding column expanded)."""
    parts, names = [], list(file.features)
    if file.features:
        parts.append(as_float32(batch_features(batch, file.features), file.features, file.path, start))
    if plan.embedding_column is not None:
        expected = None if reference is None else len(reference) - len(file.features)
        values = list_matrix(batch.column(plan.embedding_column), plan.embedding_column, file.path, expected, start)
        parts.append(values)
        names += [feature_name(i) for i in range(values.shape[1])]
    if reference is not None and names != reference:
        raise ScreenError(
            f"{file.path}: feature columns differ from the first file's ({len(names)} vs {len(reference)} columns)"
        )
    X = parts[0] if len(parts) == 1 else np.hstack(parts)
    return X, names


def expand_glob(pattern: str) -> list[str]:
    """Sorted files matching a glob; a clear error when nothing matches."""
    files = sorted(glob.glob(pattern))
    if not files:
        raise ScreenError(f"screen.embeddings: no file matches {pattern!r}")
    return files
