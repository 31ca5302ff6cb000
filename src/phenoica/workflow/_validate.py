"""The whole screen checked once, when the DAG is built, before any job runs.

Per-plate jobs see one plate; rules that span plates (a plate in one batch, a guide under one
gene, a gene under one PertType, controls in every batch) and the fit between the plates and
the models (channel counts, image size against the crop) would otherwise surface late: after
other plates were ingested, a model trained, or other plates embedded. :func:`validate_screen`
reads the user's table (metadata or plate map) whole and only the geometry of each plate (store
metadata, file names and one image header, or HCS metadata), builds each model once (weights
read, no forward pass on data: :mod:`phenoica.workflow._model_checks`) and applies the checks
the embed stage applies.

The workflow calls :func:`check_screen_once` when it builds the DAG (``rules/common.smk``), so
that every such error stops ``snakemake`` (a dry run too) before the first job. A passed check
is recorded (``results/screen/validated.json``) under a key of everything it read (the config
keys, the tables' per-plate digests, the content keys of store metadata, checkpoints and the user's other files):
later invocations, and cluster jobs, check only the key. Why not a ``validate_screen`` job that
plate jobs depend on: Snakemake (9.27) skips the jobs downstream of a job it must rerun when
they depend on it through an ``ancient`` input, so a rerun of the check (a plate added) would
hide the new plate's jobs until the next invocation; without ``ancient``, every plate would rerun.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from phenoica.classify import lightgbm_names_record, use_lightgbm_names
from phenoica.contract import (
    BATCH,
    CONTROL,
    KEY_COLUMNS,
    PERT_TYPE,
    PLATE,
    PROFILE_COLUMNS,
    SITE,
    TILES,
    WELL,
    ConfigError,
    ScreenError,
    canonical,
    check_columns,
    component_problems,
    control_problems,
    duplicate_problems,
    formula_name_notes,
    listed_name_problems,
    name_problems,
    normalize_names,
    pert_type_problems,
    raise_problems,
    relation_problems,
    row_name,
    validate_screen_metadata,
)
from phenoica.screen import NO_CONTROLS, ExportSpec, export_notes, file_rows, parquet_source, row_number
from phenoica.utils import atomic_path, get_logger
from phenoica.workflow import _analysis as analysis
from phenoica.workflow import _digests as wdigests
from phenoica.workflow._door_reads import frozen_transform_problems, listed_features
from phenoica.workflow._geometry import plate_geometry
from phenoica.workflow._model_checks import check_models

#: How the door numbers a file's rows, said with every problem that names one.
ROWS_COUNTED = "rows are each file's own data rows, counted from 0 after its header line"
#: Raise when the checks change, so that screens recorded as valid are checked again.
CHECKS_VERSION = 6


def validate_screen(
    screen_cfg: Mapping[str, Any],
    plates: Mapping[str, str],
    models: Mapping[str, Mapping[str, Any]],
    crop_size: int | None = None,
    demo: Mapping[str, Any] | None = None,
    out: Path | str | None = None,
    log: logging.Logger | None = None,
) -> dict[str, Any]:
    """Check the whole screen (:func:`plate_geometry`) and every model against it
    (:func:`check_models`); raise one ScreenError listing every problem, else return (and
    write to ``out`` atomically, as JSON) the plates' geometry and the models' crops.

    ``screen_cfg``, ``models``, ``crop_size`` and ``demo`` are ``config["screen"]``,
    ``config["models"]``, ``config["embed"]["crop_size"]`` and ``config["demo"]``; ``plates``
    is {plate: batch} (:func:`phenoica.workflow.screen_plates`).
    """
    log = log or get_logger("phenoica.validate")
    if not plates:
        raise ScreenError("validate_screen: the screen has no plates")
    problems: list[str] = []
    geometry = plate_geometry(screen_cfg, plates, problems, demo)
    problems += dict.fromkeys(p for g in geometry.values() for p in listed_name_problems(g.channels, "a channel name"))
    summary = check_models(models, crop_size, geometry, problems, log) if geometry else {}
    raise_problems(f"screen ({screen_cfg['source']}, {len(plates)} plates)", problems)
    report = {
        "source": screen_cfg["source"],
        "plates": {p: asdict(g) for p, g in geometry.items()},
        "models": summary,
    }
    batches = sorted({g.batch for g in geometry.values()})
    log.info(
        "screen valid: %d plates in %d batches; model crop sizes %s",
        len(geometry),
        len(batches),
        {m: s["crop_size"] for m, s in summary.items()},
    )
    if out is not None:
        with atomic_path(out) as tmp:
            tmp.write_text(json.dumps(report, indent=1, sort_keys=True))
    return report


def _embedding_metadata(paths: list[str], spec: ExportSpec = ExportSpec()) -> pd.DataFrame:
    """The profile metadata columns (and well, site) of every embedding file (read through
    ``spec``: :mod:`phenoica.screen._exports`), one table, each row labelled ``{file} row {i}``
    (its 0-based data row in the file, the header not counted, whatever ``screen.rows`` and the
    empty wells dropped before it), names normalized, each file's row count in ``attrs["rows"]``."""
    wanted = (*PROFILE_COLUMNS, WELL, SITE)
    parts = []
    for path in paths:
        import pyarrow.parquet as pq

        names = pq.read_schema(parquet_source(path, spec)).names
        hint = "" if spec.is_identity else " (after screen.columns / screen.controls)"
        check_columns(names, PROFILE_COLUMNS, path + hint, "an embedding file needs")
        part = pq.read_table(parquet_source(path, spec), columns=[c for c in wanted if c in names]).to_pandas()
        numbers = file_rows(path, spec)
        part.index = [f"{path} row {row_number(numbers, i)}" for i in range(len(part))]
        parts.append(part)
    table = normalize_names(pd.concat(parts) if parts else pd.DataFrame(columns=list(wanted)))
    table.attrs["rows"] = {path: len(part) for path, part in zip(paths, parts)}
    return table


