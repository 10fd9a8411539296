"""The agent's SessionStart hooks for Claude Code sessions. The real CLI sends SessionStart
only to command hooks, so ``hookgate claude-code install`` writes ``hookgate claude-code
forward URL`` for it: the context a hook adds reaches Claude Code's model, and a hook that
fails closed stops the session — hookgate refuses its prompts and tool calls, because the
CLI itself goes on after a SessionStart ``continue: false`` in a headless run."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.claude_code.scene import TOKEN, run_lines, scene
from tests.fakes.anthropic import Text, ToolUse, sequence
from tests.fakes.slack import FakeSlack

CONTEXT = {"event": "SessionStart", "name": "freeze_notice",
           "command": "cat > /dev/null; echo 'Deploys are frozen today (ZEBRA-17).'"}
BROKEN = {"event": "SessionStart", "name": "policy_loader",
          "command": "cat > /dev/null; echo 'policy file missing' >&2; exit 1"}


def _settings(project: Path) -> dict:
    data: dict = json.loads((project / ".claude" / "settings.json").read_text())
    return data


def test_session_start_context_reaches_claude_codes_model(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    script = sequence(ToolUse("Bash", {"command": "echo ran >> ran.txt"}), Text("done"))
    with scene(tmp_path, database_url, slack, script, extra_hooks=[CONTEXT]) as s:
        handler = _settings(s.cli.project)["hooks"]["SessionStart"][0]["hooks"][0]
        assert handler["type"] == "command"
        assert handler["command"].startswith("hookgate claude-code forward ")
        result = s.prompt()
        assert result.returncode == 0, result.stderr
        first = json.dumps(s.api.requests[0])
        assert "ZEBRA-17" in first  # the agent's hook, run by hookgate, seen by the model
        assert run_lines(s.cli.project / "ran.txt") == ["ran"]


def test_a_session_start_hook_failing_closed_stops_the_session(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    script = sequence(ToolUse("Bash", {"command": "echo ran >> ran.txt"}), Text("done"))
    with scene(tmp_path, database_url, slack, script, extra_hooks=[BROKEN]) as s:
        result = s.prompt()
        assert s.api.requests == [], "the model was asked although the session was stopped"
        assert not (s.cli.project / "ran.txt").exists()
        assert "policy_loader" in result.stdout + result.stderr, (result.stdout, result.stderr)
        # A tool call of the same session asked directly is refused as well.
        assert json.loads(result.stdout)["result"].startswith("Operation stopped by hook")
        session = json.loads(result.stdout)["session_id"]
        r = httpx.post(
            f"{s.srv.url}/api/claude-code/hooks", params={"agent": "coder"},
            headers={"Authorization": f"Bearer {TOKEN}"},
            json={"hook_event_name": "PreToolUse", "session_id": session,
                  "tool_name": "Bash", "tool_input": {"command": "true"},
                  "tool_use_id": "toolu_1", "cwd": str(s.cli.project)})
        answer = r.json()
        assert answer["hookSpecificOutput"]["permissionDecision"] == "deny", answer
        assert answer["continue"] is False and "policy_loader" in answer["stopReason"]


def _forward(url: str, body: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", "claude-code",
                           "forward", url, "--timeout", "5"], input=body, text=True,
                          capture_output=True, env=env, timeout=60)


def test_forward_fails_with_the_reason_when_hookgate_cannot_answer(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api/claude-code/hooks?agent=coder"
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    body = json.dumps({"hook_event_name": "SessionStart", "session_id": "s"})
    done = _forward(url, body, base)
    assert done.returncode == 1 and "HOOKGATE_TOKEN is not set" in done.stderr, done.stderr
    done = _forward(url, body, {**base, "HOOKGATE_TOKEN": "t"})
    assert done.returncode == 1 and "could not be reached" in done.stderr, done.stderr
    assert done.stdout == ""
    done = _forward(url, "not json", {**base, "HOOKGATE_TOKEN": "t"})
    assert done.returncode == 1 and "not JSON" in done.stderr, done.stderr
