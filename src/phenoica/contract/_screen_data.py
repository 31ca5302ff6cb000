"""The data contract: screen metadata, plate stores and embedding tables.

Metadata: one row per image (site), ``Metadata_*`` columns (pycytominer / copairs idiom).
Plate store: a Zarr v3 group ``{plate}.zarr`` with array ``tiles`` (n_images, C, H, W), uint8
or uint16, chunked along images, attribute ``channels``.
Embeddings: all ``Metadata_*`` columns plus float32 ``emb_0000 ... emb_{D-1}``.

The functions that open or write a plate store import zarr themselves: every stage reads the
column names and table checks here, and most never open a store.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from phenoica.contract._names import name_problems, row_name
from phenoica.utils import atomic_path, path_part_problem, read_table

if TYPE_CHECKING:
    import zarr

#: Prefix of the ground-truth factor columns of a simulated screen (``factor_00``, ...): written by
#: :mod:`phenoica.screen.demo`, read by :mod:`phenoica.identifiability`.
FACTOR_PREFIX = "factor_"

BATCH = "Metadata_Batch"
PLATE = "Metadata_Plate"
WELL = "Metadata_Well"
SITE = "Metadata_Site"
GENE = "Metadata_Gene"
GUIDE = "Metadata_Guide"
PERT_TYPE = "Metadata_PertType"
IMAGE_INDEX = "Metadata_ImageIndex"

REQUIRED_COLUMNS: tuple[str, ...] = (BATCH, PLATE, WELL, SITE, GENE, GUIDE, PERT_TYPE, IMAGE_INDEX)
CONTROL = "control"
PERTURBATION = "perturbation"
PERT_TYPES = (CONTROL, PERTURBATION)
TILES = "tiles"
SUPPORTED_DTYPES = (np.dtype("uint8"), np.dtype("uint16"))
FEATURE_PREFIX = "emb_"


class ScreenError(ValueError):
    """Input that breaks the data contract; the message names file, column or row."""


def feature_name(i: int) -> str:
    """Name of embedding feature ``i``: ``emb_0000``."""
    return f"{FEATURE_PREFIX}{i:04d}"


def metadata_columns(df: pd.DataFrame) -> list[str]:
    """The ``Metadata_*`` columns of a table, in order."""
    return [c for c in df.columns if str(c).startswith("Metadata_")]


def feature_columns(df: pd.DataFrame) -> list[str]:
    """The feature columns of a table: everything that is not ``Metadata_*``."""
    return [c for c in df.columns if not str(c).startswith("Metadata_")]


#: Identifier columns: strings, compared after removing surrounding whitespace.
KEY_COLUMNS: tuple[str, ...] = (BATCH, PLATE, WELL, GENE, GUIDE, PERT_TYPE)
#: Columns that describe a well (its perturbation): constant within a (plate, well).
WELL_COLUMNS: tuple[str, ...] = (GENE, GUIDE, PERT_TYPE)
#: Examples named per problem in an error message.
EXAMPLES = 5


def normalize_names(df: pd.DataFrame, columns: Sequence[str] = KEY_COLUMNS) -> pd.DataFrame:
    """A copy of ``df`` with its identifier columns (those of ``columns`` present) as strings
    without surrounding whitespace, so that ``"B01P01 "`` and ``"B01P01"`` name one plate.

    The one place names are normalized: every reader of a user's table (metadata, plate map,
    the plate list of the DAG, embeddings) goes through it. Missing values stay missing.
    """
    out = df.copy()
    for col in columns:
        if col in out.columns:
            values = out[col]
            out[col] = values.where(values.isna(), values.astype(str).str.strip())
    return out


def _key(name: str) -> str:
    return "".join(str(name).split()).casefold().replace("-", "_")


def near_miss(name: str, candidates: Iterable[str], exclude: Iterable[str] = ()) -> str | None:
    """The column of ``candidates`` that was probably meant for ``name``: equal up to case,
    spaces and dashes (``metadata_plate``, ``"Metadata_Gene "``), else a close spelling."""
    pool = [str(c) for c in candidates if str(c) not in set(exclude)]
    same = [c for c in pool if _key(c) == _key(name)]
    if same:
        return same[0]
    keyed = {_key(c): c for c in pool}
    close = difflib.get_close_matches(_key(name), list(keyed), n=1, cutoff=0.85)
    return keyed[close[0]] if close else None


def check_columns(columns: Iterable[str], required: Sequence[str], source: str, what: str = "expected") -> None:
    """Raise ScreenError listing every required column that is missing (not the first only),
    each with the present column that was probably meant (see :func:`near_miss`)."""
    present = [str(c) for c in columns]
    missing = [c for c in required if c not in present]
    if not missing:
        return
    hints = []
    for col in missing:
        meant = near_miss(col, present, exclude=required)
        if meant is not None:
            hints.append(f"column {meant!r} is probably {col}")
    hint = f" ({'; '.join(hints)}: names are case- and space-sensitive)" if hints else ""
    raise ScreenError(f"{source}: missing required column(s) {missing}{hint}; {what} {list(required)}")


def _labels(df: pd.DataFrame, mask: Any, limit: int = EXAMPLES) -> list:
    """Row labels (the table's index: a file's 0-based data rows) where ``mask`` holds."""
    labels = df.index[np.asarray(mask, dtype=bool)][:limit]
    return [int(x) if isinstance(x, (int, np.integer)) else x for x in labels]


def _values_with_rows(df: pd.DataFrame, where: Any, col: str) -> str:
    """``'a' (e.g. row 3), 'b' (e.g. row 40)``: the distinct values of ``col`` among the rows
    selected by ``where``, each with its first row."""
    part = df.loc[np.asarray(where, dtype=bool), [col]]
    first = part[~part[col].duplicated()]
    return ", ".join(f"{v!r} (e.g. {row_name(_labels(first, first[col] == v, 1)[0])})" for v in sorted(first[col]))


def duplicate_problems(df: pd.DataFrame, keys: Sequence[str], what: str) -> list[str]:
    """Rows of ``df`` that repeat the ``keys`` of another row (e.g. one image twice: a plate
    exported twice, or a file given twice), naming the first repeated key, its rows, and how
    many rows repeat in all; ``what`` says what a key is (``an image``)."""
    present = [k for k in keys if k in df.columns]
    if len(present) != len(keys) or df.empty:
        return []
    dup = df.duplicated(present, keep=False).to_numpy()
    if not dup.any():
        return []
    first = df[dup].iloc[0]
    same = np.ones(len(df), dtype=bool)
    for k in present:
        same &= (df[k] == first[k]).to_numpy()
    rows = ", ".join(row_name(r) for r in _labels(df, same, 6))
    n_extra = int(df.duplicated(present).sum())
    key = ", ".join(str(first[k]) for k in present)
    names = ", ".join(k.removeprefix("Metadata_").lower() for k in present)
    return [
        f"duplicate ({names}) ({key}) at {rows}; {n_extra} row(s) in all repeat {what} of another row: each must "
        "appear once (a plate exported twice, or one file given twice?)"
    ]


def relation_problems(df: pd.DataFrame) -> list[str]:
    """Breaches of the data contract between columns, each naming values and example rows:

    - a guide listed under two genes (a guide targets one gene);
    - a gene listed under both PertTypes;
    - a plate in two batches;
    - a well whose gene, guide or PertType changes between its rows (needs ``Metadata_Well``).

    Columns absent from ``df`` are skipped; names are compared as they are (normalize first).
    """
    problems: list[str] = []

    def one_to_one(key: str, value: str, listed: str, rule: str) -> None:
        if key not in df.columns or value not in df.columns:
            return
        pairs = df[[key, value]].drop_duplicates()
        bad = sorted(pairs.loc[pairs[key].duplicated(), key].unique().tolist())
        for k in bad[:EXAMPLES]:
            n = int((pairs[key] == k).sum())
            problems.append(f"{listed.format(k=k, n=n)}: {_values_with_rows(df, df[key] == k, value)}; {rule}")
        if len(bad) > EXAMPLES:
            problems.append(f"... and {len(bad) - EXAMPLES} more like it: {bad[EXAMPLES : 2 * EXAMPLES]}")

    one_to_one(GUIDE, GENE, "guide {k!r} is listed under {n} genes", "a guide targets one gene")
    one_to_one(GENE, PERT_TYPE, "gene {k!r} is listed under both PertTypes", "a gene is a control or a perturbation")
    one_to_one(PLATE, BATCH, "plate {k!r} is in {n} batches", "a plate belongs to one batch")
    if PLATE in df.columns and WELL in df.columns:
        cols = [c for c in WELL_COLUMNS if c in df.columns]
        changing: dict[tuple, list[str]] = {}  # well -> its columns that change
        for col in cols:
            pairs = df[[PLATE, WELL, col]].drop_duplicates()
            for well in (
                pairs[pairs.duplicated([PLATE, WELL])][[PLATE, WELL]]
                .drop_duplicates()
                .itertuples(index=False, name=None)
            ):
                changing.setdefault(well, []).append(col)
        for (plate, well), which in list(changing.items())[:EXAMPLES]:
            where = (df[PLATE] == plate) & (df[WELL] == well)
            values = "; ".join(f"{col} {_values_with_rows(df, where, col)}" for col in which)
            problems.append(
                f"well ({plate}, {well}) holds more than one perturbation: {values}; "
                f"{', '.join(cols)} describe a well and are constant within it"
            )
        if len(changing) > EXAMPLES:
            problems.append(
                f"... and {len(changing) - EXAMPLES} more wells like it: {list(changing)[EXAMPLES : 2 * EXAMPLES]}"
            )
    return problems


def pert_type_problems(df: pd.DataFrame) -> list[str]:
    """Rows whose PertType is neither control nor perturbation (the first named, then others)."""
    bad = ~df[PERT_TYPE].isin(PERT_TYPES)
    if not bad.any():
        return []
    rows = _labels(df, bad)
    more = f" (also row(s) {rows[1:]})" if len(rows) > 1 else ""
    return [f"column {PERT_TYPE} row {rows[0]} is {df.loc[rows[0], PERT_TYPE]!r}{more}; expected one of {PERT_TYPES}"]


def control_problems(df: pd.DataFrame) -> list[str]:
    """Batches without a control row: each batch's controls are the reference its profiles are
    centred on and classified against. A whole screen's check (a plate's rows alone may lack
    controls that other plates of its batch hold)."""
    batches = df[BATCH].unique().tolist()
    with_controls = set(df.loc[df[PERT_TYPE] == CONTROL, BATCH].unique().tolist())
    missing = sorted(b for b in batches if b not in with_controls)
    if not missing:
        return []
    return [
        f"batch(es) {missing[: 2 * EXAMPLES]} have no control rows ({PERT_TYPE} == {CONTROL!r}); every batch needs "
        "controls: they are the reference its profiles are centred on and classified against"
    ]


def raise_problems(source: str, problems: Sequence[str]) -> None:
    """Raise one ScreenError naming ``source`` and every problem (one line each), if any."""
    if len(problems) == 1:
        raise ScreenError(f"{source}: {problems[0]}")
    if problems:
        raise ScreenError(f"{source}: {len(problems)} problems:\n" + "\n".join(f"  - {p}" for p in problems))


def validate_metadata(df: pd.DataFrame, source: str = "metadata") -> pd.DataFrame:
    """Check a metadata table against the contract and return it with normalized names and dtypes.

    Raises one ScreenError naming ``source`` and, at once, every problem found with the
    columns or rows at fault: no rows; missing required columns (with the column probably
    meant, e.g. ``Metadata_gene``); missing values; non-integer sites or image indices; a
    PertType other than control/perturbation; a name that is not plain text
    (:func:`phenoica.contract.name_problems`); duplicate (plate, well, site); duplicate (plate,
    image index); a negative image index; and the relations of :func:`relation_problems` (a
    guide under two genes, a gene under two PertTypes, a plate in two batches, a well whose
    perturbation changes). Rows are the table's index labels: a file's 0-based data rows when
    read by :func:`read_metadata` or :func:`read_plate_metadata`. Identifier columns are
    stripped of surrounding whitespace (:func:`normalize_names`).
    """
    if len(df) == 0:
        raise ScreenError(f"{source}: the table has no rows; expected one row per image")
    check_columns(df.columns, REQUIRED_COLUMNS, source)
    df = normalize_names(df)
    problems: list[str] = []
    for col in REQUIRED_COLUMNS:
        bad = df[col].isna()
        if bad.any():
            problems.append(f"column {col} has missing values at row(s) {_labels(df, bad)}")
    for col in (SITE, IMAGE_INDEX):
        if df[col].isna().any():
            continue
        numbers = pd.to_numeric(df[col], errors="coerce")
        bad = numbers.isna() | (numbers != np.floor(numbers))
        if bad.any():
            problems.append(
                f"column {col} must hold integers; row(s) {_labels(df, bad)} hold {df[col][bad].head(3).tolist()}"
            )
        else:
            df[col] = numbers.astype(np.int64)
    problems += pert_type_problems(df)
    problems += name_problems(df, KEY_COLUMNS)
    raise_problems(source, problems)
    dup = df.duplicated([PLATE, WELL, SITE], keep=False)
    if dup.any():
        rows = _labels(df, dup, 6)
        first = df.loc[rows[0]]
        problems.append(
            f"duplicate (plate, well, site) ({first[PLATE]}, {first[WELL]}, {first[SITE]}) "
            f"at rows {rows}; each image must appear once"
        )
    dup = df.duplicated([PLATE, IMAGE_INDEX], keep=False)
    if dup.any():
        problems.append(f"duplicate ({PLATE}, {IMAGE_INDEX}) at rows {_labels(df, dup, 6)}")
    neg = df[IMAGE_INDEX] < 0
    if neg.any():
        problems.append(f"column {IMAGE_INDEX} is negative at row(s) {_labels(df, neg)}")
    problems += relation_problems(df)
    raise_problems(source, problems)
    return df


def validate_screen_metadata(df: pd.DataFrame, source: str = "metadata") -> pd.DataFrame:
    """:func:`validate_metadata` for a whole screen's table, plus the screen-level rule that
    every batch has controls."""
    df = validate_metadata(df, source)
    raise_problems(source, control_problems(df))
    return df


PROFILE_COLUMNS: tuple[str, ...] = (BATCH, PLATE, GENE, GUIDE, PERT_TYPE)


def validate_profile_metadata(df: pd.DataFrame, source: str = "profiles") -> None:
    """Check what the analysis stages need of a profile table (image- or well-level, or
    embeddings from elsewhere): the batch/plate/gene/guide/PertType columns, without missing
    values, PertTypes control/perturbation, and the relations of :func:`relation_problems`
    within the table (no guide under two genes, no gene under two PertTypes, ...). Names are
    compared as they are: a profile table's names travel through the analysis untouched.
    Rows are named by the table's index labels."""
    check_columns(df.columns, PROFILE_COLUMNS, source)
    problems = []
    for col in PROFILE_COLUMNS:
        bad = df[col].isna()
        if bad.any():
            problems.append(f"column {col} has missing values at row(s) {_labels(df, bad)}")
    raise_problems(source, problems)
    df = df.astype({c: str for c in PROFILE_COLUMNS})
    problems += pert_type_problems(df)
    problems += name_problems(df, PROFILE_COLUMNS)
    raise_problems(source, problems)
    problems += relation_problems(df)
    raise_problems(source, problems)


