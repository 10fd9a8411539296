"""The PATH a test gives the programs it starts (a coding agent's CLI, a page's commands):
the directory of the Python running the tests first, so a bare ``hookgate`` in a hook's
command is the hookgate under test, whether or not its virtual environment is activated
(``.venv/bin/python -m pytest`` works as ``python -m pytest`` in an activated one)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def path_with_interpreter(path: str | None = None) -> str:
    """``path`` (the tests' own PATH by default) behind the interpreter's directory."""
    rest = os.environ.get("PATH", "/usr/bin:/bin") if path is None else path
    return os.pathsep.join([str(Path(sys.executable).parent), rest])
