"""What the check at the door reads cheaply besides the screen, so that a setting or a user's
file that cannot work fails before any job instead of one job (or a whole run) later:

- the width of a list-valued embedding column (``screen.embedding_column``), read from one row
  of the first file, for ``transforms.n_components`` against the features;
- the frozen transforms (``transforms.frozen``): each ``{model}/{variant}.npz`` read as the
  ``apply_transform`` job reads it (no pickles: an object array is refused), its variant and its
  input width against the model's features.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from phenoica.screen import parquet_source


def list_column_width(path: Path | str, column: str) -> int | None:
    """The length of the first non-empty value of the list column ``column`` in a parquet (or
    .h5ad) embedding file, read from its first row group that has one; None when the file has no
    such column or no value."""
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(parquet_source(path))
    if column not in handle.schema_arrow.names:
        return None
    for group in range(handle.num_row_groups):
        values = handle.read_row_group(group, columns=[column]).column(0).drop_null()
        if len(values):
            return len(values[0].as_py())
    return None


def listed_features(config: Mapping[str, Any], features: Mapping[str, Any]) -> dict[str, int]:
    """Model -> features per profile for the models whose count the door's summary lacks
    (``features``: model -> count or None) and whose embeddings are a list column: the width of
    that column in the model's first file (:func:`list_column_width`)."""
    from phenoica.workflow import _dag as dag

    column = config["screen"].get("embedding_column")
    if config["screen"]["source"] != "embeddings" or not column:
        return {}
    out = {}
    for model in config["models"]:
        if features.get(model):
            continue
        paths = dag.embedding_inputs(config, model)
        width = list_column_width(paths[0], column) if paths else None
        if width:
            out[model] = width
    return out


def frozen_transform_problems(config: Mapping[str, Any], features: Mapping[str, int]) -> list[str]:
    """Each frozen transform (``transforms.frozen``/{model}/{variant}.npz, for every model and
    variant of the run) read as the job reads it (:func:`phenoica.transforms.load_transform`:
    no pickles), fitted for its variant, and taking the model's features per profile
    (``features``: model -> count, where known)."""
    from phenoica.transforms import load_transform

    folder = config["transforms"]["frozen"]
    if not folder:
        return []
    problems = []
    for model in sorted(config["models"]):
        for variant in config["transforms"]["variants"]:
            path = Path(folder) / model / f"{variant}.npz"
            where = f"transforms.frozen: {path}"
            try:
                transform = load_transform(path)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                problems.append(f"{where}: {exc}")
                continue
            if transform.variant != variant:
                problems.append(f"{where}: holds the transform of variant {transform.variant!r}; expected {variant!r}")
            width, d = len(transform.feature_names_in), features.get(model)
            if d and width != d:
                problems.append(
                    f"{where}: was fitted on {width} feature(s), but model {model!r} has {d} per profile; expected "
                    "the transforms fitted on this model's features"
                )
    return problems