def read_metadata(path: Path | str) -> pd.DataFrame:
    """Read and validate a metadata table (parquet or CSV); rows are named by their 0-based
    position in the file."""
    return validate_metadata(read_table(path, text_columns=KEY_COLUMNS), source=str(path))


def check_plate_names(plates: Iterable[str], source: str) -> None:
    """Plate names become folder and file names (``results/screen/plates/{plate}.zarr``,
    ``results/embed/{model}/{plate}.parquet``): each must be a safe path part
    (:func:`phenoica.utils.path_part_problem`: no ``/``, no ``.``/``..``, no control characters).
    One ScreenError naming ``source`` and every unsafe plate."""
    problems = []
    for plate in plates:
        why = path_part_problem(plate)
        if why is not None:
            problems.append(
                f"plate name {plate!r} in column {PLATE} {why}; plate names become file names under results/, so "
                "they cannot hold '/', '\\', be '.' or '..', or hold control characters"
            )
    raise_problems(source, problems[:EXAMPLES])


def read_plate_metadata(path: Path | str, plate: str) -> pd.DataFrame:
    """One plate's validated rows of a metadata table, ordered by image index.

    Parquet tables are read with a row filter (the plate column is read first to find the
    plate's rows and the names that mean it, e.g. ``"B01P01 "``), so each per-plate job reads
    its own rows, not the whole screen's. Errors name rows by their position in the file
    (0-based data rows), not within the plate. Cross-plate rules (a plate in one batch, a guide
    under one gene, controls in every batch) are checked once for the whole table, up front,
    by the ``validate_screen`` job (:func:`validate_screen_metadata`).
    """
    path = Path(path)
    if path.suffix.lower() in {".parquet", ".pq"}:
        if not path.exists():
            raise FileNotFoundError(f"{path}: file not found")
        schema = pq.read_schema(path)
        if PLATE not in schema.names:
            check_columns(schema.names, REQUIRED_COLUMNS, str(path))
        names = pq.read_table(path, columns=[PLATE]).column(0).to_pandas()
        mask = (names.astype(str).str.strip() == plate).to_numpy() & names.notna().to_numpy()
        if pa.types.is_string(schema.field(PLATE).type) or pa.types.is_large_string(schema.field(PLATE).type):
            raw = sorted(set(names[mask]))
            table = pd.read_parquet(path, filters=[(PLATE, "in", raw)]) if raw else pd.DataFrame(columns=schema.names)
        else:  # plate names stored as numbers: select after reading
            table = read_table(path)[mask]
        table.index = np.flatnonzero(mask)
    else:
        table = read_table(path, text_columns=KEY_COLUMNS)
        if PLATE not in table.columns:
            check_columns(table.columns, REQUIRED_COLUMNS, str(path))
        table = table[(table[PLATE].astype(str).str.strip() == plate).to_numpy() & table[PLATE].notna().to_numpy()]
    if table.empty:
        raise ScreenError(f"{path}: no rows for plate {plate!r}")
    rows = validate_metadata(table, source=f"{path} (plate {plate})")
    return rows.sort_values(IMAGE_INDEX).reset_index(drop=True)


