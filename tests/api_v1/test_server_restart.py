"""A real `hookgate serve` stops while a guarded call waits for a person: the waiting client
learns hookgate is unreachable (the tool does not run), and after the restart and the
decision the call runs exactly once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx

from hookgate.client import Allowed, AlreadyRan, Client, GuardUnavailable, Pending
from tests.instances import Instance

CONFIG = """
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme, name: ACME}}]
users:
  - {{id: alice, org: acme, admin: true, token: tok-alice}}
  - {{id: bot, org: acme, token: tok-bot}}
models: {{none: {{type: scripted, turns: [{{answer: "-"}}]}}}}
agents:
  - id: payer
    org: acme
    owner: alice
    model: none
    confirmation_approver_scope: agent_owner
    model_config_json:
      hooks: {{class_hooks: [audit_log]}}
      guarded_calls: {{rules: [{{matcher: transfer, requires_confirmation: true}}]}}
"""


def test_a_call_waiting_while_the_server_restarts_runs_once_after_the_decision(
        tmp_path: Path) -> None:
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(db=tmp_path / "hookgate.db"))
    server = Instance("serve", config, tmp_path)
    server.spawn()
    try:
        server.wait_up()
        guard = Client(server.url, "tok-bot", framework="langgraph", timeout=5)
        asked = guard.before_call(agent="payer", session_id="s", call_id="c1",
                                  tool="transfer", arguments={"amount": 5, "to": "bob"})
        assert isinstance(asked, Pending)
        box: dict[str, Any] = {}

        def wait() -> None:
            try:
                box["verdict"] = guard.wait(asked.call, timeout=60)
            except GuardUnavailable as exc:
                box["error"] = exc

        waiter = threading.Thread(target=wait)
        waiter.start()
        server.kill()
        waiter.join(30)
        assert "unreachable" in str(box["error"]) and "does not run" in str(box["error"])
        server.spawn()
        server.wait_up()
        r = httpx.post(f"{server.url}/api/confirmations/{asked.request_id}/respond",
                       json={"decision": "approve"},
                       headers={"Authorization": "Bearer tok-alice"})
        assert r.status_code == 200, r.text
        ran = 0
        for _ in range(2):  # the client asks twice (it replays after a crash): runs once
            verdict = guard.wait(asked.call, timeout=10)
            if isinstance(verdict, Allowed):
                ran += 1
                guard.report(verdict.call, output="sent 5 to bob")
            else:
                assert verdict == AlreadyRan(asked.call, "sent 5 to bob")
        assert ran == 1
        guard.close()
    finally:
        server.stop()
