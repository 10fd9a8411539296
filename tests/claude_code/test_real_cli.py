"""The real Claude Code CLI with hookgate as its http hook target (settings written by
``hookgate claude-code install``), against a loopback fake of the Messages API.

Gated Bash calls become approval cards in the fake Slack; a signed click decides them.
Each CLI run takes about a second.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import httpx

from tests.claude_cli import ClaudeRun
from tests.claude_code.scene import GATED, REASON, TOKEN, run_lines, scene
from tests.fakes.anthropic import FakeAnthropic, Text, ToolUse, result_text, sequence, tool_results
from tests.fakes.slack import FakeSlack, block_texts


def bash(command: str) -> ToolUse:
    return ToolUse("Bash", {"command": command, "description": "append a line"})


def last_result(api: FakeAnthropic) -> dict:
    return tool_results(api.requests[-1])[-1]


def test_an_approved_bash_call_runs_once_after_a_signed_slack_click(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    script = sequence(bash("echo approved >> approved.log"), Text("done"))
    with scene(tmp_path, database_url, slack, script) as s:
        finished = s.in_background(s.prompt)
        # The card names the rule that matched and its reason; Claude Code gives no
        # description of its Bash, and none is made up.
        card = block_texts(s.card().blocks or [])
        assert (f"Why approval is needed: gate rule claude_code.rules[0] of agent 'coder' "
                f"(matcher Bash, when {GATED}): {REASON}") in card, card
        assert "What the tool does" not in card and "flagged" not in card
        s.click("approve")
        result = finished()
        assert result.returncode == 0, result.stderr
        assert run_lines(s.cli.project / "approved.log") == ["approved"]
        seen = last_result(s.api)
        assert not seen.get("is_error"), seen
        audit = s.audit()
        assert [(r["tool_name"], r["outcome"]) for r in audit] == [("Bash", "ok")]
        assert "approved.log" in json.dumps(audit[0])
    assert slack.violations == []


def test_a_rejected_bash_call_never_runs_and_the_model_is_told_why(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    script = sequence(bash("echo nope >> rejected.log"), Text("done"))
    with scene(tmp_path, database_url, slack, script) as s:
        finished = s.in_background(s.prompt)
        s.click("reject")
        result = finished()
        assert result.returncode == 0, result.stderr
        assert not (s.cli.project / "rejected.log").exists()
        seen = last_result(s.api)
        assert seen.get("is_error") is True
        assert "rejected" in result_text(seen)
        assert [(r["tool_name"], r["outcome"]) for r in s.audit()] == [("Bash", "blocked")]


def test_a_deferred_headless_run_resumes_after_approval_and_runs_the_call_once(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    script = sequence(bash("echo later >> deferred.log"), Text("done"))
    with scene(tmp_path, database_url, slack, script, wait_s=0.5) as s:
        first = s.prompt()
        assert first.returncode == 0, first.stderr
        out = first.json()
        assert out["stop_reason"] == "tool_deferred"
        assert out["deferred_tool_use"]["name"] == "Bash"
        assert not (s.cli.project / "deferred.log").exists()
        pending = s.requests()
        assert [r["status"] for r in pending] == ["pending"]

        s.click("approve")
        resumed = s.resume(out["session_id"])
        assert resumed.returncode == 0, resumed.stderr
        assert run_lines(s.cli.project / "deferred.log") == ["later"]
        outcomes = [(r["tool_name"], r["outcome"]) for r in s.audit()]
        # The deferred attempt and the execution after approval: one row each.
        assert outcomes == [("Bash", "blocked"), ("Bash", "ok")]

        # The approval was used by that one execution: the same call sent again (same
        # session, tool_use_id and input) is not allowed on it.
        deferred = out["deferred_tool_use"]
        replay = httpx.post(
            f"{s.srv.url}/api/claude-code/hooks", params={"agent": "coder"},
            headers={"Authorization": f"Bearer {TOKEN}",
                     "X-Claude-Code-Entrypoint": "sdk-cli"},
            json={"hook_event_name": "PreToolUse", "session_id": out["session_id"],
                  "cwd": str(s.cli.project), "tool_name": "Bash",
                  "tool_input": deferred["input"], "tool_use_id": deferred["id"]})
        answer = replay.json()["hookSpecificOutput"]
        assert answer["permissionDecision"] == "deny"
        assert "already used by one execution" in answer["permissionDecisionReason"]


def test_withheld_output_never_reaches_claude_codes_model(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    script = sequence(bash("echo card 4111-1111-1111-1111"), Text("done"))
    with scene(tmp_path, database_url, slack, script) as s:
        result = s.prompt()
        assert result.returncode == 0, result.stderr
        # The session stopped before the next model turn; the card number went nowhere.
        assert len(s.api.requests) == 1
        # The whole number: its first group alone turns up in random ids (session UUIDs).
        assert "4111-1111" not in json.dumps(s.api.requests)
        assert result.json()["terminal_reason"] == "hook_stopped"
        assert [(r["tool_name"], r["outcome"]) for r in s.audit()] == [("Bash", "withheld")]


def test_when_hookgate_is_unreachable_the_installed_hooks_block_the_call(
        tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    from typer.testing import CliRunner

    from hookgate.cli.main import app

    with FakeAnthropic(sequence(bash("touch ran.txt"), Text("done"))) as api:
        cli = ClaudeRun(tmp_path / "project", tmp_path / "home", api.url)
        done = CliRunner().invoke(app, ["claude-code", "install", "--agent", "coder",
                                        "--url", dead, "--project", str(cli.project)])
        assert done.exit_code == 0, done.output
        result = cli.prompt("go", env={"HOOKGATE_TOKEN": "whatever"})
        # The installed UserPromptSubmit handler already stops the prompt: nothing reaches
        # the model, nothing runs.
        assert "blocking because onFailure is" in result.json()["result"]
        assert api.requests == [] and not (cli.project / "ran.txt").exists()

        # Without that handler, the PreToolUse one blocks the call itself.
        settings_file = cli.project / ".claude" / "settings.json"
        settings = json.loads(settings_file.read_text())
        del settings["hooks"]["UserPromptSubmit"]
        settings_file.write_text(json.dumps(settings))
        cli.prompt("go", env={"HOOKGATE_TOKEN": "whatever"})
        assert not (cli.project / "ran.txt").exists()
        assert last_result(api).get("is_error") is True


def test_a_reordered_rm_from_the_real_cli_is_gated_by_a_command_rule(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    from tests.adversarial_tally import TALLY

    rules = [{"matcher": "Bash", "command": [["rm", "-rf"]], "requires_confirmation": True}]
    script = sequence(bash("rm  -r --force keep"), Text("done"))
    with scene(tmp_path, database_url, slack, script, wait_s=0.5, rules=rules) as s:
        (s.cli.project / "keep").mkdir(parents=True)
        (s.cli.project / "keep" / "file").write_text("x")
        first = s.prompt()
        assert first.returncode == 0, first.stderr
        deferred = first.json().get("stop_reason") == "tool_deferred"
        TALLY.record("claude-code real CLI 'rm  -r --force' under an [rm, -rf] rule",
                     got_through=not (s.cli.project / "keep" / "file").exists())
        assert deferred and (s.cli.project / "keep" / "file").exists()
        [request] = s.requests()
        assert request["status"] == "pending"
        assert request["payload"]["args"]["command"] == "rm  -r --force keep"
