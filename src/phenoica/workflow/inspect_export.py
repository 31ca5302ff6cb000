"""A first look at a new export: ``python -m phenoica.workflow.inspect_export FILE [FILE ...]``.

Reads one or more per-well (or per-image) profile exports (CSV, TSV, Parquet, ``.h5ad``, as
``screen.embeddings`` takes them) and prints a config to start from, as YAML with comments:

- the roles it recognises among the column names the field writes (pycytominer's and
  CellProfiler's ``Metadata_Plate`` / ``Metadata_Well``, JUMP's ``Metadata_Source`` /
  ``Metadata_Batch`` / ``Metadata_JCP2022`` / ``Metadata_Symbol`` / ``Metadata_pert_type`` /
  ``Metadata_control_type``, and the like: :data:`ROLE_NAMES`), as ``screen.columns``;
- the feature pattern, ``screen.feature_regex``, from the numeric columns' compartment prefixes
  (``Cells_``, ``Nuclei_`` ...; identifier and location columns left out);
- the candidate control values of the column that says a row's role, with their counts, the
  ones named like a negative control (:data:`CONTROL_NAMES`) chosen as ``screen.controls``;
- ``splits.scheme: in_distribution`` where the files hold one batch;
- what the door says of that config (:func:`phenoica.workflow.check_screen_once`, run on the
  files with a results folder in a temporary folder): its notes, or why it refuses the screen.

Nothing is written beside the files; the config is printed for the user to read, edit and save.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import yaml

#: The column names the field writes for each of phenoica's roles, in order of preference,
#: compared without case, a ``Metadata_`` prefix, underscores or spaces.
ROLE_NAMES: dict[str, tuple[str, ...]] = {
    "batch": ("batch", "batch_name", "source"),
    "plate": ("plate", "plate_name", "assay_plate_barcode", "plate_barcode", "plate_id"),
    "well": ("well", "well_position", "wellposition", "well_id"),
    "site": ("site", "field", "fov"),
    "gene": ("gene", "symbol", "gene_symbol", "target_gene", "gene_name", "target"),
    "guide": (
        "guide",
        "sgrna",
        "guide_id",
        "gene_allele",
        "allele",
        "broad_sample",
        "jcp2022",
        "orf_id",
        "construct",
        "pert_iname",
        "pert_id",
    ),
    "pert_type": ("perttype",),
}
#: Columns that say a row's role (control or not), in order of preference.
ROLE_COLUMNS: tuple[str, ...] = ("pert_type", "control_type", "node_type", "negcon", "control", "sample_type")
#: Values named like a negative control (matched whole, without case).
CONTROL_NAMES = re.compile(
    r"negcon|neg_?con(trol)?|negative(_?control)?|nc|ctrl|control|dmso|non-?targeting|ntc|nt|empty|mock|scramble"
)
#: Values listed per column in a comment.
SHOWN = 12


def _key(name: str) -> str:
    """A column name compared as :data:`ROLE_NAMES` are: lower case, no ``Metadata_``, no ``_`` or spaces."""
    text = str(name).strip().lower()
    text = text.removeprefix("metadata_").removeprefix("metadata")
    return re.sub(r"[_\s]+", "", text)


def recognised_roles(columns: Sequence[str]) -> dict[str, str]:
    """Role -> the column of ``columns`` that holds it: the contract's own name where the file
    has it (``Metadata_Plate``), else the first named as the field names it (:data:`ROLE_NAMES`);
    a column takes one role."""
    from phenoica.screen import ROLES

    by_key: dict[str, str] = {}
    for column in columns:
        by_key.setdefault(_key(column), str(column))
    present = set(map(str, columns))
    roles: dict[str, str] = {}
    for role, names in ROLE_NAMES.items():
        own = ROLES[role] if ROLES[role] in present else None
        found = own or next((by_key[_key(n)] for n in names if _key(n) in by_key), None)
        if found is not None and found not in roles.values():
            roles[role] = found
    return roles


def role_column(columns: Sequence[str], roles: dict[str, str]) -> str | None:
    """The column that says whether a row is a control (:data:`ROLE_COLUMNS`), other than one
    taken as a role already (but ``pert_type``)."""
    by_key = {_key(c): str(c) for c in columns}
    for name in ROLE_COLUMNS:
        column = by_key.get(_key(name))
        if column is not None and (column not in roles.values() or roles.get("pert_type") == column):
            return column
    return None


def feature_regex(table: pd.DataFrame) -> tuple[str | None, int]:
    """A ``screen.feature_regex`` over the numeric columns that are not metadata or identifiers,
    by their compartment prefix (``(Cells|Cytoplasm|Nuclei)_.*``), and how many columns it
    takes; None (phenoica's default ``emb_`` prefix) where the features are named so."""
    from phenoica.profiles import is_identifier

    numeric = [
        str(c)
        for c in table.columns
        if not str(c).startswith("Metadata_") and pd.api.types.is_numeric_dtype(table[c]) and not is_identifier(str(c))
    ]
    if not numeric or all(c.startswith("emb_") for c in numeric):
        return None, len(numeric)
    prefixes = pd.Series([c.split("_", 1)[0] for c in numeric if "_" in c]).value_counts()
    kept = [p for p, n in prefixes.items() if n >= 2]
    if not kept:
        return None, 0
    regex = f"({'|'.join(sorted(map(re.escape, kept)))})_.*"
    return regex, sum(bool(re.fullmatch(regex, c)) for c in numeric)


def control_candidates(table: pd.DataFrame, column: str) -> tuple[pd.Series, list[str]]:
    """The values of ``column`` with their row counts (most rows first), and those named like a
    negative control (:data:`CONTROL_NAMES`)."""
    counts = table[column].dropna().astype(str).str.strip().replace("", pd.NA).dropna().value_counts()
    chosen = [str(v) for v in counts.index if CONTROL_NAMES.fullmatch(str(v).lower())]
    return counts, chosen


def files_glob(paths: Sequence[str]) -> str:
    """A glob that matches every path of ``paths``: the path itself for one file, else the
    paths' common start, ``*`` and their common end."""
    if len(paths) == 1:
        return paths[0]
    start = os.path.commonprefix(list(paths))
    end = os.path.commonprefix([p[::-1] for p in paths])[::-1]
    end = end[max(0, len(start) + len(end) - min(map(len, paths))) :]
    return f"{start}*{end}"


def _read(paths: Sequence[str]) -> pd.DataFrame:
    """The files as one table, in their own column names (``screen.embeddings``' reader)."""
    from phenoica.screen import ExportSpec, read_export

    return pd.concat([read_export(p, ExportSpec()) for p in paths], ignore_index=True)


def _said(roles: dict[str, str], table: pd.DataFrame, role_col: str | None) -> list[str]:
    """The comments on what was recognised and what was left to the user."""
    lines = [f"roles recognised: {', '.join(f'{r} <- {c}' for r, c in roles.items()) or 'none'}"]
    for role in ("batch", "plate", "well", "gene", "guide"):
        if role not in roles:
            lines.append(f"no column recognised as {role}: set screen.columns.{role} to the file's column")
    if role_col is not None:
        counts, chosen = control_candidates(table, role_col)
        shown = ", ".join(f"{v} {n}" for v, n in counts.head(SHOWN).items())
        lines.append(f"candidate control values in {role_col} (rows): {shown}{' ...' if len(counts) > SHOWN else ''}")
        if not chosen:
            lines.append(f"no value of {role_col} is named like a negative control: set screen.controls.values")
    else:
        lines.append("no column says which rows are controls: set screen.controls (a column and its control values)")
    return lines


def starting_config(
    paths: Sequence[str], table: pd.DataFrame, name: str = "export"
) -> tuple[dict[str, Any], list[str]]:
    """(a config to start from, the comments on it) for the export ``paths`` read as ``table``
    (see the module doc)."""
    roles = recognised_roles(list(table.columns))
    role_col = role_column(list(table.columns), roles)
    comments = _said(roles, table, role_col)
    screen: dict[str, Any] = {"source": "embeddings", "embeddings": files_glob(list(paths))}
    regex, n_features = feature_regex(table)
    if regex is not None:
        screen["feature_regex"] = regex
    comments.append(f"features: {n_features} numeric column(s){' matching ' + regex if regex else ''}")
    if "batch" not in roles and "plate" in roles:
        roles["batch"] = roles["plate"]
        comments.append(f"no batch column: each plate is its own batch (batch <- {roles['plate']})")
    if "guide" not in roles and "gene" in roles:
        roles["guide"] = roles["gene"]
        comments.append(f"no guide column: each gene is its own guide (guide <- {roles['gene']})")
    pert = roles.pop("pert_type", None)
    screen["columns"] = dict(roles)
    values = set(table[pert].dropna().astype(str).str.strip()) if pert is not None else set()
    if pert is not None and values <= {"control", "perturbation"}:
        screen["columns"]["pert_type"] = pert
    elif role_col is not None:
        screen["controls"] = {"column": role_col, "values": control_candidates(table, role_col)[1]}
    config: dict[str, Any] = {"seed": 0, "results": f"results/{name}", "screen": screen, "models": {name: {}}}
    batches = table[roles["batch"]].nunique() if "batch" in roles else 0
    if batches == 1:
        config["splits"] = {"scheme": "in_distribution"}
        comments.append("one batch: splits.scheme in_distribution (leave-one-batch-out needs 2 or more)")
    return config, comments


def door_says(config: dict[str, Any]) -> list[str]:
    """What the door says of ``config`` (a results folder in a temporary folder): its notes, or
    the problems it refuses the screen for, one per line."""
    from phenoica.contract import ConfigError, ScreenError, run_models, validate_config
    from phenoica.workflow import _dag
    from phenoica.workflow._validate import check_screen_once

    with tempfile.TemporaryDirectory() as tmp:
        try:
            validated = validate_config(run_models({**config, "results": str(Path(tmp) / "results")}))
            _dag._table.cache_clear()
            found = check_screen_once(validated, {}, Path(tmp) / "validated.json", log=logging.getLogger("inspect"))
        except (ConfigError, ScreenError, ValueError, OSError) as exc:
            return ["refuses the screen:", *str(exc).splitlines()]
    return ["passes, with these notes:" if found["notes"] else "passes", *found["notes"]]


def render(config: dict[str, Any], comments: Sequence[str], said: Sequence[str]) -> str:
    """The config as YAML, the comments before it and what the door says after it (as comments)."""
    head = [
        "# phenoica: a config to start from (python -m phenoica.workflow.inspect_export); read it, edit it,",
        "# save it and run: snakemake --cores 2 --configfile <it>",
        *(f"# {line}" for line in comments),
    ]
    body = yaml.safe_dump(config, sort_keys=False, width=120)
    tail = ["# what the door says of it: " + (said[0] if said else ""), *(f"#   {line}" for line in said[1:])]
    return "\n".join(head) + "\n" + body + "\n".join(tail) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m phenoica.workflow.inspect_export",
        description="Read a profile export (one or more files) and print a phenoica config to start from.",
    )
    parser.add_argument("files", nargs="+", help="the export's files (CSV, TSV, .gz, Parquet, .h5ad)")
    parser.add_argument("--name", default="export", help="the model's name and results folder (default: export)")
    parser.add_argument("--no-door", action="store_true", help="print the config without running the door on it")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    paths = [str(p) for p in args.files]
    config, comments = starting_config(paths, _read(paths), args.name)
    said = [] if args.no_door else door_says(config)
    sys.stdout.write(render(config, comments, said))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
