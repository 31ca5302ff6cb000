"""Gather per-plate embeddings into one profile table, from phenoica or from elsewhere; read
profile tables back row batch by row batch.

Entry points: the embed rule's parquet files, or any parquet in the data contract's shape
(``Metadata_*`` columns + numeric feature columns, or one list-valued embedding column).
Analysis level: per image, or per well (mean of the well's images).

Everything streams, so a screen of tens of millions of images needs no large node:

- :func:`~phenoica.profiles.write_profiles` reads each embedding file in row batches (``pyarrow`` ``iter_batches``)
  and writes the profile parquet with a ``ParquetWriter`` (row groups of ``batch_rows`` rows),
  atomically. Every batch is validated as it passes (profile metadata, numeric features without
  an infinite value, the features every file has: ``screen.feature_sets``); the "gene under two
  PertTypes" check holds across files through a running gene -> PertType map. An export in its
  own column names (CSV, TSV, Parquet, ``.h5ad``) is read through
  :mod:`phenoica.screen._exports`.
- :func:`~phenoica.profiles.clean_profiles` then applies the field's profile hygiene with
  pycytominer (per-plate normalization against the controls, features with a missing value,
  constant or outlier features dropped or clipped), streamed.
- Well level: wells never span plates, so each input file (a plate) is averaged on its own
  before it is written; a first, metadata-only pass over the files decides which metadata
  columns are constant within every well (those are kept, as in :func:`~phenoica.profiles.aggregate_wells`).
  Memory then holds one file's wells at a time: give one file per plate (or a few).
- :class:`~phenoica.profiles.ProfileSource` yields row batches of a profile parquet (or of an in-memory table)
  for the transform stages, pass after pass.

Memory is bounded by ``batch_rows`` rows (default :data:`~phenoica.profiles.DEFAULT_BATCH_ROWS`), not by the
screen. The output has the metadata columns first (the union over the files, in order of
appearance; a column a file lacks is null there), then the float32 features.

Modules, one job each:

- :mod:`~phenoica.profiles._tables`: profile parquets' columns, row batches read
  (``ProfileSource``) and written (``RowGroupWriter``, ``write_batches``);
- :mod:`~phenoica.profiles._columns`: which columns are features (``FeatureSelection``,
  ``IDENTIFIER_PATTERNS``); list-valued embedding columns;
- :mod:`~phenoica.profiles._embeddings`: embedding files' footers planned and checked
  (``plan_embeddings``), their row batches validated as they stream; ``expand_glob``;
- :mod:`~phenoica.profiles._wells`: per-well means, streamed (``WellMeans``) or in memory
  (``aggregate_wells``);
- :mod:`~phenoica.profiles._gather`: the gather itself (``iter_profiles``, ``write_profiles``,
  ``gather_profiles``);
- :mod:`~phenoica.profiles._hygiene`: the profile hygiene (``Hygiene``, ``hygiene_plan``,
  ``clean_profiles``; ``footer_stats`` for the door);
- :mod:`~phenoica.profiles._options`: ``GatherOptions``, what the ``gather_profiles`` job reads.
"""

from phenoica.utils import lazy_face

#: The public names, by the private module that defines each (imported on first use).
__all__, __getattr__, __dir__ = lazy_face(
    __name__,
    {
        "_columns": ["FeatureSelection", "IDENTIFIER_PATTERNS", "is_identifier"],
        "_constant_rows": ["ConstantRows", "constant_row_notes"],
        "_embeddings": ["expand_glob", "plan_files"],
        "_gather": ["gather_profiles", "write_profiles"],
        "_hygiene": ["Hygiene", "clean_profiles", "normalize_problems", "planned_hygiene", "write_plan"],
        "_options": ["GatherOptions"],
        "_tables": [
            "DEFAULT_BATCH_ROWS",
            "ProfileSource",
            "batch_features",
            "check_numeric_features",
            "split_columns",
            "write_batches",
        ],
        "_wells": ["WellMeans", "aggregate_wells"],
    },
)
