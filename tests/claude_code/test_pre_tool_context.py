"""A PreToolUse hook's ``additionalContext`` reaches the model in Claude Code and in hookgate
alike: the same published-style script, unchanged, run by both."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hookgate import Agent, ReActEngine, ScriptedLLM
from tests.claude_cli import ClaudeRun
from tests.claude_code.test_same_scripts import SCRIPTS, hook, shell_tool
from tests.fakes.anthropic import FakeAnthropic, Text, ToolUse, sequence

NOTE = "Note: this machine is the staging server"
SETTINGS = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook("staging_note.sh")]}]}}
CALL = {"command": "echo hi", "description": "greet"}


def project(root: Path) -> Path:
    where = root / "project"
    (where / ".claude" / "hooks").mkdir(parents=True)
    shutil.copy2(SCRIPTS / "staging_note.sh", where / ".claude" / "hooks" / "staging_note.sh")
    (where / ".claude" / "settings.json").write_text(json.dumps(SETTINGS))
    return where


async def test_pre_tool_use_context_reaches_the_model_in_both(tmp_path: Path) -> None:
    cc = project(tmp_path / "cc")
    with FakeAnthropic(sequence(ToolUse("Bash", CALL), Text("done"))) as api:
        result = ClaudeRun(cc, tmp_path / "cc" / "home", api.url).prompt("hi", tools="Bash")
        assert result.returncode == 0, result.stderr
        after_call = json.dumps(api.requests[-1])
        before_call = json.dumps(api.requests[0])
    assert NOTE in after_call and NOTE not in before_call

    hg = project(tmp_path / "hg")
    agent = Agent(id="coder", name="coder", instructions="", tools=[shell_tool(hg)],
                  model_config_json={"hooks": {"claude_code": str(hg / ".claude" /
                                                                  "settings.json")}})
    llm = ScriptedLLM([{"tool_calls": [{"name": "Bash", "args": CALL, "id": "c1"}]},
                       {"answer": "done"}])
    run = await ReActEngine(llm).run(agent, "hi", user_id="alice")
    (event,) = run.tool_events()
    assert event["allowed"] and "hi" in event["observation"]
    assert NOTE in event["observation"]  # the model's next turn reads it with the output
    assert run.state is not None
    assert any(NOTE in str(m.get("content")) for m in run.state.messages if m["role"] == "tool")