def plates_of(metadata: pd.DataFrame) -> list[str]:
    """Plate names in order of first appearance."""
    return list(dict.fromkeys(metadata[PLATE].astype(str)))


def open_plate(path: Path | str) -> zarr.Array:
    """Open a plate store's ``tiles`` array read-only, checking shape and dtype."""
    import zarr  # the plate store's library: loaded by the jobs that open a store

    path = Path(path)
    if not path.exists():
        raise ScreenError(f"{path}: plate store not found")
    try:
        group = zarr.open_group(str(path), mode="r")
        tiles = group[TILES]
    except (KeyError, FileNotFoundError, ValueError) as exc:
        raise ScreenError(f"{path}: not a plate store with a '{TILES}' array ({exc})") from None
    if tiles.ndim != 4:
        raise ScreenError(f"{path}: '{TILES}' must be 4-D (n_images, C, H, W), got shape {tiles.shape}")
    if np.dtype(tiles.dtype) not in SUPPORTED_DTYPES:
        raise ScreenError(f"{path}: unsupported dtype {tiles.dtype}; expected uint8 or uint16")
    return tiles


def plate_channels(path: Path | str) -> list[str]:
    """Channel names stored in a plate store's attributes (``channels``)."""
    import zarr  # the plate store's library: loaded by the jobs that open a store

    group = zarr.open_group(str(path), mode="r")
    channels = group.attrs.get("channels") or group[TILES].attrs.get("channels")
    if channels is None:
        n = group[TILES].shape[1]
        return [f"ch{i}" for i in range(n)]
    return list(channels)


