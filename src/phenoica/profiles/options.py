"""What a gather of profiles reads: :class:`GatherOptions`, the ``gather_profiles`` rule's params."""

from __future__ import annotations

from typing import Annotated, NamedTuple

from phenoica.contract.stage_options import Setting, stage_options
from phenoica.profiles.columns import FeatureSelection


@stage_options("gather_profiles")
class GatherOptions(NamedTuple):
    """The settings of one model's gather (:func:`phenoica.profiles.gather.write_profiles`), built
    once from the validated config.

    ``level`` is ``image`` or ``well``; ``embedding_column`` names a list-valued column holding
    the features (None: one column per feature); the ``feature_*`` keys choose the feature columns
    (:attr:`selection`). ``batch_rows`` bounds memory and sizes the row groups: run time only.
    """

    level: Annotated[str, Setting("profiles.level")]
    batch_rows: Annotated[int, Setting("profiles.batch_rows", run_time=True)]
    embedding_column: Annotated[str | None, Setting("screen.embedding_column")]
    feature_prefix: Annotated[str | None, Setting("screen.feature_prefix")]
    feature_regex: Annotated[str | None, Setting("screen.feature_regex")]
    feature_columns: Annotated[list[str] | None, Setting("screen.feature_columns")]

    @property
    def selection(self) -> FeatureSelection:
        """Which columns of an embedding file are features (:class:`FeatureSelection`)."""
        return FeatureSelection.of(self.feature_prefix, self.feature_regex, self.feature_columns)
