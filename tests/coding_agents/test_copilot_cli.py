"""The real GitHub Copilot CLI (``copilot -p``, pinned, offline BYOK) with hookgate as its
approval backend through the hooks file ``hookgate copilot install`` writes, against a
loopback fake of Chat Completions with streaming. Every case asserts hookgate saw the call
(audit rows or requests): a hook Copilot skipped silently fails it. Each CLI run takes one
to two seconds.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import Response
from typer.testing import CliRunner

from hookgate.cli.main import app
from hookgate.storage.users import revoke_token
from tests.claude_code.scene import run_lines
from tests.coding_agents.copilot_cli import API_KEY, CopilotRun, copilot_binary
from tests.coding_agents.copilot_scene import TOKEN, copilot_scene, install
from tests.coding_agents.failing_hookgate import SERVED_MODES, failing_app
from tests.coding_agents.late_approval import LateApproval
from tests.fakes.chat_stream import Call, FakeChatStream, Say, sequence, tool_results
from tests.fakes.server import LoopbackServer
from tests.fakes.slack import FakeSlack


def shell(cmd: str) -> Call:
    return Call("bash", {"command": cmd, "description": "run it"})


def check(cli: CopilotRun, *, repo_hooks: bool) -> Any:
    """``hookgate copilot install --check`` in ``cli``'s environment."""
    return CliRunner().invoke(
        app, ["copilot", "install", "--agent", "coder", "--check", "--project",
              str(cli.project), "--copilot", copilot_binary()],
        env={**cli.env(repo_hooks=repo_hooks), "HOOKGATE_TOKEN": TOKEN})


