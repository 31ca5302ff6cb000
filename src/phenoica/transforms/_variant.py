"""One fitted variant: optional center-scale, optional whitening, optional rotation, saved and loaded."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from phenoica.contract import check_matrix
from phenoica.transforms._rotations import ICARotation, RandomRotation
from phenoica.transforms._scaling import CenterScale, CoralAlignment, check_batches
from phenoica.transforms._serialize import export_step, read_transform, restore_step, write_transform
from phenoica.transforms._variant_names import component_name
from phenoica.transforms._whitening import PCAWhitener

STEPS: tuple[str, ...] = ("center_scale", "whitener", "rotation", "alignment")


@dataclass
class VariantTransform:
    """One fitted variant: optional center-scale, optional whitening, optional rotation.

    ``transform(X, batches, is_control)`` applies the steps in order (batches / is_control
    are needed only when center-scale is part of the variant; is_control only for batches
    unseen at fit). ``fit_report`` describes the fit for the report.
    """

    variant: str
    feature_names_in: list[str]
    center_scale: CenterScale | None = None
    whitener: PCAWhitener | None = None
    rotation: ICARotation | RandomRotation | None = None
    fit_report: dict[str, Any] = field(default_factory=dict)
    alignment: CoralAlignment | None = None

    @property
    def feature_names_out(self) -> list[str]:
        """``emb_*`` names for base; ``comp_0000 ...`` for whitened variants."""
        if self.whitener is None:
            return list(self.feature_names_in)
        return [component_name(i) for i in range(self.whitener.n_components_)]

    def with_center_scale(self, center_scale: CenterScale) -> "VariantTransform":
        """A copy with another center-scale step (one that also knows batches unseen at fit,
        :meth:`CenterScale.with_batches`); ``self`` is left as it is."""
        return dataclasses.replace(self, center_scale=center_scale)

    def with_alignment(self, alignment: CoralAlignment) -> "VariantTransform":
        """A copy with another per-batch alignment (one that also knows batches unseen at fit)."""
        return dataclasses.replace(self, alignment=alignment)

    def transform(self, X: Any, batches: Any = None, is_control: Any = None) -> np.ndarray:
        """Apply the fitted steps to rows ``X`` (n x features_in) -> (n x features_out)."""
        names = self.feature_names_in
        X = check_matrix(X, f"variant {self.variant} X", len(names), names)
        if self.center_scale is not None:
            if batches is None:
                raise ValueError(f"variant {self.variant}: center-scale needs the batch of every row")
            X = self.center_scale.transform(X, check_batches(batches, X.shape[0]), is_control, names)
        if self.whitener is not None:
            X = self.whitener.transform(X)
        if self.rotation is not None:
            X = self.rotation.transform(X)
        if self.alignment is not None:
            if batches is None:
                raise ValueError(f"variant {self.variant}: the per-batch alignment needs the batch of every row")
            X = self.alignment.transform(X, batches)
        return X

    def save(self, path: Path | str) -> Path:
        """Write ``path`` (.npz: arrays + JSON description) and a ``.json`` sidecar, atomically."""
        meta: dict[str, Any] = {
            "variant": self.variant,
            "feature_names_in": list(self.feature_names_in),
            "feature_names_out": self.feature_names_out,
            "steps": {},
            "fit_report": self.fit_report,
        }
        arrays: dict[str, np.ndarray] = {}
        for name in STEPS:
            step = getattr(self, name)
            if step is not None:
                meta["steps"][name], step_arrays = export_step(step, name)
                arrays.update(step_arrays)
        return write_transform(path, meta, arrays)

    @classmethod
    def load(cls, path: Path | str) -> "VariantTransform":
        """Read a transform written by :meth:`save` (the .npz alone; no pickle)."""
        meta, arrays = read_transform(path)
        steps = {name: restore_step(desc, name, arrays, str(path)) for name, desc in meta["steps"].items()}
        return cls(
            variant=meta["variant"],
            feature_names_in=list(meta["feature_names_in"]),
            center_scale=steps.get("center_scale"),  # type: ignore[arg-type]
            whitener=steps.get("whitener"),  # type: ignore[arg-type]
            rotation=steps.get("rotation"),  # type: ignore[arg-type]
            fit_report=meta.get("fit_report", {}),
            alignment=steps.get("alignment"),  # type: ignore[arg-type]
        )


def load_transform(path: Path | str) -> VariantTransform:
    """Read a fitted variant transform (.npz)."""
    return VariantTransform.load(path)
