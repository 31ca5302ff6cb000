"""The packages of the library and their faces, read from the source (nothing is imported)."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from tests.conftest import REPO

SRC = REPO / "src"


@cache
def packages() -> dict[str, Path]:
    """Dotted name -> folder of every package of the library (``phenoica.screen.demo`` included)."""
    return {".".join(init.parent.relative_to(SRC).parts): init.parent for init in SRC.rglob("__init__.py")}


def package_of(dotted: str) -> str | None:
    """The innermost package holding module ``dotted`` (the module itself when it is a package)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        if ".".join(parts[:cut]) in packages():
            return ".".join(parts[:cut])
    return None


def face_call(init: Path) -> ast.Call | None:
    """The ``lazy_face(__name__, {...})`` call that a package's ``__init__.py`` assigns to
    ``__all__, __getattr__, __dir__``; None when the package has no face."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            names = [getattr(t, "id", None) for t in node.targets[0].elts]
            if names == ["__all__", "__getattr__", "__dir__"] and isinstance(node.value, ast.Call):
                return node.value
    return None


@cache
def face(package: str) -> dict[str, str]:
    """Public name -> the dotted module that defines it, for ``package`` (empty without a face)."""
    call = face_call(packages()[package] / "__init__.py")
    if call is None:
        return {}
    modules: dict[str, list[str]] = ast.literal_eval(call.args[1])
    return {name: f"{package}.{module}" for module, names in modules.items() for name in names}
