"""What a gather of profiles reads: :class:`GatherOptions`, the ``gather_profiles`` rule's params."""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

from phenoica.contract import Setting, stage_options
from phenoica.profiles._columns import FeatureSelection
from phenoica.profiles._hygiene import Hygiene
from phenoica.screen import ExportSpec


@stage_options("gather_profiles")
class GatherOptions(NamedTuple):
    """The settings of one model's gather (:func:`phenoica.profiles.write_profiles`), built
    once from the validated config.

    ``level`` is ``image`` or ``well``; ``embedding_column`` names a list-valued column holding
    the features (None: one column per feature); the ``feature_*`` keys choose the feature columns
    (:attr:`selection`, with how files of different feature sets are reconciled); ``columns``,
    ``controls`` and ``rows`` read an export in its own names, ``separator`` and ``decimal`` its
    text files (:attr:`spec`); ``normalize``,
    ``outliers`` and ``outlier_cutoff`` are the profile hygiene (:attr:`hygiene`). ``batch_rows``
    bounds memory and sizes the row groups: run time only.
    """

    level: Annotated[str, Setting("profiles.level")]
    batch_rows: Annotated[int, Setting("profiles.batch_rows", run_time=True)]
    embedding_column: Annotated[str | None, Setting("screen.embedding_column")]
    feature_prefix: Annotated[str | None, Setting("screen.feature_prefix")]
    feature_regex: Annotated[str | None, Setting("screen.feature_regex")]
    feature_columns: Annotated[list[str] | None, Setting("screen.feature_columns")]
    feature_sets: Annotated[str, Setting("screen.feature_sets")]
    min_shared_features: Annotated[float, Setting("screen.min_shared_features")]
    columns: Annotated[dict[str, str] | None, Setting("screen.columns")]
    controls: Annotated[dict[str, Any] | None, Setting("screen.controls")]
    rows: Annotated[dict[str, Any] | None, Setting("screen.rows")]
    separator: Annotated[str | None, Setting("screen.separator")]
    decimal: Annotated[str, Setting("screen.decimal")]
    normalize: Annotated[str, Setting("profiles.normalize")]
    outliers: Annotated[str, Setting("profiles.outliers")]
    outlier_cutoff: Annotated[float, Setting("profiles.outlier_cutoff")]

    @property
    def selection(self) -> FeatureSelection:
        """Which columns of an embedding file are features (:class:`FeatureSelection`)."""
        return FeatureSelection.of(
            self.feature_prefix, self.feature_regex, self.feature_columns, self.feature_sets, self.min_shared_features
        )

    @property
    def spec(self) -> ExportSpec:
        """How the files' columns and rows become the contract's (:class:`ExportSpec`)."""
        return ExportSpec.from_config(
            {
                "columns": self.columns,
                "controls": self.controls,
                "rows": self.rows,
                "separator": self.separator,
                "decimal": self.decimal,
            }
        )

    @property
    def hygiene(self) -> Hygiene:
        """The profile hygiene's settings (:class:`Hygiene`)."""
        return Hygiene(self.normalize, self.outliers, float(self.outlier_cutoff))