def empty_file_problems(table: pd.DataFrame) -> list[str]:
    """The embedding files of ``table`` (:func:`_embedding_metadata`) with no rows, named with
    counts and what the other files hold, so a batch that would vanish with its file is seen."""
    rows, batches = table.attrs["rows"], sorted(table[BATCH].astype(str).unique())
    empty = [p for p, n in rows.items() if n == 0]
    if not empty:
        return []
    held = f"{table[PLATE].nunique()} plate(s) in {len(batches)} batch(es) ({', '.join(batches[:10])})"
    return [
        f"{len(empty)} of {len(rows)} file(s) hold no rows: {', '.join(empty[:5])}{' ...' if len(empty) > 5 else ''}; "
        f"the other {len(rows) - len(empty)} file(s) hold {held}. An empty file is most often an export that "
        "failed: export it again, or leave it out of screen.embeddings"
    ]


def embedding_problems(
    config: Mapping[str, Any], log: logging.Logger
) -> tuple[list[str], dict[str, Any], dict[tuple[str, ...], pd.DataFrame]]:
    """Source embeddings, every model's files at once: the feature columns each set declares
    (:func:`phenoica.profiles._embeddings.plan_embeddings`), and the contract across files (missing values,
    PertTypes, a guide under one gene, a gene under one PertType, a plate in one batch, a well
    with one perturbation, each image once, names that are plain text), with the rows named by
    file and row; the notes on rows whose features are all 0 or all equal go in the summary
    (``notes`` of a model, which :func:`contract_problems` moves to its notes). Also returns the
    metadata read (:func:`_embedding_metadata`), by the files' tuple, so that it is read once."""
    from phenoica.profiles import FeatureSelection, constant_row_notes, normalize_problems, plan_files, planned_hygiene
    from phenoica.workflow import _dag as wf

    cfg = config["screen"]
    selection = FeatureSelection.from_config(cfg)
    spec = ExportSpec.from_config(cfg)
    problems: list[str] = []
    summary: dict[str, Any] = {}
    checked: dict[tuple[str, ...], pd.DataFrame] = {}
    for model in sorted(config["models"]):
        paths = tuple(wf.embedding_inputs(config, model))
        plan = plan_files(paths, cfg["embedding_column"], selection, spec)
        features = plan.files[0].features if plan.files else []
        hygiene = None if cfg["embedding_column"] else planned_hygiene(plan, config["profiles"])
        # a list column's length is read later; the hygiene's drops are known here unless it normalizes first
        n_features = None if cfg["embedding_column"] else len(hygiene.kept if hygiene is not None else features)
        summary[model] = {"files": len(paths), "features": n_features, "left_out": plan.left_out}
        if hygiene is not None:
            summary[model]["hygiene"] = {k: v for k, v in hygiene.as_dict().items() if k != "kept"}
        if plan.left_out:
            log.info(
                "model %s: %d numeric column(s) are not features: %s", model, len(plan.left_out), plan.left_out[:20]
            )
        few = hygiene.too_few(f"embeddings of model {model}", len(features)) if hygiene is not None else None
        problems += [few] if few else []
        if paths in checked:
            continue
        summary[model]["notes"] = (
            export_notes(paths, spec)
            + plan.notes
            + (hygiene.notes("profile hygiene, decided from the files' statistics") if hygiene is not None else [])
            + constant_row_notes(paths, cfg["embedding_column"], selection, spec=spec)
        )
        table = checked[paths] = _embedding_metadata(list(paths), spec)
        if spec.controls_column is not None and not table[PERT_TYPE].eq(CONTROL).any():
            said = [n for n in summary[model]["notes"] if f": {NO_CONTROLS}: " in n]
            problems.append(f"no file holds a control row: {'; '.join(said[:5])}")
        shown = f"{', '.join(paths[:2])}{' ...' if len(paths) > 2 else ''}"
        where = f"embeddings of model {model} ({len(paths)} file(s): {shown}; {ROWS_COUNTED})"
        required = [*PROFILE_COLUMNS, *([WELL] if WELL in table.columns else [])]
        found = [
            f"column {c} has missing values at {row_name(table.index[table[c].isna()][0])} "
            f"({int(table[c].isna().sum())} of {len(table)} rows)"
            for c in required
            if table[c].isna().any()
        ]
        raise_problems(where, found + empty_file_problems(table))
        found += pert_type_problems(table)
        keys = [PLATE, WELL, SITE] if SITE in table.columns else [PLATE, WELL]
        found += duplicate_problems(table, keys, "an image" if SITE in table.columns else "a well")
        found += relation_problems(table)
        found += name_problems(table, KEY_COLUMNS)
        found += control_problems(table)
        found += normalize_problems(table, config["profiles"]["normalize"])
        problems += [f"{where}: {p}" for p in found]
    return problems, summary, checked


