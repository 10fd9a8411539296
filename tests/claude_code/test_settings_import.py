"""A Claude Code settings.json hooks block accepted as it is (from a path or inline), the
loader leaving hook commands to the shell, matchers read as Claude Code reads them, and
``hookgate check`` saying what an event without an equivalent does."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hookgate import Agent, HookBuildError, ReActEngine, ScriptedLLM, build_registry, tool
from hookgate.cli.main import app
from hookgate.config import load_config
from hookgate.matching import ToolMatcher

ran: list[str] = []


@tool
def Bash(command: str) -> str:
    """Pretend to run a command."""
    ran.append(command)
    return f"ran {command}"


def agent(claude_code: Any) -> Agent:
    return Agent(id="coder", name="coder", instructions="", tools=[Bash],
                 model_config_json={"hooks": {"claude_code": claude_code}})


async def run(a: Agent, command: str) -> dict[str, Any]:
    ran.clear()
    turns = [{"tool_calls": [{"name": "Bash", "args": {"command": command}, "id": "c1"}]},
             {"answer": "ok"}]
    result = await ReActEngine(ScriptedLLM(turns)).run(a, "go", user_id="u")
    return result.tool_events()[0]


def test_a_matcher_with_commas_spaces_and_hyphens_is_a_list_of_names() -> None:
    m = ToolMatcher.parse("Edit, Write")
    assert m.matches("Edit") and m.matches("Write") and not m.matches("Editor")
    assert ToolMatcher.parse("mcp-server-tool|Read").matches("mcp-server-tool")
    with pytest.raises(HookBuildError):
        ToolMatcher.parse("Edit Write")  # a name cannot hold a space


def test_every_handler_field_of_a_settings_block_is_accepted(tmp_path: Path) -> None:
    settings = {"hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "true", "timeout": 5, "async": False,
             "statusMessage": "checking", "once": False, "if": "Bash(git *)",
             "shell": "bash"},
            {"type": "http", "url": "http://127.0.0.1:9/h", "headers": {"X": "$T"},
             "allowedEnvVars": ["T"], "onFailure": "block"}]}],
        "SessionStart": [{"matcher": "startup|resume", "hooks": [
            {"type": "command", "command": "echo hi"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "true"}]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "true"}]}],
        "PermissionRequest": [{"matcher": "*", "hooks": [{"type": "command",
                                                          "command": "true"}]}],
        "PostToolUseFailure": [{"matcher": "*", "hooks": [{"type": "command",
                                                           "command": "true"}]}],
    }}
    registry = build_registry(agent(settings))
    names = [h.name for h in registry.hooks()]
    assert names == ["claude_code:SessionStart", "claude_code:PreToolUse",
                     "approval_gate", "claude_code:PostToolUseFailure"]


def test_a_handler_type_hookgate_cannot_run_is_a_build_error_not_a_silent_skip() -> None:
    settings = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "prompt", "prompt": "is this safe?"}]}]}}
    with pytest.raises(HookBuildError, match="'prompt'"):
        build_registry(agent(settings))


async def test_an_if_rule_limits_a_handler_to_matching_commands(tmp_path: Path) -> None:
    settings = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "echo no >&2; exit 2", "if": "Bash(git push*)"}]}]}}
    assert (await run(agent(settings), "git push origin"))["allowed"] is False
    assert (await run(agent(settings), "git status"))["allowed"] is True


async def test_a_crashing_handler_fails_closed_unless_it_says_fail_mode_open() -> None:
    crash = {"type": "command", "command": "exit 1"}
    closed = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [crash]}]}}
    outcome = await run(agent(closed), "ls")
    assert outcome["allowed"] is False and "status 1" in outcome["observation"]
    assert ran == []
    opened = {"hooks": {"PreToolUse": [{"matcher": "*",
                                        "hooks": [dict(crash, fail_mode="open")]}]}}
    assert (await run(agent(opened), "ls"))["allowed"] is True and ran == ["ls"]


async def test_handlers_run_in_parallel_and_deny_wins_over_allow(tmp_path: Path) -> None:
    marker = tmp_path / "seen"
    allow = {"type": "command", "command": 'echo \'{"hookSpecificOutput": {"hookEventName": '
                                          '"PreToolUse", "permissionDecision": "allow"}}\''}
    # The deny and log handlers each wait for the other to have started: run one after
    # the other, the first would give up (exit 3) before the second began.
    def meet(me: str, other: str) -> str:
        return (f"touch {tmp_path / me}; for i in $(seq 200); do [ -e {tmp_path / other} ] "
                f"&& break; sleep 0.05; done; [ -e {tmp_path / other} ] || exit 3; ")
    deny = {"type": "command",
            "command": meet("deny_started", "log_started") + "echo 'not today' >&2; exit 2"}
    log = {"type": "command", "command": meet("log_started", "deny_started") + f"cat > {marker}"}
    settings = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [allow, deny, log]}]}}
    outcome = await run(agent(settings), "ls")
    assert outcome["allowed"] is False and "not today" in outcome["observation"]
    assert json.loads(marker.read_text())["tool_input"] == {"command": "ls"}


def test_the_loader_leaves_hook_commands_to_the_shell(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    monkeypatch.setenv("SECRET", "s3")
    (tmp_path / "hookgate.yaml").write_text(textwrap.dedent("""
        models: {m: {type: scripted, turns: [{answer: hi}]}}
        agents:
          - id: coder
            model: m
            model_config_json:
              hooks:
                command_hooks:
                  - {event: PreToolUse, command: '"${CLAUDE_PROJECT_DIR}"/.claude/hooks/x.sh',
                     name: ${SECRET}}
                claude_code:
                  settings: {hooks: {PreToolUse: [{matcher: "*", hooks: [
                    {type: command, command: '"$CLAUDE_PROJECT_DIR"/h.sh ${HOME}'}]}]}}
    """))
    cfg = load_config(tmp_path / "hookgate.yaml")
    hooks = cfg.agent_spec("coder").model_config_json["hooks"]
    assert hooks["command_hooks"][0]["command"] == '"${CLAUDE_PROJECT_DIR}"/.claude/hooks/x.sh'
    assert hooks["command_hooks"][0]["name"] == "s3"  # everything else is still expanded
    handler = hooks["claude_code"]["settings"]["hooks"]["PreToolUse"][0]["hooks"][0]
    assert handler["command"] == '"$CLAUDE_PROJECT_DIR"/h.sh ${HOME}'


def test_check_says_what_an_event_without_an_equivalent_does(tmp_path: Path) -> None:
    settings = tmp_path / "project" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}))
    (tmp_path / "hookgate.yaml").write_text(textwrap.dedent(f"""
        models: {{m: {{type: scripted, turns: [{{answer: hi}}]}}}}
        agents:
          - id: coder
            model: m
            model_config_json: {{hooks: {{claude_code: {json.dumps(str(settings))}}}}}
    """))
    done = CliRunner().invoke(app, ["check", "--config", str(tmp_path / "hookgate.yaml")])
    assert done.exit_code == 0, done.output
    assert "claude_code:PreToolUse" in done.output
    assert "no equivalent for Stop (1 handler(s))" in done.output
    assert "never run" in done.output


async def test_continue_false_stops_the_run_with_its_stop_reason() -> None:
    stop = {"type": "command",
            "command": "echo '{\"continue\": false, \"stopReason\": \"quota reached\"}'"}
    settings = {"hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [stop]}]}}
    ran.clear()
    turns = [{"tool_calls": [{"name": "Bash", "args": {"command": "one"}, "id": "c1"}]},
             {"tool_calls": [{"name": "Bash", "args": {"command": "two"}, "id": "c2"}]},
             {"answer": "ok"}]
    result = await ReActEngine(ScriptedLLM(turns)).run(agent(settings), "go", user_id="u")
    assert ran == ["one"]
    assert result.status == "session_blocked"
    assert "quota reached" in (result.error or "")


def test_agent_id_and_agent_type_appear_only_inside_a_delegated_agent() -> None:
    from hookgate.catalog.declarative.protocol import hook_input
    from hookgate.hooks.model import HookContext, HookPoint

    top = HookContext(HookPoint.PRE_TOOL_USE, "Bash", {"command": "ls"}, agent_id="coder",
                      metadata={"run_id": "r", "tool_call_id": "c", "parent_agent_id": None})
    assert "agent_id" not in hook_input(top, cwd="/p")
    assert hook_input(top, cwd="/p")["hookgate_agent_id"] == "coder"
    child = HookContext(HookPoint.PRE_TOOL_USE, "Bash", {"command": "ls"}, agent_id="helper",
                        metadata={"run_id": "r", "tool_call_id": "c",
                                  "parent_agent_id": "coder"})
    data = hook_input(child, cwd="/p")
    assert (data["agent_id"], data["agent_type"]) == ("helper", "helper")


async def test_a_declared_plugin_root_is_exported_to_commands(tmp_path: Path) -> None:
    out = tmp_path / "env.txt"
    settings = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command",
         "command": f'echo "$CLAUDE_PLUGIN_ROOT|$CLAUDE_PROJECT_DIR|$CLAUDECODE" > {out}'}]}]}}
    a = agent({"settings": settings, "plugin_root": str(tmp_path / "plugin"),
               "project_dir": str(tmp_path)})
    assert (await run(a, "ls"))["allowed"] is True
    assert out.read_text().strip() == f"{tmp_path / 'plugin'}|{tmp_path}|1"


async def test_a_session_start_hook_finds_a_transcript_file_and_its_plain_text_is_context(
        tmp_path: Path) -> None:
    read_path = "import json,sys; print(json.load(sys.stdin)['transcript_path'])"
    script = f'test -f "$(python3 -c "{read_path}")" && echo "repo rules: be brief"'
    settings = {"hooks": {"SessionStart": [{"matcher": "startup", "hooks": [
        {"type": "command", "command": script}]}]}}
    seen: list[Any] = []

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(messages)
        return {"answer": "ok"}

    result = await ReActEngine(ScriptedLLM(model)).run(agent(settings), "go", user_id="u")
    assert result.status == "completed"
    assert "repo rules: be brief" in seen[0][0]["content"]
