"""One hookgate for the framework adapters' tests: a configuration file, a real server on it
(tests/live_server.py) and the inbox calls a person makes.

Agent ``buyer`` (org acme): ``pay`` and ``refund`` need a person's approval, the output of
``lookup_card`` is redacted by a PostToolUse hook, a PreToolUse hook caps a ``tip`` at 5
(hookgate's rewritten arguments), a SessionStart hook gives the model the house rules,
every call is audited. Agent
``archivist`` belongs to the read-only org ``frozen``: its writes are blocked.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate.config import load_config
from hookgate.runtime.deployment import deployment_from_config
from tests.live_server import LiveServer, live_server

TOKEN = "tok-alice"
CARD = "4111 1111 1111 1111"

CONFIG = """
database: {database}
orgs:
  - {{id: acme, name: ACME, read_only: false}}
  - {{id: frozen, name: Frozen, read_only: true}}
users:
  - {{id: alice, org: acme, admin: true, name: Alice, token: {token}}}
  - {{id: bob, org: frozen, admin: true, name: Bob, token: tok-bob}}
models:
  none: {{type: scripted, turns: [{{answer: "-"}}]}}
agents:
  - id: buyer
    name: Buyer
    org: acme
    owner: alice
    model: none
    instructions: "-"
    tools: []
    confirmation_mode: inline_only
    model_config_json:
      hooks:
        class_hooks: [readonly_guard, audit_log]
        python_hooks:
          - {{event: PostToolUse, matcher: lookup_card,
              function: "tests.integrations.scene:redact_card"}}
          - {{event: PreToolUse, matcher: tip, function: "tests.integrations.scene:cap_tip"}}
          - {{event: SessionStart, function: "tests.integrations.scene:house_rules"}}
      guarded_calls:
        rules:
          - {{matcher: "pay, refund", requires_confirmation: true}}
          - {{matcher: "lookup_card, tip, charge, delegate_work_to_coworker, refunder",
              writes: false}}
  - id: archivist
    name: Archivist
    org: frozen
    owner: bob
    model: none
    instructions: "-"
    tools: []
    model_config_json:
      hooks:
        class_hooks: [readonly_guard, audit_log]
"""


def redact_card(data: dict[str, Any]) -> dict[str, Any] | None:
    """PostToolUse: card numbers never reach the model."""
    text = str(data.get("tool_response"))
    if CARD not in text:
        return None
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                   "updatedToolOutput": text.replace(CARD, "[card]")}}


HOUSE_RULES = "House rule: we only ever pay ACME."


def house_rules(data: dict[str, Any]) -> dict[str, Any]:
    """SessionStart: the house rules, for the model."""
    return {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                   "additionalContext": HOUSE_RULES}}


def cap_tip(data: dict[str, Any]) -> dict[str, Any] | None:
    """PreToolUse: a tip above 5 is cut to 5 (the call runs with rewritten arguments)."""
    args = dict(data.get("tool_input") or {})
    if int(args.get("amount", 0)) <= 5:
        return None
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                   "updatedInput": {**args, "amount": 5}}}


def write_config(folder: Path) -> Path:
    path = folder / "hookgate.yaml"
    path.write_text(CONFIG.format(database=f"sqlite+aiosqlite:///{folder / 'hookgate.db'}",
                                  token=TOKEN))
    return path


@contextmanager
def server(folder: Path) -> Iterator[LiveServer]:
    with live_server(deployment_from_config(load_config(write_config(folder)))) as srv:
        yield srv


@pytest.fixture(scope="module")
def srv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[LiveServer]:
    """The scene's server, one per test module."""
    with server(tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2])) as live:
        yield live


@pytest.fixture
def empty_inbox(srv: LiveServer) -> Iterator[None]:
    """After the test, every request still pending is rejected (the next test starts clean)."""
    yield
    reject_pending(srv)


def _api(srv: LiveServer, method: str, path: str, **kw: Any) -> Any:
    r = httpx.request(method, f"{srv.url}{path}", headers={"Authorization": f"Bearer {TOKEN}"},
                      timeout=30, **kw)
    assert r.status_code == 200, r.text
    return r.json()


def decide(srv: LiveServer, request_id: str, decision: str, **body: Any) -> None:
    """A person answers a request in the inbox (approve / reject, arguments to edit)."""
    _api(srv, "POST", f"/api/confirmations/{request_id}/respond",
         json={"decision": decision, **body})


def pending_request(srv: LiveServer, tool: str) -> dict[str, Any]:
    """The one pending request for ``tool``, once it reaches the inbox."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = [r for r in _api(srv, "GET", "/api/confirmations", params={"status": "pending"})
                 if r["payload"]["tool_name"] == tool]
        if found:
            return dict(found[0])
        time.sleep(0.02)
    raise AssertionError(f"no pending request for {tool!r} reached the inbox")


def reject_pending(srv: LiveServer) -> None:
    """Leave the inbox empty for the next test: every pending request is rejected."""
    for request in _api(srv, "GET", "/api/confirmations", params={"status": "pending"}):
        decide(srv, request["id"], "reject", reason="the test is over")


def audit_rows(srv: LiveServer) -> list[dict[str, Any]]:
    return list(_api(srv, "GET", "/api/audit", params={"limit": 200})["items"])

