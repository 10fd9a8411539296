"""``hookgate mcp stdio`` (the thin relay) sends ``HOOKGATE_ACTS_FOR`` as the
``Hookgate-Acts-For`` header: the gateway checks it before the relay serves anything, so a
person the service may not act for is refused in one line, and one it may act for is
not refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live_server import live_server
from tests.mcp_gateway.test_mcp_acts_for import BOT_TOKEN, _world

pytestmark = pytest.mark.both_databases
REPO_ROOT = Path(__file__).resolve().parents[2]


def relay(url: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HOOKGATE_")}
    environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p)
    environ.update(HOOKGATE_URL=url, HOOKGATE_TOKEN=BOT_TOKEN, **env)
    return subprocess.run(
        [sys.executable, "-m", "hookgate.cli.main", "mcp", "stdio", "--agent", "coder",
         "--connection", "http"],
        env=environ, cwd=cwd, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL)


def test_the_relay_sends_hookgate_acts_for(tmp_path: Path, database_url: str) -> None:
    world = _world(tmp_path, database_url)
    with live_server(world.deployment()) as srv:
        refused = relay(srv.url, tmp_path, HOOKGATE_ACTS_FOR="mallory")
        assert refused.returncode != 0
        assert "403" in refused.stderr and "not a user of org 'acme'" in refused.stderr, \
            refused.stderr
