"""The MCP gateway guide's "Try it", as a reader follows it: its configuration and client
written into an empty folder, `hookgate serve`, the client (the official `mcp` SDK) listing
the agent's tools and calling them through the gateway, the gated call approved with the
page's `hookgate approvals` commands, and both calls in `hookgate audit list`."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.docs.samples import DOCS, REPO, blocks
from tests.docs.test_framework_pages import TOKEN, one, script, shell
from tests.instances import Instance
from tests.interpreter_path import path_with_interpreter

PAGE = DOCS / "guides" / "mcp-gateway.md"
#: The MCP client's own token: a service identity's, acting for alice (who decides).
BOT_TOKEN = "dev-token-clock-bot"
SERVE = ("export ALICE_TOKEN=dev-token-alice CLOCK_BOT_TOKEN=dev-token-clock-bot\n"
         "hookgate serve --config hookgate.yaml --port 8000")


@pytest.mark.timeout(600)  # several real processes on a shared machine
def test_the_mcp_gateway_guide_runs_as_written(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    pytest.importorskip("mcp_server_time")
    page = blocks(PAGE)
    files = [b for b in page if b.file]
    assert [b.file for b in files] == ["hookgate.yaml", "client.py"]
    for block in files:
        (tmp_path / str(block.file)).write_text(block.code, encoding="utf-8")
    assert one(page, "pip install").code.startswith("pip install -e '.[mcp]' mcp-server-time")
    assert one(page, "hookgate serve").code.strip() == SERVE
    # `python` in the configuration is the environment's, as on the reader's PATH.
    path = path_with_interpreter(os.environ.get("PATH", ""))
    env = {**os.environ, "PATH": path, "ALICE_TOKEN": TOKEN, "COLUMNS": "120",
           "NO_COLOR": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    env.pop("HOOKGATE_URL", None)
    env.pop("HOOKGATE_TOKEN", None)
    server = Instance("serve", tmp_path / "hookgate.yaml", tmp_path,
                      env={"ALICE_TOKEN": TOKEN, "CLOCK_BOT_TOKEN": BOT_TOKEN, "PATH": path})
    server.spawn()
    try:
        server.wait_up()
        client = subprocess.Popen(script(one(page, "python client.py"), server.url),
                                  cwd=tmp_path, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        said: list[str] = []
        try:
            assert client.stdout is not None
            for line in client.stdout:
                said.append(line)
                if line.startswith("converting:"):
                    break
            transcript = "".join(said)
            assert "['mcp__time__convert_time', 'mcp__time__get_current_time']" in transcript
            assert "now:" in transcript and '"timezone": "UTC"' in transcript, transcript
            headers = {"Authorization": f"Bearer {TOKEN}"}
            deadline = time.monotonic() + 60
            pending: list[dict[str, object]] = []
            while not pending and time.monotonic() < deadline:
                pending = httpx.get(f"{server.url}/api/confirmations", headers=headers,
                                    params={"status": "pending"}, timeout=10).json()
                time.sleep(0.1)
            [request] = pending
            # The client's call acts for alice, who decides it with her own token (the
            # page's decide step exports it).
            assert request["requested_by"] == "alice", request
            assert "HOOKGATE_TOKEN" not in one(page, "python client.py").code
            env.update(HOOKGATE_URL=server.url)
            decided = shell(one(page, "hookgate approvals approve"), tmp_path, env,
                            server.url, REQUEST_ID=str(request["id"]))
            assert str(request["id"]) in decided, decided
            env.update(HOOKGATE_TOKEN=TOKEN)
            rest, _ = client.communicate(timeout=120)
            assert client.returncode == 0, transcript + rest
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()
        assert "converted:" in rest and "Asia/Tokyo" in rest, rest
        wide = {**env, "COLUMNS": "250"}  # a wide terminal: one row per line
        audit = shell(one(page, "hookgate audit list\n"), tmp_path, wide, server.url)
        assert "mcp__time__convert_time" in audit and "mcp__time__get_current_time" in audit
    finally:
        server.stop()