def screen_table(config: Mapping[str, Any]) -> tuple[pd.DataFrame | None, str, list[str]]:
    """The table that describes the whole screen, its name and the notes on what it leaves
    out: the metadata (zarr, one row per image), the plate map (images / ome_zarr, one row per
    well; loaddata: its wells with LoadData sites,
    :func:`phenoica.screen.screen_wells`); None for the demo and for embeddings (read
    by :func:`embedding_problems`)."""
    from phenoica.screen import validate_plate_map
    from phenoica.workflow._dag import user_table

    cfg = config["screen"]
    if cfg["source"] == "zarr":
        table = validate_screen_metadata(user_table(cfg["metadata"]), str(cfg["metadata"]))
        return table, str(cfg["metadata"]), []
    if cfg["source"] in ("images", "ome_zarr", "loaddata"):
        table = validate_plate_map(user_table(cfg["plate_map"]), source=str(cfg["plate_map"]))
        if cfg["source"] != "loaddata":
            return table, str(cfg["plate_map"]), []
        from phenoica.screen import cached_table, csv_paths, screen_wells

        wells, notes = screen_wells(cached_table(tuple(csv_paths(cfg["loaddata"]))), table)
        return wells, str(cfg["plate_map"]), notes
    return None, "", []


def annotation_problems(config: Mapping[str, Any]) -> list[str]:
    """Each ``biomap.annotations`` file read as the biomap job reads it (a wrong separator, an
    encoding or a missing column found now, not after the embedding)."""
    from phenoica.screen import read_annotation

    if not config["biomap"]["enabled"]:
        return []
    problems = []
    for name, path in config["biomap"]["annotations"].items():
        try:
            read_annotation(path)
        except (ScreenError, ValueError, OSError) as exc:
            problems.append(f"biomap.annotations.{name}: {exc}")
    return problems


