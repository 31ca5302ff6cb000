"""A package's face: the names it makes public, each loaded from its private module on first use.

Every package of phenoica states its public names once, by the module that defines them, in its
``__init__.py``::

    __all__, __getattr__, __dir__ = lazy_face(__name__, {"_engine": ["classify_guides"]})

``from phenoica.classify import classify_guides`` then imports ``phenoica.classify._engine``
alone (PEP 562), so a job that needs the options of a stage never imports the stage's heavy
libraries (torch, LightGBM, plotly) through its face. Every package imports this module, so it
imports only the import machinery (not even ``typing``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence


def lazy_face(
    package: str, modules: Mapping[str, Sequence[str]]
) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` of package ``package`` whose public names are
    ``modules`` (module of the package -> the names it defines); a name is read from its module
    each time it is imported, the module imported the first time. Nothing is copied onto the
    package, so the face always shows what the module holds (a test may patch the module)."""
    home = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> object:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home[name]}"), name)

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(home))

    return list(home), __getattr__, __dir__
