"""A hookgate server whose agent ``coder`` is the approval backend of a real Claude Code.

Bash commands that write ``*.log`` files need a person's approval (a ``claude_code`` gate
rule); approvals go to the fake Slack; every attempt is audited. ``Scene`` runs the real
CLI in a project whose settings were written by ``hookgate claude-code install``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from hookgate import Agent, ScriptedLLM
from hookgate.approvals.delivery_claims import is_delivery_claim
from hookgate.cli.main import app
from hookgate.runtime.deployment import ChannelSpec, Deployment, OrgSpec, UserSpec, token_digest
from tests.card_guard import CARD_NUMBER_GREP
from tests.claude_cli import ClaudeRun, Result
from tests.fakes.anthropic import FakeAnthropic, Script
from tests.fakes.slack import FakeSlack
from tests.live_server import LiveServer, live_server

TOKEN = "tok-dev-alice"
GATED = '".log" in args.command'
REASON = "log files are shared with the auditors"


#: Fails closed after any Bash call that printed a card number: the output is withheld.
CARD_GUARD = {"event": "PostToolUse", "matcher": "Bash", "name": "card_guard",
              "command": CARD_NUMBER_GREP}


def coder(wait_s: float, read_only: bool = False,
          extra_hooks: list[dict[str, Any]] | None = None,
          rules: list[dict[str, Any]] | None = None) -> Deployment:
    agent = Agent(
        id="coder", name="Claude Code of alice", instructions="", tools=[], org_id="acme",
        owner_user_id="alice", approval_channel_id="ops-slack",
        model_config_json={
            "hooks": {"class_hooks": ["audit_log", "readonly_guard"],
                      "command_hooks": [CARD_GUARD, *(extra_hooks or [])]},
            "claude_code": {"wait_s": wait_s, "rules": rules if rules is not None else [
                {"matcher": "Bash", "when": GATED, "requires_confirmation": True,
                 "reason": REASON}]},
        },
    )
    return Deployment(
        database_url="", orgs=[OrgSpec("acme", "ACME", read_only=read_only)],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest(TOKEN),
                        slack_user_id="U_ALICE")],
        agents={"coder": agent}, model_for=lambda _a: ScriptedLLM([{"answer": "-"}]),
        channels=[],
    )


@dataclass
class Scene:
    srv: LiveServer
    slack: FakeSlack
    cli: ClaudeRun
    api: FakeAnthropic

    def prompt(self, text: str = "go", **kw: Any) -> Result:
        return self.cli.prompt(text, env={"HOOKGATE_TOKEN": TOKEN}, **kw)

    def resume(self, session_id: str) -> Result:
        return self.cli.run("-p", "--resume", session_id, "--allowedTools", "Bash",
                            env={"HOOKGATE_TOKEN": TOKEN})

    def in_background(self, run: Callable[[], Result]) -> Callable[[], Result]:
        box: dict[str, Result] = {}
        thread = threading.Thread(target=lambda: box.update(r=run()), daemon=True)
        thread.start()

        def join() -> Result:
            thread.join(90)
            return box["r"]
        return join

    def card(self, count: int = 1) -> Any:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if len(self.slack.messages) >= count:
                return list(self.slack.messages.values())[count - 1]
            time.sleep(0.05)
        raise AssertionError(f"no approval card #{count} reached Slack")

    def click(self, decision: str, count: int = 1) -> None:
        message = self.card(count)
        request_id = _request_id(message)
        self._wait_delivery(request_id)
        cb = self.slack.block_action(request_id, decision, "U_ALICE", message_ts=message.ts)
        r = httpx.request(cb.method, f"{self.srv.url}/api/channels/ops-slack/callback",
                          headers=cb.headers, params=cb.query, content=cb.body)
        assert r.status_code == 200, r.text

    def _wait_delivery(self, request_id: str) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            request = self.srv.call(self.srv.runtime.approvals.store.get(request_id))
            ref = request.delivery_ref if request is not None else None
            if ref is not None and not is_delivery_claim(ref):
                return  # the card's own record, not the claim taken before sending it
            time.sleep(0.03)
        raise AssertionError(f"request {request_id} was never recorded as delivered")

    def audit(self) -> list[dict[str, Any]]:
        r = httpx.get(f"{self.srv.url}/api/audit", params={"limit": 100},
                      headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200, r.text
        return list(reversed(r.json()["items"]))

    def requests(self) -> list[dict[str, Any]]:
        r = httpx.get(f"{self.srv.url}/api/confirmations",
                      headers={"Authorization": f"Bearer {TOKEN}"})
        return list(r.json())


def _request_id(message: Any) -> str:
    for block in message.blocks or []:
        if block["type"] == "actions":
            return str(block["elements"][0]["value"])
    raise AssertionError("the card has no buttons")


@contextmanager
def scene(tmp_path: Path, database_url: str, slack: FakeSlack, script: Script, *,
          wait_s: float = 15.0, extra_hooks: list[dict[str, Any]] | None = None,
          rules: list[dict[str, Any]] | None = None) -> Iterator[Scene]:
    deployment = coder(wait_s, extra_hooks=extra_hooks, rules=rules)
    deployment.database_url = database_url
    deployment.channels = [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
    with live_server(deployment) as srv, FakeAnthropic(script) as api:
        cli = ClaudeRun(tmp_path / "project", tmp_path / "home", api.url)
        installed = CliRunner().invoke(app, ["claude-code", "install", "--agent", "coder",
                                             "--url", srv.url, "--project", str(cli.project)])
        assert installed.exit_code == 0, installed.output
        yield Scene(srv, slack, cli, api)


def run_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


__all__ = ["Scene", "run_lines", "scene"]
