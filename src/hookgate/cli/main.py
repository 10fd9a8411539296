"""The ``hookgate`` command. Each command group is a module that registers onto ``app``;
adding one is one import line here.
"""

from __future__ import annotations

from hookgate.cli import check_cmd, hooks_cmd, run_cmd  # noqa: F401  (they register commands)
from hookgate.cli.app import app

__all__ = ["app"]

if __name__ == "__main__":
    app()