def channel_indices(
    store: Path, channels: Sequence[str] | None, key: str = "channels"
) -> tuple[list[int] | None, list[str]]:
    """(indices into the store's channels, names fed to the model) for ``channels``, the store's
    channel names in the model's order (None = all, in the store's order). A name the store
    lacks, or a name given twice, raises ScreenError naming ``key`` and the store's channels."""
    names = plate_channels(store)
    if channels is None:
        return None, names
    missing = [c for c in channels if c not in names]
    if missing:
        raise ScreenError(
            f"{store}: channel(s) {missing} named by config key {key} are not in the plate's channels {names}"
        )
    twice = sorted({c for c in channels if list(channels).count(c) > 1})
    if twice:
        raise ScreenError(f"config key {key}: channel(s) {twice} listed more than once")
    idx = [names.index(c) for c in channels]
    return (None if idx == list(range(len(names))) else idx), list(channels)


def write_plate(
    path: Path | str,
    tiles: np.ndarray | Iterable[np.ndarray],
    channels: Sequence[str],
    shape: tuple[int, int, int, int] | None = None,
    dtype: np.dtype | str | None = None,
    chunk_images: int = 64,
) -> Path:
    """Write a plate store atomically.

    ``tiles`` is either a whole array (n, C, H, W) or an iterable of blocks along images (then
    ``shape`` and ``dtype`` are required), so plates larger than memory stream through.
    """
    import zarr  # the plate store's library: loaded by the jobs that write a store

    path = Path(path)
    if isinstance(tiles, np.ndarray):
        shape, dtype, blocks = tiles.shape, tiles.dtype, [tiles]
    else:
        if shape is None or dtype is None:
            raise ValueError("write_plate: shape and dtype are required when tiles is an iterable")
        blocks = tiles
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise ScreenError(f"{path}: unsupported dtype {dtype}; expected uint8 or uint16")
    if len(shape) != 4 or shape[1] != len(channels):
        raise ScreenError(f"{path}: tiles shape {shape} does not match {len(channels)} channels {list(channels)}")
    with atomic_path(path) as tmp:
        group = zarr.open_group(str(tmp), mode="w", zarr_format=3)
        group.attrs["channels"] = list(channels)
        arr = group.create_array(
            TILES, shape=shape, dtype=dtype, chunks=(max(1, min(chunk_images, shape[0])), *shape[1:])
        )
        arr.attrs["channels"] = list(channels)
        start = 0
        for block in blocks:
            block = np.asarray(block)
            arr[start : start + block.shape[0]] = block
            start += block.shape[0]
        if start != shape[0]:
            raise ScreenError(f"{path}: wrote {start} images, expected {shape[0]}")
    return path


def check_plate_against_metadata(tiles: zarr.Array, plate_rows: pd.DataFrame, store: str) -> None:
    """Every image index of the plate's metadata rows must exist in its store."""
    n = tiles.shape[0]
    bad = plate_rows[(plate_rows[IMAGE_INDEX] >= n) | (plate_rows[IMAGE_INDEX] < 0)]
    if len(bad):
        row = bad.iloc[0]
        raise ScreenError(
            f"{store}: metadata row (plate {row[PLATE]}, well {row[WELL]}, site {row[SITE]}) has "
            f"{IMAGE_INDEX} {row[IMAGE_INDEX]}, out of range for {n} images in the store"
        )
