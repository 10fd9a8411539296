"""``hookgate.client`` is what framework adapters import: it loads with httpx alone, none of
the server's dependencies (database drivers, the web framework, the MCP SDK)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def test_the_client_loads_none_of_the_servers_dependencies() -> None:
    code = ("import sys, hookgate.client; print(sorted(m for m in ('sqlalchemy', 'fastapi', "
            "'uvicorn', 'asyncpg', 'aiosqlite', 'procrastinate', 'mcp', 'openai') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(SRC)}, check=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
