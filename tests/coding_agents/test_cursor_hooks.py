"""Cursor with hookgate as its approval backend, from its documented protocol: the hooks
``hookgate cursor install`` writes, run exactly as Cursor runs them (tests/coding_agents/
cursor_host.py) against a real hookgate server on loopback. Every case asserts hookgate saw
the call (audit rows or requests), so a hook that never fired fails it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import JSONResponse
from typer.testing import CliRunner

from hookgate.cli.main import app
from tests.claude_code.scene import TOKEN, Scene, coder, run_lines
from tests.coding_agents.cursor_host import CursorHost, Turn
from tests.coding_agents.failing_hookgate import MODES, failing_hookgate
from tests.coding_agents.scene import untrusted_shell
from tests.fakes.slack import FakeSlack
from tests.live_server import live_server


def install(project: Path, url: str, *, wait_s: float, layer: str = "tool") -> None:
    done = CliRunner().invoke(app, ["cursor", "install", "--agent", "coder", "--url", url,
                                    "--project", str(project), "--wait", str(wait_s),
                                    "--layer", layer])
    assert done.exit_code == 0, done.output


def host(project: Path, token: str = TOKEN) -> CursorHost:
    return CursorHost(project, {"PATH": os.environ["PATH"], "HOOKGATE_TOKEN": token})


class CursorScene(Scene):
    cursor: CursorHost

    def shell(self, command: str) -> Turn:
        return self.cursor.shell(command)


@contextmanager
def cursor_scene(tmp_path: Path, database_url: str, slack: FakeSlack, *,
                 wait_s: float = 15.0, read_only: bool = False, layer: str = "tool",
                 token: str = TOKEN, provenance: bool = False) -> Iterator[CursorScene]:
    from hookgate.runtime.deployment import ChannelSpec

    deployment = coder(wait_s, read_only=read_only)
    if provenance:
        untrusted_shell(deployment)
    deployment.database_url = database_url
    deployment.channels = [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
    project = tmp_path / "project"
    project.mkdir()
    with live_server(deployment) as srv:
        install(project, srv.url, wait_s=wait_s, layer=layer)
        scene: Any = CursorScene(srv, slack, None, None)  # type: ignore[arg-type]
        scene.cursor = host(project, token)
        yield scene


def outcomes(s: Scene) -> list[tuple[str, str]]:
    return [(r["tool_name"], r["outcome"]) for r in s.audit()]


def test_an_ungated_call_runs_and_the_installed_hooks_fail_closed_and_fire(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    with cursor_scene(tmp_path, database_url, slack) as s:
        turn = s.shell("echo hi > plain.txt")
        assert turn.ran, turn.read
        assert run_lines(s.cursor.project / "plain.txt") == ["hi"]
        # hookgate saw the call before and after it ran: the hooks fired.
        assert outcomes(s) == [("Bash", "ok")]
        config = json.loads((s.cursor.project / ".cursor" / "hooks.json").read_text())
        entries = [e for event in config["hooks"].values() for e in event]
        assert len(entries) == 4 and all(e["failClosed"] is True for e in entries)
        checked = CliRunner().invoke(
            app, ["cursor", "install", "--agent", "coder", "--check", "--project",
                  str(s.cursor.project)], env={"HOOKGATE_TOKEN": TOKEN})
        assert checked.exit_code == 0, checked.output
        assert "ok: 4 hookgate hooks" in checked.output
        # An entry edited to fail open fails the check.
        path = s.cursor.project / ".cursor" / "hooks.json"
        config["hooks"]["preToolUse"][0]["failClosed"] = False
        path.write_text(json.dumps(config))
        checked = CliRunner().invoke(
            app, ["cursor", "install", "--agent", "coder", "--check", "--project",
                  str(s.cursor.project)], env={"HOOKGATE_TOKEN": TOKEN})
        assert checked.exit_code == 1 and "failClosed is not true" in checked.output


def test_a_denied_call_never_runs_and_the_reason_is_in_agent_message(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    with cursor_scene(tmp_path, database_url, slack, read_only=True) as s:
        turn = s.shell("touch denied.txt")
        assert not turn.ran and not (s.cursor.project / "denied.txt").exists()
        assert turn.denied is not None
        body = turn.denied.body
        assert body["permission"] == "deny" and "read-only" in body["agent_message"], body
        assert body["user_message"] == body["agent_message"]
        assert outcomes(s) == [("Bash", "blocked")]


def test_a_call_approved_within_the_hook_timeout_runs_once(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    with cursor_scene(tmp_path, database_url, slack) as s:
        finished = s.in_background(lambda: s.shell("echo yes >> approved.log"))  # type: ignore[arg-type,return-value]
        s.click("approve")
        turn: Any = finished()
        assert turn.ran, turn.read
        assert run_lines(s.cursor.project / "approved.log") == ["yes"]
        assert outcomes(s) == [("Bash", "ok")]


def test_a_rejected_call_never_runs(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    with cursor_scene(tmp_path, database_url, slack) as s:
        finished = s.in_background(lambda: s.shell("echo no >> rejected.log"))  # type: ignore[arg-type,return-value]
        s.click("reject")
        turn: Any = finished()
        assert not turn.ran and not (s.cursor.project / "rejected.log").exists()
        assert "rejected" in turn.denied.body["agent_message"], turn.denied.body


@pytest.mark.both_databases
@pytest.mark.parametrize("layer", ["tool", "shell-mcp"])
def test_a_call_approved_after_the_timeout_runs_once_on_the_identical_retry(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str,
        layer: str) -> None:
    command = "echo once >> late.log"
    with cursor_scene(tmp_path, database_url, slack, wait_s=0.5, layer=layer) as s:
        first = s.shell(command)
        assert not first.ran
        assert "pending: repeat the identical call after approval" in first.read, first.read
        s.click("approve")
        retry = s.shell(command)
        assert retry.ran, retry.read
        third = s.shell(command)
        # The approval covered one run: the third identical call asks anew.
        assert not third.ran, third.read
        assert run_lines(s.cursor.project / "late.log") == ["once"]
        assert outcomes(s).count(("Bash", "ok")) == 1, outcomes(s)


@pytest.mark.parametrize("mode", MODES)
def test_every_failure_of_hookgate_blocks_the_call(tmp_path: Path, mode: str) -> None:
    # A 200 that is no decision: Cursor reads a missing permission as an allow.
    with failing_hookgate(mode, "/api/cursor/hooks", JSONResponse({"continue": True})) as url:
        install(tmp_path, url, wait_s=0.5)
        cursor = host(tmp_path)
        for entry in cursor.entries("preToolUse"):
            # Without failClosed the hook's own deny still holds: it never fails open.
            answer = cursor.run_hook({**entry, "failClosed": False}, {
                "hook_event_name": "preToolUse", "conversation_id": "c1",
                "tool_name": "Shell", "tool_input": {"command": "touch ran.txt"},
                "tool_use_id": "t1"})
            assert not answer.allowed and answer.failed is None, (mode, answer)
            assert answer.reason.startswith("hookgate"), answer.reason
        if mode != "hung":  # (its hooks each take curl's whole deadline)
            turn = cursor.shell("touch ran.txt")
            assert not turn.ran and not (tmp_path / "ran.txt").exists(), (mode, turn)


def test_a_bad_token_blocks_the_call(tmp_path: Path, database_url: str, slack: FakeSlack,
                                     secrets_key: str) -> None:
    with cursor_scene(tmp_path, database_url, slack, token="tok-not-a-token") as s:
        turn = s.shell("touch ran.txt")
        assert not turn.ran and not (s.cursor.project / "ran.txt").exists()
        assert turn.read.startswith("hookgate (HTTP 401)"), turn.read
        assert s.requests() == []


def test_install_keeps_other_hooks_and_uninstall_removes_only_hookgates(
        tmp_path: Path) -> None:
    path = tmp_path / ".cursor" / "hooks.json"
    path.parent.mkdir()
    mine = {"command": "./audit.sh", "matcher": "Shell"}
    path.write_text(json.dumps({"version": 1, "hooks": {"preToolUse": [mine],
                                                        "stop": [{"command": "./s.sh"}]}}))
    install(tmp_path, "http://127.0.0.1:8000", wait_s=20)
    install(tmp_path, "http://127.0.0.1:8000", wait_s=20, layer="shell-mcp")  # replaces
    config = json.loads(path.read_text())
    assert config["hooks"]["preToolUse"] == [mine]
    assert sorted(config["hooks"]) == ["afterShellExecution", "beforeMCPExecution",
                                       "beforeShellExecution", "beforeSubmitPrompt",
                                       "preToolUse", "sessionStart", "stop"]
    done = CliRunner().invoke(app, ["cursor", "uninstall", "--project", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert json.loads(path.read_text()) == {"version": 1, "hooks": {
        "preToolUse": [mine], "stop": [{"command": "./s.sh"}]}}
    checked = CliRunner().invoke(app, ["cursor", "install", "--agent", "coder", "--check",
                                       "--project", str(tmp_path)])
    assert checked.exit_code == 1 and "no hookgate hook before a tool" in checked.output


@pytest.mark.both_databases
def test_cursors_mcp_and_shell_names_meet_hookgates_rules(
        database_url: str, slack: FakeSlack, secrets_key: str, tmp_path: Path) -> None:
    import httpx

    with cursor_scene(tmp_path, database_url, slack, wait_s=0.3) as s:
        def post(body: dict[str, Any]) -> httpx.Response:
            return httpx.post(f"{s.srv.url}/api/cursor/hooks", params={"agent": "coder"},
                              json={"conversation_id": "c-9", "generation_id": "g-1",
                                    "workspace_roots": ["/work/repo"], **body},
                              headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)

        mcp = {"tool_name": "MCP:git:status", "tool_input": {"repo": "."},
               "tool_use_id": "t-1"}
        allowed = post({"hook_event_name": "preToolUse", **mcp})
        assert (allowed.status_code, allowed.text) == (200, '{"permission":"allow"}')
        done = post({"hook_event_name": "postToolUse", **mcp,
                     "tool_output": json.dumps({"clean": True})})
        assert (done.status_code, done.text) == (200, "{}")
        assert outcomes(s) == [("mcp__git__status", "ok")]
        # beforeMCPExecution: tool_input is a JSON string.
        granular = post({"hook_event_name": "beforeMCPExecution", "tool_name": "git:status",
                         "tool_input": json.dumps({"repo": "."})})
        assert granular.text == '{"permission":"allow"}', granular.text
        gated = post({"hook_event_name": "beforeShellExecution", "command": "echo >> x.log",
                      "cwd": "", "sandbox": False})
        answer = gated.json()
        assert answer["permission"] == "deny" and "pending" in answer["agent_message"]
        [request] = s.requests()
        assert request["payload"]["tool_name"] == "Bash"
        assert request["payload"]["args"]["command"] == "echo >> x.log"
        for bad, words in [({"hook_event_name": "stop"}, "hook_event_name"),
                           ({"hook_event_name": "preToolUse", "tool_name": "Shell"},
                            "tool_input")]:
            refused = post(bad)
            assert refused.status_code == 403 and words in refused.text, refused.text


def test_the_users_prompt_is_the_sessions_request_so_the_address_it_gave_is_not_untrusted(
        tmp_path: Path, database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    from tests.coding_agents.test_codex_cli import INBOX, PROMPT

    with cursor_scene(tmp_path, database_url, slack, wait_s=0.5, provenance=True) as s:
        (s.cursor.project / "inbox.txt").write_text(INBOX)
        assert s.cursor.prompt(PROMPT).body == {"continue": True}
        assert s.shell("cat inbox.txt").ran
        assert s.shell("echo ops@example.org >> sent.txt").ran
        turn = s.shell("echo mallory@evil-mail.test >> sent.txt")
        assert not turn.ran and "pending" in turn.read, turn.read
        assert run_lines(s.cursor.project / "sent.txt") == ["ops@example.org"]
