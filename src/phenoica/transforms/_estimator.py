"""The estimator idiom of the variants' steps, without importing scikit-learn.

A step's hyper-parameters are its ``__init__`` arguments, stored under the same names
(:meth:`Estimator.get_params`, as scikit-learn's ``BaseEstimator.get_params`` lists them: sorted
by name); learned attributes end in ``_`` and are set by ``fit``; ``transform`` never refits.
Only the fits need scikit-learn or picard (FastICA, Picard-O), and they import it themselves, so
a saved transform is loaded and applied with numpy and scipy alone.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np


class NotFittedError(ValueError, AttributeError):
    """A step used before it was fitted (the same bases as scikit-learn's ``NotFittedError``)."""


class Estimator:
    """Base of the variants' steps: hyper-parameters read back from ``__init__``'s arguments."""

    @classmethod
    def param_names(cls) -> list[str]:
        """The names of the ``__init__`` arguments, sorted (the hyper-parameters)."""
        if cls.__init__ is object.__init__:
            return []
        signature = inspect.signature(cls.__init__)
        return sorted(p.name for p in signature.parameters.values() if p.name != "self")

    def get_params(self) -> dict[str, Any]:
        """Hyper-parameter name -> value, names sorted (what a saved transform records)."""
        return {name: getattr(self, name) for name in self.param_names()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{k}={v!r}" for k, v in self.get_params().items()) + ")"


class Transformer(Estimator):
    """A step with ``fit(X)`` and ``transform(X)`` (defined by each step): adds ``fit_transform``."""

    def fit_transform(self, X: Any, y: Any = None) -> np.ndarray:
        """Fit on ``X``, then transform the same rows."""
        return self.fit(X, y).transform(X)  # type: ignore[attr-defined]


def check_fitted(step: Estimator, attribute: str) -> None:
    """A :class:`NotFittedError` naming the step when it has no ``attribute`` (set by its fit)."""
    if not hasattr(step, attribute):
        raise NotFittedError(
            f"This {type(step).__name__} instance is not fitted yet. Call 'fit' with appropriate arguments "
            "before using this estimator."
        )
