"""The type stub (``__init__.pyi``) beside each package's ``__init__.py``: its face, written as
plain re-exports so that type checkers and editors see every public name, its type and where it
is defined, and flag a name the face does not show.

A face is built at run time by :func:`phenoica.utils.lazy_face` (PEP 562), which a static reader
cannot follow. Its one list, ``{module: names}`` in ``__init__.py``, is read here (parsed, not
imported) and written out as ``from .module import name as name`` lines and ``__all__``. Run

    python -m phenoica.utils.face_stubs            # rewrite every stub that differs
    python -m phenoica.utils.face_stubs --check    # list the stale stubs, exit 1 if any

after a face changes; a test keeps every checked-in stub equal to what this writes.
"""

from __future__ import annotations

import argparse
import ast
import os
from pathlib import Path

#: The folder of the ``phenoica`` package: every ``__init__.py`` under it with a face gets a stub.
ROOT = Path(__file__).resolve().parents[1]

#: The stub's first lines, before its imports.
HEADER = (
    "# The face of {package} for type checkers and editors: its __init__.py's lazy_face list as\n"
    "# plain re-exports. Written by `python -m phenoica.utils.face_stubs`; do not edit by hand.\n"
)


def face_modules(init: Path) -> dict[str, list[str]] | None:
    """The face of package ``init`` (its ``__init__.py``): ``{module: names}``, the literal passed
    to ``lazy_face(__name__, ...)`` assigned to ``__all__, __getattr__, __dir__``; None when the
    file has no such assignment (a package without a face)."""
    for node in ast.parse(init.read_text(), str(init)).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple)):
            continue
        names = [getattr(t, "id", None) for t in node.targets[0].elts]
        call = node.value
        if names == ["__all__", "__getattr__", "__dir__"] and isinstance(call, ast.Call) and len(call.args) == 2:
            return ast.literal_eval(call.args[1])
    return None


def _import_order(name: str) -> tuple[int, str]:
    """Where ``name`` goes among the names of one import, as the import sorter (ruff's isort,
    ordered by type) puts it: constants, then classes, then the rest."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, name.lower()


def face_stub(package: str, modules: dict[str, list[str]]) -> str:
    """The text of package ``package``'s stub, whose face is ``modules`` (module -> names)."""
    lines = [HEADER.format(package=package)]
    for module in sorted(modules):
        names = sorted(modules[module], key=_import_order)
        lines += [f"from .{module} import {name} as {name}\n" for name in names]
    shown = sorted((n for names in modules.values() for n in names), key=str.lower)
    lines.append("\n__all__ = [\n" + "".join(f'    "{n}",\n' for n in shown) + "]\n")
    return "".join(lines)


def face_stubs(root: Path = ROOT) -> dict[Path, str]:
    """Stub path -> its text, for every package under ``root`` (the ``phenoica`` folder) with a face."""
    out = {}
    for init in sorted(root.rglob("__init__.py")):
        modules = face_modules(init)
        if modules is not None:
            package = ".".join(init.parent.relative_to(root.parent).parts)
            out[init.with_suffix(".pyi")] = face_stub(package, modules)
    return out


def stale_stubs(root: Path = ROOT) -> list[Path]:
    """The stubs under ``root`` that are missing or differ from their face, and the stubs left
    beside a package that has no face any more."""
    wanted = face_stubs(root)
    stale = [path for path, text in wanted.items() if not path.is_file() or path.read_text() != text]
    orphans = [p for p in root.rglob("__init__.pyi") if p not in wanted and "face_stubs" in p.read_text()]
    return sorted(stale + orphans)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list the stale stubs and exit 1 if any, writing none")
    args = parser.parse_args(argv)
    stale = stale_stubs(ROOT)
    if args.check:
        print("\n".join(str(p) for p in stale) or "every stub is current")
        return 1 if stale else 0
    wanted = face_stubs(ROOT)
    for path in stale:
        if path in wanted:
            part = path.with_name(path.name + ".part")
            part.write_text(wanted[path])
            os.replace(part, path)
        else:
            path.unlink()
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
