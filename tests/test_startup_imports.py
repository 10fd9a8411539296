"""What starting hookgate loads: `import hookgate` and the CLI (every `--help`) leave the
heavy dependencies for the code that uses them (bench/throughput.py times them; this test
keeps an eager import from creeping back in)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("openai", "sqlalchemy", "fastapi", "uvicorn", "alembic", "httpx", "procrastinate",
         "hookgate.tools", "hookgate.storage", "hookgate.runtime",
         "hookgate.server")


def _loaded(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "import hookgate",
    # What `hookgate --help` runs before it prints: every command group registered.
    "import hookgate.cli.main",
], ids=["import-hookgate", "cli"])
def test_starting_loads_none_of_the_heavy_dependencies(code: str) -> None:
    loaded = _loaded(code)
    assert not sorted(m for m in loaded if any(m == h or m.startswith(h + ".")
                                               for h in HEAVY))


def test_help_prints_every_command_group() -> None:
    out = subprocess.run([sys.executable, "-m", "hookgate.cli.main", "--help"], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    assert "approvals" in out and "serve" in out
