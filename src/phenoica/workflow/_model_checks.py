"""Each model against each plate, checked when the DAG is built, as the embed stage will check it:
the channels a plate feeds a model, the count the model takes, and the crop against the image
size (:func:`check_models`, called by :func:`phenoica.workflow._validate.validate_screen`).

phenoica's own ViT without a checkpoint is read from its spec (:func:`phenoica.models.declared_model`:
no torch); any other model is built once per channel count (weights read, no forward pass on data).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

from phenoica.contract import ConfigError, ScreenError
from phenoica.models import DeclaredViT, ModelInputs, check_fit, declared_model, rejected_crops, screen_subject
from phenoica.workflow._geometry import PlateGeometry


def _fed_channels(spec: Mapping[str, Any], geometry: PlateGeometry) -> tuple[list[str], list[str]]:
    """(the channels a plate feeds the model, the names of ``models.NAME.channels`` it lacks):
    ``models.NAME.channels`` when set, else every channel of the plate."""
    chosen = spec.get("channels")
    if not chosen:
        return list(geometry.channels), []
    return list(chosen), [c for c in chosen if c not in geometry.channels]


def _grouped(failed: Mapping[str, list[str]]) -> list[str]:
    """One problem per kind, naming its plates (five, then a count)."""
    out = []
    for why, plates in failed.items():
        more = f" and {len(plates) - 5} more" if len(plates) > 5 else ""
        out.append(f"plate(s) {plates[:5]}{more}: {why}")
    return out


def _build(spec: Mapping[str, Any], n_chans: int, log: logging.Logger) -> tuple[Any, ModelInputs]:
    """(model, its inputs) of a model entry for ``n_chans`` channels: declared by its spec when it
    is phenoica's own ViT without a checkpoint (:func:`phenoica.models.declared_model`: no torch),
    else built (weights read; torch and timm imported)."""
    declared = declared_model(spec, n_chans)
    if declared is not None:
        return declared, declared.inputs
    from phenoica.models import build_feature_extractor, module_inputs

    built = build_feature_extractor(spec, n_chans, spec.get("checkpoint"), log=log)
    return built, module_inputs(built)


def _features(model: Any, inputs: ModelInputs, n_chans: int, crop: int, where: str) -> int:
    """Features per crop of ``n_chans`` channels of side ``crop``; ScreenError naming ``where``
    when the model rejects such crops (a declared model answers from its spec)."""
    if isinstance(model, DeclaredViT):
        shape = (1, n_chans, crop, crop)
        try:
            model.check(shape)
        except ScreenError as exc:
            raise rejected_crops(where, shape, exc) from exc
        return model.output_dim(n_chans)
    import torch

    from phenoica.models import probe_feature_dim

    return probe_feature_dim(model, inputs, n_chans, crop, torch.device("cpu"), Path(where))


def check_models(
    models: Mapping[str, Mapping[str, Any]],
    crop_size: int | None,
    geometry: Mapping[str, PlateGeometry],
    problems: list[str],
    log: logging.Logger | None = None,
) -> dict[str, dict[str, Any]]:
    """Each model against each plate, as the embed stage will check it: the channels it is fed
    (``models.NAME.channels`` present; the count the model takes; one count for a model trained
    on the screen unless its channel projection is shared), and the crop (``embed.crop_size``,
    else the model's ``img_size``) against the image size. Each model once per channel count:
    phenoica's own ViT without a checkpoint is read from its spec (no torch); any other is built
    (a checkpoint's weights are loaded strictly, so a checkpoint that does not fit the spec fails
    here too). ``models`` is ``config["models"]``, ``crop_size`` ``embed.crop_size``.
    Problems are appended to ``problems``; returns a summary per model."""
    log = log or logging.getLogger("phenoica.validate")
    summary: dict[str, dict[str, Any]] = {}
    for name, spec in models.items():
        fed: dict[str, list[str]] = {}
        absent: dict[str, list[str]] = {}
        for plate, geo in geometry.items():
            channels, missing = _fed_channels(spec, geo)
            if missing:
                why = f"channel(s) {missing} named by config key models.{name}.channels are not in the plate's channels {geo.channels}"
                absent.setdefault(why, []).append(plate)
            else:
                fed[plate] = channels
        problems += _grouped(absent)
        checkpoint = spec.get("checkpoint")
        if checkpoint and Path(checkpoint).is_dir():
            problems.append(
                f"model {name}: checkpoint {checkpoint!r} (config key models.{name}.checkpoint) is a folder; "
                "expected a weights file (safetensors or a torch checkpoint)"
            )
            continue
        if spec.get("timm_name"):  # a name timm does not know, said by its config key
            from phenoica.models import check_timm_name

            try:
                check_timm_name(spec["timm_name"], key=f"models.{name}.timm_name")
            except ConfigError as exc:
                problems.append(str(exc))
                continue
        built: dict[int, Any] = {}
        inputs: dict[int, ModelInputs] = {}
        for n in sorted({len(c) for c in fed.values()}):
            try:
                built[n], inputs[n] = _build(spec, n, log)
            except ValueError as exc:  # ScreenError, CheckpointError, a spec building rejects
                plates = [p for p, c in fed.items() if len(c) == n]
                problems.append(f"model {name} for the {n} channel(s) of plate(s) {plates[:5]}: {exc}")
        trained = not spec.get("checkpoint")
        counts = {p: len(c) for p, c in fed.items()}
        if trained and len(set(counts.values())) > 1 and any(i.in_chans is not None for i in inputs.values()):
            problems.append(
                f"model {name} is trained on the screen, but its plates feed different channel counts "
                f"{dict(list(counts.items())[:8])}; name the channels every plate has in models.{name}.channels, "
                "or use channel_agnostic: true"
            )
        crops: dict[str, int] = {}
        dims: dict[str, int] = {}  # features per profile, per plate
        failed: dict[str, list[str]] = {}  # one line per kind of problem, naming its plates
        for plate, channels in fed.items():
            model = built.get(len(channels))
            if model is None:
                continue
            geo = geometry[plate]
            crop = crops[plate] = int(crop_size or model.img_size)
            misfit = check_fit(inputs[len(channels)], (geo.height, geo.width), crop, channels)
            if misfit is not None:
                why = misfit.screen_message(name)
            else:
                try:
                    dims[plate] = _features(model, inputs[len(channels)], len(channels), crop, f"model {name}")
                    continue
                except ScreenError as exc:
                    why = f"{screen_subject((geo.height, geo.width), channels)}: {exc}"
            failed.setdefault(why, []).append(plate)
        problems += _grouped(failed)
        summary[name] = {
            "checkpoint": spec.get("checkpoint"),
            "crop_size": sorted(set(crops.values())),
            "channels_fed": sorted(set(counts.values())),
            "features": min(dims.values(), default=None),
        }
    return summary
