"""What the Claude Code guide says of SessionStart and http hooks, checked on the pinned CLI:
it sends SessionStart to a ``type: command`` hook but never to a ``type: http`` one, while
UserPromptSubmit and PreToolUse do reach an http hook (such as hookgate's endpoint)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.claude_cli import ClaudeRun
from tests.fakes.anthropic import FakeAnthropic, Text, ToolUse, sequence
from tests.fakes.server import LoopbackServer


def test_claude_code_sends_session_start_to_command_hooks_only(tmp_path: Path) -> None:
    events: list[str] = []

    async def hook(request: Request) -> JSONResponse:
        events.append(str((await request.json()).get("hook_event_name")))
        return JSONResponse({})

    recorder = LoopbackServer(Starlette(routes=[Route("/hook", hook, methods=["POST"])]))
    url = recorder.start() + "/hook"
    started = tmp_path / "session-started.txt"

    def http() -> list[dict[str, Any]]:
        return [{"hooks": [{"type": "http", "url": url, "timeout": 30}]}]

    settings = {"hooks": {
        "SessionStart": [*http(), {"hooks": [
            {"type": "command", "command": f"cat > /dev/null; echo started > {started}"}]}],
        "UserPromptSubmit": http(),
        "PreToolUse": [{"matcher": "Bash", "hooks": http()[0]["hooks"]}],
    }}
    try:
        with FakeAnthropic(sequence(ToolUse("Bash", {"command": "true"}), Text("done"))) as api:
            cli = ClaudeRun(tmp_path / "project", tmp_path / "home", api.url)
            cli.settings(settings)
            result = cli.prompt("hello", tools="Bash")
        assert result.returncode == 0, result.stderr
    finally:
        recorder.stop()
    assert started.read_text().strip() == "started"  # SessionStart fired, for the command
    assert "UserPromptSubmit" in events and "PreToolUse" in events, json.dumps(events)
    assert "SessionStart" not in events
