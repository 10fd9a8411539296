"""``hookgate copilot install`` / ``uninstall`` and the hook command they write, without a
model: other hook files and other hooks in hookgate's file are kept, installing twice leaves
one set, uninstall removes only hookgate's, and every failure of the hook command is a deny
whose body Copilot can read (exit 2 as well) whatever the server's text holds."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from typer.testing import CliRunner

from hookgate.cli.main import app
from tests.coding_agents.copilot_cli import CopilotRun
from tests.coding_agents.copilot_scene import install
from tests.fakes.server import LoopbackServer

THEIRS = {"type": "command", "bash": "echo theirs >/dev/null", "timeoutSec": 5}


def test_install_keeps_other_hooks_and_uninstall_removes_only_its_own(tmp_path: Path) -> None:
    cli = CopilotRun(tmp_path / "project", tmp_path / "home", "http://127.0.0.1:9/v1")
    hooks_dir = cli.project / ".github" / "hooks"
    hooks_dir.mkdir(parents=True)
    other = hooks_dir / "team.json"
    other.write_text(json.dumps({"version": 1, "hooks": {"preToolUse": [THEIRS]}}))
    target = hooks_dir / "hookgate.json"
    target.write_text(json.dumps({"version": 1, "hooks": {"preToolUse": [THEIRS],
                                                          "sessionEnd": [THEIRS]}}))
    for _ in range(2):
        out = install(cli, "http://127.0.0.1:8000/api", wait_s=20)
    assert "GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true" in out
    config = json.loads(target.read_text())
    assert config["version"] == 1
    hooks = config["hooks"]
    assert hooks["sessionEnd"] == [THEIRS] and hooks["preToolUse"][0] == THEIRS
    assert [len(hooks[e]) for e in ("preToolUse", "postToolUse", "sessionStart")] == [2, 1, 1]
    ours = hooks["preToolUse"][1]
    assert ours["timeoutSec"] == 31  # 20 + 6 for curl + 5
    assert "http://127.0.0.1:8000/api/copilot/hooks?agent=coder&event=preToolUse" in \
        ours["bash"]

    done = CliRunner().invoke(app, ["copilot", "uninstall", "--project", str(cli.project)])
    assert done.exit_code == 0, done.output
    assert json.loads(target.read_text()) == {"version": 1, "hooks": {
        "preToolUse": [THEIRS], "sessionEnd": [THEIRS]}}
    assert json.loads(other.read_text()) == {"version": 1, "hooks": {"preToolUse": [THEIRS]}}
    # A file holding only hookgate's hooks goes with them.
    install(cli, "http://127.0.0.1:8000", wait_s=20)
    target.write_text(json.dumps({"version": 1, "hooks": {
        e: [h for h in hs if h != THEIRS] for e, hs in json.loads(
            target.read_text())["hooks"].items() if e != "sessionEnd"}}))
    assert CliRunner().invoke(app, ["copilot", "uninstall", "--project",
                                    str(cli.project)]).exit_code == 0
    assert not target.exists()


def _answering(status: int, body: str) -> Starlette:
    async def answer(request: Request) -> Response:
        await request.body()
        if status == 200:
            return Response(body, media_type="application/json")
        return PlainTextResponse(body, status_code=status)
    return Starlette(routes=[Route("/api/copilot/hooks", answer, methods=["POST"])])


def test_every_failure_of_the_hook_command_prints_a_deny_copilot_reads_and_exits_2(
        tmp_path: Path) -> None:
    cli = CopilotRun(tmp_path / "project", tmp_path / "home", "http://127.0.0.1:9/v1")
    hostile = 'no "quote\\" \\\\ or\nnew line}{\t\x01 survives'
    for status, body in [(500, hostile), (401, hostile), (403, hostile), (200, hostile),
                         (200, '{"permissionDecision": "allow"}'), (200, "")]:
        fake = LoopbackServer(_answering(status, body))
        url = fake.start()
        try:
            install(cli, url, wait_s=0.3)
            pre = json.loads((cli.project / ".github/hooks/hookgate.json").read_text()
                             )["hooks"]["preToolUse"][0]["bash"]
            done = subprocess.run(["sh", "-c", pre], input='{"sessionId":"s"}', text=True,
                                  capture_output=True, timeout=30)
        finally:
            fake.stop()
        assert done.returncode == 2, (status, body, done)
        answer = json.loads(done.stdout)
        assert answer["permissionDecision"] == "deny", (status, body)
        reason = answer["permissionDecisionReason"]
        assert reason.startswith("hookgate: ") and "\n" not in reason, reason
        if status != 200:
            assert "survives" in reason, reason
    # hookgate's own deny passes as it is, with exit 2 as well.
    deny = '{"permissionDecision":"deny","permissionDecisionReason":"no \\"pushes\\""}'
    fake = LoopbackServer(_answering(200, deny))
    url = fake.start()
    try:
        install(cli, url, wait_s=0.3)
        pre = json.loads((cli.project / ".github/hooks/hookgate.json").read_text()
                         )["hooks"]["preToolUse"][0]["bash"]
        done = subprocess.run(["sh", "-c", pre], input="{}", text=True, capture_output=True,
                              timeout=30)
    finally:
        fake.stop()
    assert (done.returncode, done.stdout) == (2, deny + "\n")
