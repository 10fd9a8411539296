"""Running the ``hookgate`` command as a real subprocess, with a chosen environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def hookgate(*args: str, env: dict[str, str | None] | None = None
             ) -> subprocess.CompletedProcess[str]:
    """Run ``hookgate args...``; ``env`` entries override the environment (None unsets)."""
    environ = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    environ.update(COLUMNS="200", NO_COLOR="1",
                   PYTHONPATH=os.pathsep.join([str(REPO), environ.get("PYTHONPATH", "")]))
    for key, value in (env or {}).items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args],
                          capture_output=True, text=True, env=environ, cwd=REPO, timeout=120)