def contract_problems(
    config: Mapping[str, Any], plates: Mapping[str, str], log: logging.Logger
) -> tuple[list[str], list[str], dict[str, Any]]:
    """(problems, notes, summary) of the screen-wide contract, for every source: the user's
    table (or embedding files) against the contract and against the analysis it will get
    (:func:`phenoica.workflow._analysis.scoring_problems`), and the annotation files; plate names are checked when the
    plate list is read (:func:`phenoica.workflow.screen_plates`)."""
    problems: list[str] = []
    notes: list[str] = []
    summary: dict[str, Any] = {}
    readouts: list[dict[str, Any]] = []
    source = config["screen"]["source"]
    if source == "embeddings":
        problems, summary, read = embedding_problems(config, log)
        if not problems:
            from phenoica.workflow import _dag as wf

            model = sorted(config["models"])[0]
            paths = tuple(wf.embedding_inputs(config, model))
            table = (
                read[paths].copy()
                if paths in read
                else _embedding_metadata(list(paths), ExportSpec.from_config(config["screen"]))
            )
            found, notes, readouts = analysis.scoring_problems(table, config, f"embeddings of model {model}")
            problems += [f"embeddings of model {model}: {p}" for p in found]
            notes += [f"embeddings of model {m}: {n}" for m, s in summary.items() for n in s.pop("notes", [])]
            notes += [f"embeddings of model {model}: {n}" for n in formula_name_notes(table, KEY_COLUMNS)]
    elif source != "demo":
        table, name, notes = screen_table(config)
        if table is not None:
            found, reuse, readouts = analysis.scoring_problems(table, config, name)
            problems += [f"{name}: {p}" for p in found]
            notes += reuse + [f"{name}: {n}" for n in formula_name_notes(table, KEY_COLUMNS)]
    problems += annotation_problems(config)
    for note in notes:
        log.warning("%s", note)
    if readouts:
        summary = {**summary, "readouts": readouts}
    return problems, notes, summary


