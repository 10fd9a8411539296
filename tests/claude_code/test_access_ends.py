"""A Claude Code hook call waiting for a person lasts only while the developer keeps access:
their token revoked (by the CLI, another process) or their user moved to another org ends the
wait with a denial, its request is cancelled, and nothing runs — SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hookgate.storage.orgs import sync_orgs
from hookgate.storage.users import revoke_token, sync_declared_users
from tests.adversarial_tally import TALLY
from tests.claude_code.scene import TOKEN, coder
from tests.live_server import LiveServer, live_server

pytestmark = pytest.mark.both_databases

SESSION = "5f0c2a8e-1111-4222-8333-944455556667"


@pytest.fixture
def srv(database_url: str) -> Iterator[LiveServer]:
    deployment = coder(wait_s=300)  # a long hold: the developer waits for a person
    deployment.database_url = database_url
    agent = deployment.agents["coder"]
    agent.confirmation_mode = "inline_only"
    agent.approval_channel_id = None
    with live_server(deployment) as server:
        yield server


def pending(srv: LiveServer) -> list[Any]:
    return list(srv.call(srv.runtime.approvals.store.list_for_org(org_id="acme",
                                                                   status="pending")))


@pytest.mark.parametrize("how", ["revoked", "moved"])
def test_a_hook_call_waiting_for_approval_is_denied_once_the_developer_loses_access(
        srv: LiveServer, how: str) -> None:
    body = {"hook_event_name": "PreToolUse", "session_id": SESSION, "cwd": "/work/project",
            "permission_mode": "default", "tool_name": "Bash",
            "tool_input": {"command": "echo secret > out.log"}, "tool_use_id": f"toolu_{how}",
            "transcript_path": "/tmp/t.jsonl"}
    answer: dict[str, httpx.Response] = {}

    def ask() -> None:
        answer["r"] = httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "coder"},
                                 headers={"Authorization": f"Bearer {TOKEN}"}, json=body,
                                 timeout=120)

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not pending(srv):
        assert time.monotonic() < deadline, "the call never asked for approval"
        time.sleep(0.05)
    (request,) = pending(srv)
    if how == "revoked":
        srv.call(revoke_token(srv.runtime.db, "alice", by="cli"))
    else:
        (alice,) = srv.runtime.deployment.users
        srv.call(sync_orgs(srv.runtime.db, [("acme", "ACME", False), ("other", "Other", False)]))
        srv.call(sync_declared_users(srv.runtime.db, [dataclasses.replace(alice, org="other")]))
    thread.join(60)
    assert not thread.is_alive(), "the hook call outlived the developer's access"
    r = answer["r"]
    assert r.status_code == 200, r.text
    out = r.json()["hookSpecificOutput"]
    allowed = out["permissionDecision"] != "deny"
    TALLY.record(f"Claude Code call waiting for approval after the developer was {how}",
                 allowed)
    assert not allowed, out
    assert "access ended" in out["permissionDecisionReason"]
    after = srv.call(srv.runtime.approvals.store.get(request.id))
    assert after.status != "pending", after.status
