"""Claude Code tool input that RFC 8785 cannot pin (a lone surrogate, an integer past 2**53)
on a call that needs approval: the hook endpoint denies it (never a 500, never an allow),
on PreToolUse and on PermissionRequest."""

from __future__ import annotations

import httpx
import pytest

from tests.adversarial_tally import TALLY
from tests.claude_code.scene import TOKEN
from tests.claude_code.test_hook_endpoint import SESSION, srv
from tests.live_server import LiveServer

__all__ = ["srv"]

#: Raw JSON texts of Write inputs outside the project (the rule asks a person for those).
UNPINNABLE = {
    "lone surrogate": '{"file_path": "/etc/x\\ud800", "content": "x"}',
    "integer past 2**53": '{"file_path": "/etc/x", "content": "x", "n": 1152921504606846976}',
}


def raw_hook(srv: LiveServer, event: str, tool_input: str, call_id: str) -> httpx.Response:
    use_id = f', "tool_use_id": "{call_id}"' if event == "PreToolUse" else ""
    body = (f'{{"hook_event_name": "{event}", "session_id": "{SESSION}", '
            f'"cwd": "/work/project", "permission_mode": "default", "tool_name": "Write", '
            f'"tool_input": {tool_input}{use_id}, "transcript_path": "/tmp/t.jsonl"}}')
    return httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "coder"},
                      headers={"Authorization": f"Bearer {TOKEN}",
                               "Content-Type": "application/json"},
                      content=body.encode(), timeout=30)


@pytest.mark.parametrize("event", ["PreToolUse", "PermissionRequest"])
@pytest.mark.parametrize("name", list(UNPINNABLE))
def test_input_that_cannot_be_pinned_is_refused_not_allowed(
        srv: LiveServer, event: str, name: str) -> None:
    r = raw_hook(srv, event, UNPINNABLE[name], f"t-{event}-{len(name)}")
    assert r.status_code == 200, r.text
    specific = r.json()["hookSpecificOutput"]
    said = (specific.get("permissionDecision") if event == "PreToolUse"
            else specific["decision"]["behavior"])
    TALLY.record(f"Claude Code {event} with {name}", said != "deny")
    assert said == "deny", r.text