def settings_problems(config: Mapping[str, Any], models: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The settings the schema cannot check alone, against what the door found: every
    ``classify.lightgbm`` key LightGBM does not know, at once
    (:func:`phenoica.classify.lightgbm_params`), and ``transforms.n_components`` against
    each model's features (:func:`phenoica.contract.component_problems`; ``models`` is
    the door's summary per model, with ``features``; a list column's width is read from one row,
    :func:`phenoica.workflow._door_reads.listed_features`), and the frozen transforms' files
    (:func:`phenoica.workflow._door_reads.frozen_transform_problems`)."""
    from phenoica.classify import lightgbm_params

    problems = []
    try:
        lightgbm_params(config["classify"]["lightgbm"], config["seed"])
    except ValueError as exc:
        problems.append(str(exc))
    features = {m: int(s["features"]) for m, s in models.items() if s.get("features")}
    features.update(listed_features(config, {m: s.get("features") for m, s in models.items()}))  # list columns
    problems += component_problems(config["transforms"]["n_components"], features)
    return problems + frozen_transform_problems(config, features)


def screen_key(config: Mapping[str, Any], plates: Mapping[str, str], notes: Sequence[str] = ()) -> str:
    """SHA-256 of everything :func:`validate_screen` reads for this config: the screen, demo
    geometry, model and crop keys, the plates, the per-plate digests of the user's table, and
    the content key (:func:`phenoica.workflow.file_key`) of each store's and HCS plate's
    metadata, checkpoint, embedding file, frozen transform and annotation file. Cheap: no table is
    read beyond what building the DAG reads, a file's bytes only when something touched it."""
    from phenoica.workflow import _dag as wf

    cfg = config["screen"]
    source = cfg["source"]
    files: list[str] = [str(m["checkpoint"]) for m in config["models"].values() if m.get("checkpoint")]
    files += [str(p) for p in config["biomap"]["annotations"].values()]
    if source == "embeddings":
        files += sorted({f for m in config["models"] for f in wf.embedding_inputs(config, m)})
    frozen = config["transforms"]["frozen"]
    if frozen:  # read by the door (phenoica.workflow._door_reads)
        files += [
            str(Path(frozen) / m / f"{v}.npz") for m in config["models"] for v in config["transforms"]["variants"]
        ]
    digests: dict[str, str] = {}
    if source == "zarr":
        digests = wdigests.plate_digests(str(cfg["metadata"]))
        for plate in plates:
            store = Path(cfg["plates_dir"]) / f"{plate}.zarr"
            files += [str(store / "zarr.json"), str(store / TILES / "zarr.json")]
    elif source in ("images", "ome_zarr", "loaddata"):
        digests = wdigests.plate_digests(str(cfg["plate_map"]))
        if source == "loaddata":  # a changed LoadData CSV is checked again
            from phenoica.screen import csv_paths

            files += csv_paths(cfg["loaddata"])
        if source == "ome_zarr":
            for plate in plates:
                store = Path(cfg["ome_zarr_dir"]) / f"{plate}.zarr"
                files += [str(store / name) for name in ("zarr.json", ".zattrs", ".zgroup")]
    parts = {
        "checks": CHECKS_VERSION,
        # the screen's keys but the chunk length the ingest rules write their stores in (speed only)
        "screen": canonical({k: v for k, v in cfg.items() if k != "chunk_images"}),
        "demo": canonical({k: config["demo"][k] for k in ("image_size", "channels")}) if source == "demo" else None,
        "models": canonical(config["models"]),
        "crop_size": config["embed"]["crop_size"],
        "analysis": {
            "seed": config["seed"],
            "splits": canonical(config["splits"]),
            "n_null_guides": config["classify"]["n_null_guides"],
            "biomap": config["biomap"]["enabled"],
            "n_components": config["transforms"]["n_components"],
            "frozen": config["transforms"]["frozen"],
            "variants": list(config["transforms"]["variants"]),
            "lightgbm": canonical(config["classify"]["lightgbm"]),
            # what the readouts can score (phenoica.classify._capacity) reads these
            "readouts": canonical(
                {
                    **{k: config["classify"][k] for k in analysis.READOUT_KEYS},
                    "null_model": config["hits"]["null_model"],
                    "level": config["profiles"]["level"],
                }
            ),
            # the door's hygiene notes read these
            "hygiene": canonical({k: config["profiles"][k] for k in ("normalize", "outliers", "outlier_cutoff")}),
        },
        "notes": list(notes),
        "plates": dict(plates),
        "digests": digests,
        "files": {f: wdigests.file_key(f) for f in files},
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def check_screen_once(
    config: Mapping[str, Any],
    plates: Mapping[str, str],
    record: Path | str,
    log: logging.Logger | None = None,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """The door: the screen-wide contract (:func:`contract_problems`, every source) and, for a
    screen of plates, :func:`validate_screen` (geometry and models), for a validated workflow
    config, unless ``record`` says this very screen (same :func:`screen_key`) passed before.
    Raises ScreenError listing every problem; on success writes ``record`` (JSON: the key, the
    plates' geometry, the models' crops, the notes, which are logged again on every call).
    ``notes`` are the caller's (the config's: :func:`phenoica.contract.planned_demo_note`),
    logged and recorded with the door's own. The settings are checked against LightGBM and the
    models' feature counts (:func:`settings_problems`); LightGBM's reading of the
    ``classify.lightgbm`` keys is recorded and given back on every call
    (:func:`phenoica.classify.use_lightgbm_names`), so that the rules' params import no LightGBM."""
    log = log or logging.getLogger("phenoica.validate")
    key = screen_key(config, plates, notes)
    record = Path(record)
    try:
        known = json.loads(record.read_text())
    except (OSError, ValueError):
        known = {}
    if known.get("key") == key:
        for note in known.get("notes", []):
            log.warning("%s", note)
        use_lightgbm_names(known.get("lightgbm_names"))  # the rules' params import no LightGBM
        return known
    source = config["screen"]["source"]
    for note in notes:
        log.warning("%s", note)
    problems, found, summary = contract_problems(config, plates, log)
    raise_problems(f"screen ({source})", problems)
    readouts = summary.pop("readouts", [])
    if plates:
        report = validate_screen(
            config["screen"], plates, config["models"], config["embed"]["crop_size"], config["demo"], log=log
        )
    else:
        report = {"source": source, "plates": {}, "models": summary}
    settings = settings_problems(config, report["models"])
    if settings:
        raise ConfigError("invalid configuration:\n" + "\n".join(f"  {p}" for p in settings))
    # LightGBM's reading of classify.lightgbm, kept so that later calls need no LightGBM
    names = lightgbm_names_record(config["classify"]["lightgbm"])
    report = {"key": key, **report, "notes": [*notes, *found], "readouts": readouts, "lightgbm_names": names}
    with atomic_path(record) as tmp:
        tmp.write_text(json.dumps(report, indent=1, sort_keys=True))
    return report
