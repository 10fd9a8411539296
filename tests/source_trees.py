"""The syntax trees of src/hookgate, parsed once per process and only when a test asks
(the structural tests scan them): parsed at import, every xdist worker's collection spent
~1.6 CPU-s per scanning module on them, whether or not it ran one of their tests."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "hookgate"


@functools.cache
def module_names() -> tuple[str, ...]:
    """Every module of the package, as ``engines/driver.py``, sorted."""
    return tuple(p.relative_to(PACKAGE).as_posix() for p in sorted(PACKAGE.rglob("*.py"))
                 if "__pycache__" not in p.parts)


@functools.cache
def source_trees() -> dict[str, ast.Module]:
    """Each module's syntax tree, by its name in `module_names` (shared: do not change)."""
    return {name: ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
            for name in module_names()}
