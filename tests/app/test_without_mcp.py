"""The core installs and serves without the MCP SDK (SPEC §8: ``mcp`` is the extra
``hookgate[mcp]``): in processes where a meta-path finder refuses every ``mcp`` import,
``hookgate serve`` starts with ``mcp_servers`` declared, runs an agent, and answers ``/mcp``
with why there is no gateway; ``hookgate mcp stdio`` says in one line what to install."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.instances import ROOT, Instance

#: Installed in the child processes as their sitecustomize: the MCP SDK is "not installed",
#: and every refused import is written down, so the test knows the finder was there.
BLOCKER = """
import importlib.abc, os, sys

class NoMcp(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("mcp", "mcp_types"):
            with open(os.environ["REFUSED_LOG"], "a") as log:
                log.write(name + "\\n")
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoMcp())
"""

CONFIG = """\
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme, name: ACME}}]
users: [{{id: alice, org: acme, admin: true, token: t-alice}}]
models: {{script: {{type: scripted, turns: [{{answer: served without mcp}}]}}}}
agents: [{{id: a, name: A, org: acme, owner: alice, model: script}}]
mcp_servers:
  - id: clock
    command: {python}
    args: [-m, mcp_server_time]
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    home = tmp_path_factory.mktemp("no-mcp")
    (home / "blocker").mkdir()
    (home / "blocker" / "sitecustomize.py").write_text(BLOCKER)
    config = home / "hookgate.yaml"
    config.write_text(CONFIG.format(db=home / "hookgate.db", python=sys.executable))
    env = {"PYTHONPATH": str(home / "blocker"), "REFUSED_LOG": str(home / "refused.log")}
    return config, env


def test_hookgate_serve_runs_an_agent_and_says_why_there_is_no_gateway(
        world: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    config, env = world
    server = Instance("no-mcp", config, tmp_path, env=env)
    server.spawn()
    try:
        server.wait_up()
        auth = {"Authorization": "Bearer t-alice"}
        run = httpx.post(f"{server.url}/api/runs", headers=auth, timeout=10,
                         json={"agent_id": "a", "message": "hello"}).json()
        deadline = time.monotonic() + 60
        while (state := httpx.get(f"{server.url}/api/runs/{run['run_id']}", headers=auth,
                                  timeout=10).json())["status"] not in ("completed", "failed"):
            assert time.monotonic() < deadline, state
            time.sleep(0.05)
        gateway = httpx.post(f"{server.url}/mcp/a", headers=auth, timeout=10, json={})
    finally:
        server.stop()

    assert state["status"] == "completed" and state["answer"] == "served without mcp"
    assert gateway.status_code == 404
    assert "pip install 'hookgate[mcp]'" in gateway.json()["detail"]
    assert "mcp" in Path(env["REFUSED_LOG"]).read_text().split()  # the finder refused it
    assert "Traceback" not in server.log.read_text()


def test_hookgate_mcp_stdio_says_in_one_line_to_install_the_extra(
        world: tuple[Path, dict[str, str]]) -> None:
    config, env = world
    path = os.pathsep.join([env["PYTHONPATH"], str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "hookgate.cli.main", "mcp", "stdio", "--agent", "a",
         "--config", str(config)],
        env={**os.environ, **env, "PYTHONPATH": path, "HOOKGATE_TOKEN": "t-alice"},
        cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert done.returncode == 2
    said = done.stderr.strip()
    assert said.splitlines() == [
        "error: the MCP gateway needs the MCP SDK, which is not installed: "
        "pip install 'hookgate[mcp]'"], said
    assert done.stdout == ""