def test_ungated_calls_run_and_the_installed_hooks_fire_only_with_the_prompt_mode_opt_in(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    # The same call twice: each is a call of its own (its own derived id), audited once.
    call = shell("echo hi >> plain.txt")
    with copilot_scene(tmp_path, database_url, slack, sequence(call, call, Say("done"))) as s:
        result = s.exec()
        assert result.returncode == 0, result.stderr
        assert run_lines(s.copilot.project / "plain.txt") == ["hi", "hi"]
        # hookgate saw each call before and after it ran: the hooks were not skipped.
        assert [(r["tool_name"], r["outcome"]) for r in s.audit()] == [("Bash", "ok")] * 2
        checked = check(s.copilot, repo_hooks=True)
        assert checked.exit_code == 0, checked.output
        assert "ok: copilot -p ran hookgate's sessionStart hook" in checked.output
        # Without the opt-in, copilot -p skips the repository's hooks silently: the check
        # says so, and a run leaves hookgate unaware.
        skipped = check(s.copilot, repo_hooks=False)
        assert skipped.exit_code != 0
        assert "GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true" in skipped.output
        s.exec(repo_hooks=False)
        assert len(s.audit()) == 2


def test_a_denied_call_never_runs_and_the_model_reads_why(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    with copilot_scene(tmp_path, database_url, slack, sequence(shell("touch denied.txt"),
                                                             Say("done")), read_only=True) as s:
        result = s.exec()
        assert result.returncode == 0, result.stderr
        assert not (s.copilot.project / "denied.txt").exists()
        [told] = s.model.seen()
        assert told.startswith("Denied by preToolUse hook: ") and "read-only" in told, told
        assert [(r["tool_name"], r["outcome"]) for r in s.audit()] == [("Bash", "blocked")]


def test_a_call_approved_within_the_hook_timeout_runs_once_and_a_rejected_one_never(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    script = sequence(shell("echo yes >> approved.log"), shell("echo no >> rejected.log"),
                      Say("done"))
    with copilot_scene(tmp_path, database_url, slack, script) as s:
        finished = s.in_background(s.exec)
        s.click("approve")
        s.click("reject", count=2)
        result = finished()
        assert result.returncode == 0, result.stderr
        assert run_lines(s.copilot.project / "approved.log") == ["yes"]
        assert not (s.copilot.project / "rejected.log").exists()
        _, refused = s.model.seen()
        assert refused.startswith("Denied by preToolUse hook: ") and "rejected" in refused, \
            refused
        outcomes = [(r["tool_name"], r["outcome"]) for r in s.audit()]
        assert outcomes.count(("Bash", "ok")) == 1, outcomes


@pytest.mark.both_databases
def test_a_call_approved_after_the_timeout_runs_once_on_the_identical_retry(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    late = LateApproval(shell("echo once >> late.log"), lambda body: len(tool_results(body)))
    with copilot_scene(tmp_path, database_url, slack, late, wait_s=0.5) as s:
        finished = s.in_background(s.exec)
        late.approve(s.click)
        result = finished()
        assert result.returncode == 0, result.stderr
        # The identical retry ran once; the third identical call is a call of its own,
        # which waits for a person again instead of running on the used approval.
        assert run_lines(s.copilot.project / "late.log") == ["once"]
        first, _, third = s.model.seen()
        assert "pending: repeat the identical call after approval" in first, first
        assert third.startswith("Denied by preToolUse hook: approval "), third
        assert "pending" in third and third.split()[5] != first.split()[5], (first, third)
        outcomes = [(r["tool_name"], r["outcome"]) for r in s.audit()]
        assert outcomes.count(("Bash", "ok")) == 1, outcomes


def test_every_failure_of_hookgate_blocks_the_call_and_the_model_reads_why(
        tmp_path: Path, dead_url: str) -> None:
    released = threading.Event()
    # A 200 Copilot would misread, and so run the call.
    malformed = '{"permissionDecision": "deny"} (not quite)'
    fakes = {mode: LoopbackServer(failing_app(
        "/api/copilot/hooks", mode, released, Response(malformed, media_type="application/json")))
        for mode in SERVED_MODES}
    urls = {"down": dead_url, **{mode: fake.start() for mode, fake in fakes.items()}}
    try:
        for mode, url in urls.items():
            with FakeChatStream(sequence(shell("touch ran.txt"), Say("done")),
                                api_key=API_KEY) as model:
                cli = CopilotRun(tmp_path / mode, tmp_path / "home", model.base_url)
                install(cli, url, wait_s=0.5)
                result = cli.run("go", env={"HOOKGATE_TOKEN": TOKEN})
                assert not (cli.project / "ran.txt").exists(), (mode, result.stderr)
                [told] = model.seen()
                assert told.startswith("Denied by preToolUse hook: hookgate: "), (mode, told)
    finally:
        released.set()
        for fake in fakes.values():
            fake.stop()


def test_a_bad_or_revoked_token_blocks_the_call(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    with copilot_scene(tmp_path, database_url, slack,
                       sequence(shell("touch ran.txt"), Say("done"))) as s:
        s.exec(token="tok-not-a-token")
        assert not (s.copilot.project / "ran.txt").exists()
        [told] = s.model.seen()
        assert told.startswith("Denied by preToolUse hook: hookgate: (HTTP 401)"), told
        s.srv.call(revoke_token(s.srv.runtime.db, "alice", by="cli"))
        s.exec()
        assert not (s.copilot.project / "ran.txt").exists()
        [told] = s.model.seen()
        assert told.startswith("Denied by preToolUse hook: hookgate: (HTTP 401)"), told


def test_withheld_output_never_reaches_copilots_model(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    # The scene's PostToolUse command hook fails closed on a card number in a Bash output.
    with copilot_scene(tmp_path, database_url, slack,
                       sequence(shell("printf '4111-1111-%s' 1111-1111"), Say("done"))) as s:
        result = s.exec()
        assert result.returncode == 0, result.stderr
        [told] = s.model.seen()
        assert "hookgate withheld this output" in told, told
        assert "4111-1111-1111" not in json.dumps(s.model.requests)
        assert [(r["tool_name"], r["outcome"]) for r in s.audit()] == [("Bash", "withheld")]


def test_session_start_context_reaches_the_model_and_a_stop_refuses_the_sessions_calls(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    from tests.claude_code.test_session_start_forward import BROKEN, CONTEXT

    script = sequence(shell("echo ran >> ran.txt"), Say("done"))
    with copilot_scene(tmp_path / "a", database_url, slack, script,
                       extra_hooks=[CONTEXT]) as s:
        assert s.exec().returncode == 0
        assert "ZEBRA-17" in json.dumps(s.model.requests[0])
        assert run_lines(s.copilot.project / "ran.txt") == ["ran"]
    with copilot_scene(tmp_path / "b", database_url, slack, script,
                       extra_hooks=[BROKEN]) as s:
        s.exec()
        assert not (s.copilot.project / "ran.txt").exists()
        [told] = s.model.seen()
        assert "stopped the session at SessionStart" in told, told


def test_a_user_level_install_fires_in_every_folder_without_the_prompt_mode_opt_in(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    from tests.claude_code.scene import Scene
    from tests.coding_agents.scene import served_coder

    with served_coder(database_url, slack, wait_s=15.0, read_only=False,
                      extra_hooks=None) as srv, \
            FakeChatStream(sequence(shell("echo hi >> plain.txt"), Say("done")),
                           api_key=API_KEY) as model:
        cli = CopilotRun(tmp_path / "project", tmp_path / "home", model.base_url)
        env = cli.env(repo_hooks=False)
        done = CliRunner().invoke(app, ["copilot", "install", "--agent", "coder", "--user",
                                        "--url", srv.url], env=env)
        assert done.exit_code == 0, done.output
        user_file = Path(env["COPILOT_HOME"]) / "hooks" / "hookgate.json"
        assert user_file.exists() and not (cli.project / ".github").exists()
        result = cli.run(env={"HOOKGATE_TOKEN": TOKEN}, repo_hooks=False)
        assert result.returncode == 0, result.stderr
        assert run_lines(cli.project / "plain.txt") == ["hi"]
        audit = Scene(srv, slack, None, None).audit()  # type: ignore[arg-type]
        assert [(r["tool_name"], r["outcome"]) for r in audit] == [("Bash", "ok")]
        checked = CliRunner().invoke(
            app, ["copilot", "install", "--agent", "coder", "--user", "--check", "--project",
                  str(cli.project), "--copilot", copilot_binary()],
            env={**env, "HOOKGATE_TOKEN": TOKEN})
        assert checked.exit_code == 0, checked.output
        done = CliRunner().invoke(app, ["copilot", "uninstall", "--user"], env=env)
        assert done.exit_code == 0 and not user_file.exists(), done.output
