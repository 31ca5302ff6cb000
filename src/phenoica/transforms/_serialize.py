"""Fitted transforms on disk: one ``.npz`` (arrays + a JSON description, no pickled code),
written atomically, with a human-readable ``.json`` sidecar beside it; loading needs only the
``.npz``.

A fitted step is stored as its class name (from a fixed registry), its ``__init__`` parameters
and its fitted attributes (those ending in ``_``): scalars in the JSON, arrays as ``.npz``
entries named ``{step}.{attribute}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from phenoica.transforms._estimator import Estimator
from phenoica.transforms._rotations import ICARotation, RandomRotation
from phenoica.transforms._scaling import CenterScale, CoralAlignment
from phenoica.transforms._whitening import PCAWhitener
from phenoica.utils import atomic_path

FORMAT = "phenoica.transform"
FORMAT_VERSION = 1
#: The step classes a saved transform may name (nothing else is ever instantiated on load).
STEP_CLASSES: dict[str, type[Estimator]] = {
    c.__name__: c for c in (CenterScale, PCAWhitener, ICARotation, RandomRotation, CoralAlignment)
}


def jsonable(value: Any) -> Any:
    """numpy scalars -> python; everything else as is."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def export_step(step: Estimator, name: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A fitted step as (JSON description, arrays): class, params, fitted scalars / arrays."""
    scalars: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for attr, value in vars(step).items():
        if not attr.endswith("_") or attr.startswith("_"):
            continue
        if isinstance(value, np.ndarray):
            if value.dtype.kind == "O":
                value = value.astype(str)
            arrays[f"{name}.{attr}"] = value
        else:
            scalars[attr] = jsonable(value)
    params = {k: jsonable(v) for k, v in step.get_params().items()}
    return {"class": type(step).__name__, "params": params, "fitted": scalars}, arrays


def restore_step(desc: Mapping[str, Any], name: str, arrays: Mapping[str, np.ndarray], source: str) -> Estimator:
    """Rebuild a fitted step from its JSON description and arrays (classes from :data:`STEP_CLASSES`)."""
    cls = STEP_CLASSES.get(desc.get("class", ""))
    if cls is None:
        raise ValueError(f"{source}: unknown transform step class {desc.get('class')!r} for step {name!r}")
    step = cls(**desc["params"])
    for attr, value in desc["fitted"].items():
        setattr(step, attr, value)
    prefix = f"{name}."
    for key, value in arrays.items():
        if key.startswith(prefix):
            setattr(step, key[len(prefix) :], value)
    return step


def write_transform(path: Path | str, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Path:
    """Write ``path`` (.npz: arrays + ``meta`` as JSON, stamped with the format) and a ``.json``
    sidecar, atomically."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"{path}: a transform is saved as a .npz file")
    text = json.dumps({"format": FORMAT, "version": FORMAT_VERSION, **meta}, indent=2, default=jsonable)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, __meta__=np.array(text), **arrays)
    with atomic_path(path.with_suffix(".json")) as tmp:
        tmp.write_text(text + "\n")
    return path


def read_transform(path: Path | str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(JSON description, arrays) of a transform written by :func:`write_transform`; errors
    name the file and what was expected."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: fitted transform not found")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError) as exc:  # EOFError: an empty or truncated file
        raise ValueError(f"{path}: not a readable transform .npz ({exc or type(exc).__name__})") from None
    if "__meta__" not in arrays:
        raise ValueError(f"{path}: not a phenoica transform (no __meta__ entry)")
    meta = json.loads(str(arrays.pop("__meta__")))
    if meta.get("format") != FORMAT or meta.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"{path}: format {meta.get('format')!r} version {meta.get('version')!r}; "
            f"expected {FORMAT!r} version {FORMAT_VERSION}"
        )
    return meta, arrays
