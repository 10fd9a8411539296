"""``POST /api/gemini/hooks`` without the CLI: Gemini's tool names (``run_shell_command``,
MCP tools by their ``mcp_context``) meet the same rules as Claude Code's, an identical call
sent again is another call, and a body hookgate cannot act on is a one-line refusal."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.claude_code.scene import TOKEN, coder
from tests.live_server import LiveServer, live_server

pytestmark = pytest.mark.both_databases


@pytest.fixture
def srv(database_url: str) -> Iterator[LiveServer]:
    deployment = coder(wait_s=0.3)
    deployment.database_url = database_url
    with live_server(deployment) as server:
        yield server


def before(tool: str, args: dict[str, Any], stamp: str = "2026-12-06T07:00:00.000Z",
           **extra: Any) -> dict[str, Any]:
    return {"hook_event_name": "BeforeTool", "session_id": "s-1", "cwd": "/work/repo",
            "transcript_path": "", "timestamp": stamp, "tool_name": tool,
            "tool_input": args, **extra}


def post(srv: LiveServer, body: Any) -> httpx.Response:
    return httpx.post(f"{srv.url}/api/gemini/hooks", params={"agent": "coder"}, json=body,
                      headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)


def requests(srv: LiveServer) -> list[dict[str, Any]]:
    return list(httpx.get(f"{srv.url}/api/confirmations",
                          headers={"Authorization": f"Bearer {TOKEN}"}).json())


def test_geminis_shell_call_meets_the_bash_rule_and_each_sending_is_its_own_call(
        srv: LiveServer) -> None:
    call = before("run_shell_command", {"command": "echo x >> a.log", "description": "d"})
    r = post(srv, call)
    assert r.status_code == 403 and "pending: repeat the identical call" in r.text, r.text
    [request] = requests(srv)
    payload = request["payload"]
    assert payload["tool_name"] == "Bash" and payload["args"]["command"] == "echo x >> a.log"
    assert request["run_id"].startswith("gemini-")
    # The identical call sent again (a new timestamp) is that call: the same request.
    again = post(srv, before("run_shell_command", call["tool_input"],
                             stamp="2026-12-06T07:00:09.000Z"))
    assert again.status_code == 403 and request["id"] in again.text
    assert len(requests(srv)) == 1


def test_an_mcp_tool_is_named_by_its_server_and_an_allow_is_an_empty_object(
        srv: LiveServer) -> None:
    mcp = {"server_name": "git", "tool_name": "status", "command": "git-mcp"}
    r = post(srv, before("status", {"repo": "."}, mcp_context=mcp))
    assert (r.status_code, r.text) == (200, "{}")
    done = dict(before("status", {"repo": "."}, mcp_context=mcp),
                hook_event_name="AfterTool", tool_response={"llmContent": "clean"})
    assert post(srv, done).text == "{}"
    rows = httpx.get(f"{srv.url}/api/audit", headers={"Authorization": f"Bearer {TOKEN}"}
                     ).json()["items"]
    assert [(row["tool_name"], row["outcome"]) for row in rows] == [("mcp__git__status", "ok")]


@pytest.mark.parametrize(("body", "words"), [
    ({"hook_event_name": "BeforeTool", "session_id": "s"}, "tool_name"),
    ({**before("ls", {}), "tool_input": "ls"}, "tool_input"),
    ({**before("status", {}), "mcp_context": {"server_name": "git"}}, "mcp_context"),
    ({"hook_event_name": "BeforeModel", "session_id": "s"}, "hook_event_name"),
    (["not", "an", "object"], "JSON object"),
])
def test_a_body_hookgate_cannot_act_on_is_refused_in_one_line(
        refusing: LiveServer, body: Any, words: str) -> None:
    r = post(refusing, body)
    assert r.status_code == 403 and words in r.text and "\n" not in r.text, r.text
