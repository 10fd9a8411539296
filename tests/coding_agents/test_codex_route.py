"""``POST /api/codex/hooks`` and the forwarder command, without the CLI: Codex's tool names
meet the same ``Bash`` rules as Claude Code's, and everything the route cannot allow is a
non-2xx one-line reason that the installed command turns into exit 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate.coding_agents.codex_config import hook_url
from hookgate.coding_agents.forwarder import Accept, command
from tests.claude_code.scene import TOKEN
from tests.live_server import LiveServer

pytestmark = pytest.mark.both_databases


def pre(tool: str, args: dict[str, Any], call_id: str = "call_1",
        session: str = "s-1") -> dict[str, Any]:
    return {"hook_event_name": "PreToolUse", "session_id": session, "cwd": "/work/repo",
            "turn_id": "t-1", "model": "gpt-5-codex", "permission_mode": "bypassPermissions",
            "transcript_path": None, "tool_name": tool, "tool_input": args,
            "tool_use_id": call_id}


def post(srv: LiveServer, body: Any, token: str = TOKEN, agent: str = "coder",
         ) -> httpx.Response:
    return httpx.post(f"{srv.url}/api/codex/hooks", params={"agent": agent}, json=body,
                      headers={"Authorization": f"Bearer {token}"}, timeout=30)


@pytest.mark.parametrize(("tool", "args"), [
    ("Bash", {"command": "echo x >> a.log"}),
    ("exec_command", {"cmd": "echo x >> a.log"}),
    ("shell", {"command": ["sh", "-c", "echo x >> a.log"]}),
])
def test_every_shape_of_codexs_shell_call_meets_the_bash_rule(
        srv: LiveServer, tool: str, args: dict[str, Any]) -> None:
    r = post(srv, pre(tool, args))
    assert r.status_code == 403, r.text
    assert "pending: repeat the identical call after approval" in r.text
    assert "\n" not in r.text
    [request] = httpx.get(f"{srv.url}/api/confirmations",
                          headers={"Authorization": f"Bearer {TOKEN}"}).json()
    payload = request["payload"]
    assert payload["tool_name"] == "Bash" and ".log" in payload["args"]["command"]
    assert payload["args"].get("cmd") is None


def test_an_allow_is_exactly_an_empty_object_and_an_mcp_tool_keeps_its_name(
        srv: LiveServer) -> None:
    r = post(srv, pre("mcp__git__status", {"repo": "."}))
    assert (r.status_code, r.text) == (200, "{}")
    done = dict(pre("mcp__git__status", {"repo": "."}), hook_event_name="PostToolUse",
                tool_response="clean")
    for _ in range(2):  # the same report twice: one audit row
        assert post(srv, done).text == "{}"
    rows = httpx.get(f"{srv.url}/api/audit", headers={"Authorization": f"Bearer {TOKEN}"}
                     ).json()["items"]
    assert [(row["tool_name"], row["outcome"]) for row in rows] == [("mcp__git__status", "ok")]


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"hook_event_name": "PreToolUse", "session_id": "s"}, 403, "tool_name"),
    ({"hook_event_name": "Stop", "session_id": "s"}, 403, "hook_event_name"),
    (["not", "an", "object"], 403, "JSON object"),
])
def test_a_body_hookgate_cannot_act_on_is_refused_in_one_line(
        refusing: LiveServer, body: Any, status: int, words: str) -> None:
    r = post(refusing, body)
    assert r.status_code == status and words in r.text and "\n" not in r.text


def test_a_bad_token_or_another_orgs_agent_is_not_answered(refusing: LiveServer) -> None:
    assert post(refusing, pre("Bash", {"command": "ls"}), token="nope").status_code == 401
    assert post(refusing, pre("Bash", {"command": "ls"}), agent="ghost").status_code == 404


def _run(cmd: str, stdin: str, token: str = TOKEN) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", cmd], input=stdin, text=True, capture_output=True,
                          env={"PATH": "/usr/bin:/bin", "HOOKGATE_TOKEN": token},
                          timeout=60, check=False)


def test_the_forwarder_prints_nothing_on_allow_and_exits_2_on_anything_else(
        srv: LiveServer, tmp_path: Path) -> None:
    url = hook_url(srv.url, "coder")
    cmd = command(url, token_env="HOOKGATE_TOKEN", wait_s=0.3, accept=Accept.EMPTY)
    allowed = _run(cmd, json.dumps(pre("Bash", {"command": "ls"})))
    assert (allowed.returncode, allowed.stdout, allowed.stderr) == (0, "", "")
    gated = _run(cmd, json.dumps(pre("Bash", {"command": "echo >> b.log"}, call_id="c2")))
    assert gated.returncode == 2 and gated.stdout == ""
    assert gated.stderr.startswith("hookgate: approval ") and gated.stderr.count("\n") == 1
    bad_token = _run(cmd, json.dumps(pre("Bash", {"command": "ls"})), token="nope")
    assert bad_token.returncode == 2 and "HTTP 401" in bad_token.stderr
    # A SessionStart answer passes through as Codex's JSON (or nothing for {}).
    start = command(url, token_env="HOOKGATE_TOKEN", wait_s=0.3, accept=Accept.OBJECT)
    started = _run(start, json.dumps({"hook_event_name": "SessionStart", "session_id": "s9",
                                      "cwd": str(tmp_path), "source": "startup"}))
    assert (started.returncode, started.stdout) == (0, "")
