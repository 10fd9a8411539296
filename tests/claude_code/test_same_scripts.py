"""Published-style Claude Code hook scripts, unchanged, run by the real Claude Code and by
hookgate (the same settings.json imported with ``hooks.claude_code``): the same calls run,
the same calls are refused, the model reads the same reasons and context.

Covered: ``"$CLAUDE_PROJECT_DIR"/...`` commands, exit 2 with stderr, a JSON ``deny``, exit 2
with a JSON reason, plain stdout (ignored), PostToolUse ``additionalContext``, an
``"Edit, Write"`` matcher, a logger that runs in parallel and sees every call, and a hook
that reads the session's JSONL transcript.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from hookgate import Agent, ReActEngine, ScriptedLLM, Tool
from hookgate.hooks.transcript import transcript_file
from tests.claude_cli import ClaudeRun
from tests.fakes.anthropic import FakeAnthropic, Text, ToolUse, result_text, sequence, tool_results

SCRIPTS = Path(__file__).resolve().parent.parent / "hookscripts" / "claude_code"


def hook(script: str) -> dict[str, Any]:
    return {"type": "command", "command": f'"$CLAUDE_PROJECT_DIR"/.claude/hooks/{script}',
            "timeout": 30}


SETTINGS = {"hooks": {
    "PreToolUse": [
        {"matcher": "Bash", "hooks": [hook("block_dangerous.py"), hook("no_push.sh")]},
        {"matcher": "Edit, Write", "hooks": [hook("protect_env.py")]},
        {"matcher": "*", "hooks": [hook("chatty.sh"), hook("log_calls.py"),
                                   hook("read_transcript.py")]},
    ],
    "PostToolUse": [{"matcher": "Bash", "hooks": [hook("remind_tests.sh")]}],
}}


def calls(project: Path) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("Bash", {"command": "rm -rf build", "description": "clean"}),
        ("Bash", {"command": "git push origin main", "description": "push"}),
        ("Bash", {"command": "echo hello > out.txt", "description": "write"}),
        ("Write", {"file_path": str(project / ".env"), "content": "KEY=1\n"}),
        ("Write", {"file_path": str(project / "notes.txt"), "content": "notes\n"}),
    ]


def project_with_hooks(root: Path) -> Path:
    project = root / "project"
    hooks_dir = project / ".claude" / "hooks"
    hooks_dir.mkdir(parents=True)
    for script in SCRIPTS.iterdir():
        if script.suffix in (".sh", ".py"):
            shutil.copy2(script, hooks_dir / script.name)
    (project / ".claude" / "settings.json").write_text(json.dumps(SETTINGS))
    return project


def effects(project: Path) -> dict[str, Any]:
    log = project / ".claude" / "calls.log"
    transcript = project / ".claude" / "transcript.log"
    return {"out.txt": (project / "out.txt").exists(), ".env": (project / ".env").exists(),
            "notes.txt": (project / "notes.txt").exists(),
            "logged": len(log.read_text().splitlines()) if log.exists() else 0,
            "transcript": [json.loads(line) for line in transcript.read_text().splitlines()]
            if transcript.exists() else []}


def with_claude_code(root: Path) -> tuple[dict[str, Any], list[tuple[bool, str]], str]:
    project = project_with_hooks(root / "cc")
    script = sequence(*(ToolUse(n, a) for n, a in calls(project)), Text("done"))
    with FakeAnthropic(script) as api:
        cli = ClaudeRun(project, root / "cc" / "home", api.url)
        result = cli.prompt("tidy up", tools="Bash,Write")
        assert result.returncode == 0, result.stderr
        final = api.requests[-1]
    seen = [(bool(b.get("is_error")), result_text(b)) for b in tool_results(final)]
    return effects(project), seen, json.dumps(final)


def shell_tool(project: Path) -> Tool:
    def bash(command: str, description: str = "") -> str:
        done = subprocess.run(["sh", "-c", command], cwd=project, capture_output=True,
                              text=True, timeout=30)
        return done.stdout + done.stderr

    return Tool("Bash", "Run a command", {"type": "object", "properties": {
        "command": {"type": "string"}, "description": {"type": "string"}},
        "required": ["command"]}, bash)


def write_tool() -> Tool:
    def write(file_path: str, content: str) -> str:
        Path(file_path).write_text(content)
        return f"File created successfully at: {file_path}"

    return Tool("Write", "Write a file", {"type": "object", "properties": {
        "file_path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["file_path", "content"]}, write)


async def with_hookgate(root: Path) -> tuple[dict[str, Any], list[tuple[bool, str]]]:
    project = project_with_hooks(root / "hg")
    agent = Agent(id="coder", name="coder", instructions="", org_id="acme",
                  tools=[shell_tool(project), write_tool()],
                  model_config_json={"hooks": {
                      "claude_code": str(project / ".claude" / "settings.json")}})
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": n, "args": a, "id": f"c{i}"}]}
        for i, (n, a) in enumerate(calls(project))]
    result = await ReActEngine(ScriptedLLM([*turns, {"answer": "done"}])).run(
        agent, "tidy up", user_id="alice")
    seen = [(not e["allowed"], str(e["observation"])) for e in result.tool_events()]
    assert not transcript_file(result.run_id).exists()  # removed when the run ended
    return effects(project), seen


async def test_the_same_scripts_decide_the_same_way_in_claude_code_and_hookgate(
        tmp_path: Path) -> None:
    cc_effects, cc_seen, cc_final = with_claude_code(tmp_path)
    hg_effects, hg_seen = await with_hookgate(tmp_path)

    # What ran and what did not, on disk; the logger saw all five calls in both.
    # A hook reading the transcript finds the prompt and the calls made so far. hookgate
    # writes the transcript before each turn's calls, so it always holds the call being
    # decided. Claude Code appends to its JSONL through a write queue, so under load a hook
    # may read it just before the current turn's assistant message lands (one call behind).
    so_far = [{"prompt": "tidy up", "tool_uses_so_far": n} for n in range(1, 6)]
    assert hg_effects == {"out.txt": True, ".env": False, "notes.txt": True, "logged": 5,
                          "transcript": so_far}
    assert {k: v for k, v in cc_effects.items() if k != "transcript"} == {
        k: v for k, v in hg_effects.items() if k != "transcript"}
    cc_transcript = cc_effects["transcript"]
    assert [e["prompt"] for e in cc_transcript] == ["tidy up"] * 5
    cc_counts = [e["tool_uses_so_far"] for e in cc_transcript]
    assert all(n - 1 <= c <= n for n, c in enumerate(cc_counts, 1)), cc_counts
    assert cc_counts == sorted(cc_counts)

    # Which calls the model was told were refused, and why.
    assert [refused for refused, _ in hg_seen] == [refused for refused, _ in cc_seen] == [
        True, True, False, True, False]
    for (_, cc_text), (_, hg_text), reason in zip(cc_seen, hg_seen, [
            "Dangerous command blocked: rm -rf build",
            "Pushing is not allowed from this machine", None,
            "Secrets files are protected", None], strict=True):
        if reason is not None:
            assert reason in cc_text and reason in hg_text
    # Plain stdout never reaches the model; PostToolUse context does.
    assert "checking the call" not in cc_final
    assert not any("checking the call" in text for _, text in hg_seen)
    assert "Reminder: run the test suite" in cc_final
    assert "Reminder: run the test suite" in hg_seen[2][1]
