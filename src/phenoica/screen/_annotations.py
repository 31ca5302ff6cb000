"""Known gene-gene relationships: annotation files of gene pairs, read and checked.

An annotation source is a table of two columns, ``entity1`` and ``entity2`` (gene symbols), one
related pair per row, in the shape of the EFAAR benchmark files. Three ways to get one:

- a file given in config (``biomap.annotations``: name -> path, CSV/TSV/TXT or parquet);
- the five sources shipped in the ``efaar-benchmarking`` wheel (CORUM, HuMAP, Reactome, SIGNOR,
  StringDB; ``efaar_benchmarking/benchmark_annotations/{name}.txt``), read from the installed
  package's data folder or from the wheel file itself. The package is never imported: its
  modules pull scvi-tools, lightning, scanpy and more, and only its data files are needed
  (located with ``importlib.metadata``, which reads the installed file list, not the code);
- ``corum_demo``: the pairs within a small list of real CORUM complexes kept in phenoica
  (``phenoica/data/corum_complexes.tsv``), the demo's gene symbols come from the same list.

Pairs are made canonical as EFAAR does: each pair sorted, self-pairs and duplicates dropped.
Nothing is downloaded.
"""

from __future__ import annotations

import functools
import importlib.metadata
import io
import itertools
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from phenoica.contract import ScreenError
from phenoica.utils import read_table

COLUMNS: tuple[str, str] = ("entity1", "entity2")
#: The sources of the efaar-benchmarking wheel, by file stem.
EFAAR_SOURCES: tuple[str, ...] = ("CORUM", "HuMAP", "Reactome", "SIGNOR", "StringDB")
EFAAR_DISTRIBUTION = "efaar-benchmarking"
EFAAR_FOLDER = "efaar_benchmarking/benchmark_annotations"
#: The built-in source: pairs within the complexes of ``corum_complexes.tsv``.
BUILTIN = "corum_demo"
COMPLEX_FILE = "corum_complexes.tsv"


def canonical_pairs(df: pd.DataFrame, source: str) -> pd.DataFrame:
    """``entity1``/``entity2`` as stripped strings, each pair sorted, self-pairs, missing values
    and duplicates dropped. A table without both columns is an error naming the source and the
    columns it has."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ScreenError(
            f"annotation {source}: missing column(s) {missing}; expected two columns {list(COLUMNS)} "
            f"(one related gene pair per row), found {[str(c) for c in df.columns][:10]}"
        )
    pairs = df[list(COLUMNS)].dropna().astype(str)
    a, b = pairs["entity1"].str.strip(), pairs["entity2"].str.strip()
    lo, hi = a.where(a <= b, b), b.where(a <= b, a)
    out = pd.DataFrame({"entity1": lo.to_numpy(), "entity2": hi.to_numpy()})
    out = out[(out["entity1"] != out["entity2"]) & (out["entity1"] != "") & (out["entity2"] != "")]
    return out.drop_duplicates().sort_values(list(COLUMNS)).reset_index(drop=True)


def read_annotation(path: Path | str) -> pd.DataFrame:
    """An annotation file (CSV, TSV, TXT as CSV, or parquet) as canonical pairs."""
    path = Path(path)
    if path.suffix.lower() == ".txt":
        if not path.exists():
            raise FileNotFoundError(f"{path}: annotation file not found")
        df = pd.read_csv(path)
    else:
        df = read_table(path)
    return canonical_pairs(df, str(path))


def efaar_installed_dir() -> Path:
    """The annotation folder of the installed ``efaar-benchmarking`` package, found from its
    distribution's file list (the package is not imported)."""
    try:
        dist = importlib.metadata.distribution(EFAAR_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ScreenError(
            f"biomap.efaar_sources needs the {EFAAR_DISTRIBUTION} files: install the optional extra "
            f"(pip install 'phenoica[annotations]', or pip install --no-deps {EFAAR_DISTRIBUTION} for the files "
            f"alone) or set biomap.efaar_wheel to the wheel's path"
        ) from None
    folder = Path(str(dist.locate_file(EFAAR_FOLDER)))
    if not folder.is_dir():
        raise ScreenError(f"{EFAAR_DISTRIBUTION} is installed but has no {EFAAR_FOLDER} folder (looked in {folder})")
    return folder


def read_efaar_source(name: str, wheel: Path | str | None = None) -> pd.DataFrame:
    """One of :data:`EFAAR_SOURCES` as canonical pairs: from ``wheel`` (the .whl file, read as a
    zip) if given, else from the installed package's data folder."""
    if name not in EFAAR_SOURCES:
        raise ScreenError(f"biomap.efaar_sources: unknown source {name!r}; expected some of {list(EFAAR_SOURCES)}")
    member = f"{EFAAR_FOLDER}/{name}.txt"
    if wheel is not None:
        wheel = Path(wheel)
        if not wheel.exists():
            raise FileNotFoundError(f"biomap.efaar_wheel: {wheel} not found")
        try:
            with zipfile.ZipFile(wheel) as zf:
                data = zf.read(member)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise ScreenError(
                f"biomap.efaar_wheel {wheel}: cannot read {member} ({exc}); expected the {EFAAR_DISTRIBUTION} wheel"
            ) from None
        return canonical_pairs(pd.read_csv(io.BytesIO(data)), f"{wheel}!{member}")
    return read_annotation(efaar_installed_dir() / f"{name}.txt")


@functools.lru_cache(maxsize=1)
def _complex_table() -> tuple[tuple[str, tuple[str, ...]], ...]:
    text = resources.files("phenoica").joinpath("data", COMPLEX_FILE).read_text()
    df = pd.read_csv(io.StringIO(text), sep="\t", comment="#")
    return tuple((str(c), tuple(str(g).split())) for c, g in zip(df["complex"], df["genes"]))


def corum_complexes() -> dict[str, list[str]]:
    """The built-in list of real CORUM complexes: complex name -> member gene symbols (sorted
    by name; the complexes share no gene)."""
    return {name: list(genes) for name, genes in _complex_table()}


def complex_pairs(complexes: Mapping[str, Any]) -> pd.DataFrame:
    """Every pair of genes within each complex (complex name -> genes), as canonical pairs."""
    rows = [pair for genes in complexes.values() for pair in itertools.combinations(sorted(set(genes)), 2)]
    return canonical_pairs(pd.DataFrame(rows, columns=list(COLUMNS)), "complex pairs")


def load_sources(cfg: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """The annotation sources of ``config["biomap"]``, by name: ``corum_demo`` when
    ``builtin_corum`` is on, each of ``efaar_sources`` (from ``efaar_wheel`` or the installed
    package) and each ``annotations`` entry (name -> path)."""
    out: dict[str, pd.DataFrame] = {}
    if cfg.get("builtin_corum"):
        out[BUILTIN] = complex_pairs(corum_complexes())
    for name in cfg.get("efaar_sources") or []:
        out[name] = read_efaar_source(name, cfg.get("efaar_wheel"))
    for name, path in (cfg.get("annotations") or {}).items():
        if name in out:
            raise ScreenError(f"biomap.annotations: source name {name!r} is also a built-in or EFAAR source; rename it")
        out[name] = read_annotation(path)
    return out
