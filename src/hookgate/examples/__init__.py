"""Bundled examples: configuration files and the tools they import, ready to run.

``hookgate run --example purchasing --agent buyer "buy"`` runs one; `example_path` gives
the file, to copy and edit.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def available_examples() -> list[str]:
    """The names ``--example`` accepts (the bundled ``*.yaml`` files)."""
    return sorted(
        entry.name.removesuffix(".yaml")
        for entry in files(__name__).iterdir()
        if entry.name.endswith(".yaml")
    )


def example_path(name: str) -> Path:
    """The bundled configuration file called ``name`` (e.g. ``purchasing``)."""
    known = available_examples()
    if name not in known:
        raise LookupError(f"no bundled example '{name}' (examples: {', '.join(known)})")
    return Path(str(files(__name__).joinpath(f"{name}.yaml")))


__all__ = ["available_examples", "example_path"]
