"""The real Gemini CLI (``gemini -p``, pinned) with hookgate as its approval backend through
the hooks ``hookgate gemini install`` writes, against a loopback fake of the Gemini API.
Every case asserts hookgate saw the call (audit rows or requests): a hook Gemini skipped
fails it. Each CLI run takes about two seconds.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import PlainTextResponse
from typer.testing import CliRunner

from hookgate.cli.main import app
from hookgate.storage.users import revoke_token
from tests.claude_code.scene import run_lines
from tests.coding_agents.failing_hookgate import MODES, failing_hookgate
from tests.coding_agents.gemini_cli import GeminiRun
from tests.coding_agents.gemini_scene import TOKEN, gemini_scene, install, seen
from tests.fakes.gemini import Call, FakeGemini, Say, function_responses, sequence
from tests.fakes.slack import FakeSlack


def shell(cmd: str) -> Call:
    return Call("run_shell_command", {"command": cmd})


def test_an_ungated_call_runs_and_the_installed_hooks_fire(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    with gemini_scene(tmp_path, database_url, slack,
                      sequence(shell("echo hi > plain.txt"), Say("done"))) as s:
        result = s.exec()
        assert result.returncode == 0, result.stderr
        assert run_lines(s.gemini.project / "plain.txt") == ["hi"]
        # hookgate saw the call before and after it ran: the hooks were not skipped.
        assert [(r["tool_name"], r["outcome"]) for r in s.audit()] == [("Bash", "ok")]
        checked = CliRunner().invoke(
            app, ["gemini", "install", "--agent", "coder", "--check", "--project",
                  str(s.gemini.project)],
            env={"HOME": str(s.gemini.home), "HOOKGATE_TOKEN": TOKEN})
        assert checked.exit_code == 0, checked.output
        assert "ok: Gemini runs hookgate's" in checked.output


def test_a_denied_call_never_runs_and_the_model_reads_why(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    with gemini_scene(tmp_path, database_url, slack, sequence(shell("touch denied.txt"),
                                                            Say("done")), read_only=True) as s:
        result = s.exec()
        assert result.returncode == 0, result.stderr
        assert not (s.gemini.project / "denied.txt").exists()
        [told] = seen(s.model)
        assert "Tool execution blocked: hookgate" in told and "read-only" in told, told
        assert [(r["tool_name"], r["outcome"]) for r in s.audit()] == [("Bash", "blocked")]


def test_a_call_approved_within_the_hook_timeout_runs_once(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    with gemini_scene(tmp_path, database_url, slack,
                      sequence(shell("echo yes >> approved.log"), Say("done"))) as s:
        finished = s.in_background(s.exec)
        s.click("approve")
        result = finished()
        assert result.returncode == 0, result.stderr
        assert run_lines(s.gemini.project / "approved.log") == ["yes"]
        assert [(r["tool_name"], r["outcome"]) for r in s.audit()] == [("Bash", "ok")]


def test_a_rejected_call_never_runs(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    with gemini_scene(tmp_path, database_url, slack,
                      sequence(shell("echo no >> rejected.log"), Say("done"))) as s:
        finished = s.in_background(s.exec)
        s.click("reject")
        result = finished()
        assert result.returncode == 0, result.stderr
        assert not (s.gemini.project / "rejected.log").exists()
        [told] = seen(s.model)
        assert "Tool execution blocked" in told and "rejected" in told, told


@pytest.mark.both_databases
def test_a_call_approved_after_the_timeout_runs_once_on_the_identical_retry(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    pending_read, approved = threading.Event(), threading.Event()
    call = shell("echo once >> late.log")

    def script(body: dict[str, Any]) -> Any:
        n = len(function_responses(body))
        if n == 1:
            # The model read "approval ... pending": it repeats the call once approved.
            pending_read.set()
            assert approved.wait(60), "the test never approved"
        return [call, call, call][n] if n < 3 else Say("done")

    with gemini_scene(tmp_path, database_url, slack, script, wait_s=0.5) as s:
        finished = s.in_background(s.exec)
        assert pending_read.wait(60), "the first call was never answered"
        s.click("approve")
        approved.set()
        result = finished()
        assert result.returncode == 0, result.stderr
        # The identical retry ran once; the third identical call did not run again.
        assert run_lines(s.gemini.project / "late.log") == ["once"]
        first, _, third = seen(s.model)
        assert "pending: repeat the identical call after approval" in first, first
        assert "Tool execution blocked: hookgate" in third, third
        outcomes = [(r["tool_name"], r["outcome"]) for r in s.audit()]
        assert outcomes.count(("Bash", "ok")) == 1, outcomes


@pytest.mark.parametrize("mode", MODES)
def test_every_failure_of_hookgate_blocks_the_call(tmp_path: Path, mode: str) -> None:
    # A 200 that is no answer of hookgate's: Gemini reads plain text as an allow.
    with failing_hookgate(mode, "/api/gemini/hooks", PlainTextResponse("ok")) as url, \
            FakeGemini(sequence(shell("touch ran.txt"), Say("done"))) as model:
        cli = GeminiRun(tmp_path / "project", tmp_path / "home", model.base_url)
        install(cli, url, wait_s=0.5)
        result = cli.run("go", env={"HOOKGATE_TOKEN": TOKEN})
        assert not (cli.project / "ran.txt").exists(), (mode, result.stderr)
        [told] = seen(model)
        assert "Tool execution blocked: hookgate" in told, told


@pytest.mark.parametrize("token", ["bad", "revoked"])
def test_a_bad_or_revoked_token_blocks_the_call(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str,
        token: str) -> None:
    with gemini_scene(tmp_path, database_url, slack,
                      sequence(shell("touch ran.txt"), Say("done"))) as s:
        if token == "revoked":
            s.srv.call(revoke_token(s.srv.runtime.db, "alice", by="cli"))
        result = s.exec(token=TOKEN if token == "revoked" else "tok-not-a-token")
        assert result.returncode == 0, result.stderr
        assert not (s.gemini.project / "ran.txt").exists()
        [told] = seen(s.model)
        assert "Tool execution blocked: hookgate (HTTP 401)" in told, told


def test_withheld_output_never_reaches_geminis_model(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    # The scene's PostToolUse command hook fails closed on a card number in a Bash output.
    with gemini_scene(tmp_path, database_url, slack,
                      sequence(shell("printf '4111-1111-%s' 1111-1111"), Say("done"))) as s:
        result = s.exec()
        assert result.returncode == 0, result.stderr
        [told] = seen(s.model)
        assert "hookgate withheld this output" in told, told
        assert "4111-1111-1111" not in json.dumps(s.model.requests)
        assert [(r["tool_name"], r["outcome"]) for r in s.audit()] == [("Bash", "withheld")]


def test_session_start_context_reaches_the_model_and_a_stop_refuses_the_sessions_calls(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    from tests.claude_code.test_session_start_forward import BROKEN, CONTEXT

    script = sequence(shell("echo ran >> ran.txt"), Say("done"))
    with gemini_scene(tmp_path / "a", database_url, slack, script,
                      extra_hooks=[CONTEXT]) as s:
        assert s.exec().returncode == 0
        assert "ZEBRA-17" in json.dumps(s.model.requests[0])
        assert run_lines(s.gemini.project / "ran.txt") == ["ran"]
    with gemini_scene(tmp_path / "b", database_url, slack, script,
                      extra_hooks=[BROKEN]) as s:
        s.exec()
        assert not (s.gemini.project / "ran.txt").exists()
        [told] = seen(s.model)
        assert "stopped the session at SessionStart" in told, told


#: Rewrites every Bash output (Claude Code's PostToolUse protocol, updatedToolOutput).
REWRITE = {"event": "PostToolUse", "matcher": "Bash", "name": "scrubber",
           "command": "cat > /dev/null; echo '{\"hookSpecificOutput\": {\"hookEventName\": "
                      "\"PostToolUse\", \"updatedToolOutput\": \"SCRUBBED-OUTPUT\"}}'"}


def test_output_a_hook_rewrites_is_what_geminis_model_reads(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    with gemini_scene(tmp_path, database_url, slack,
                      sequence(shell("echo SECRET-WORD"), Say("done")),
                      extra_hooks=[REWRITE]) as s:
        assert s.exec().returncode == 0
        [told] = seen(s.model)
        assert "SCRUBBED-OUTPUT" in told, told
        assert "SECRET-WORD" not in json.dumps(function_responses(s.model.requests[-1]))


def test_the_users_prompt_is_the_sessions_request_so_the_address_it_gave_is_not_untrusted(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    from tests.coding_agents.test_codex_cli import INBOX, PROMPT

    # BeforeAgent sends the prompt: the address the user typed is the user's, the one only
    # a shell output (untrusted) names waits for a person.
    script = sequence(shell("cat inbox.txt"), shell("echo ops@example.org >> sent.txt"),
                      shell("echo mallory@evil-mail.test >> sent.txt"), Say("done"))
    with gemini_scene(tmp_path, database_url, slack, script, wait_s=0.5,
                      provenance=True) as s:
        (s.gemini.project / "inbox.txt").write_text(INBOX)
        result = s.exec(prompt=PROMPT)
        assert result.returncode == 0, result.stderr
        assert run_lines(s.gemini.project / "sent.txt") == ["ops@example.org"]
        assert "pending" in seen(s.model)[-1], seen(s.model)
