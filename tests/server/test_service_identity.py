"""People decide, machines do not: a service (agent) identity's token never approves, rejects,
votes, batch-decides or creates a standing rule, under any approver scope, even its own
gated call and even with an admin flag; every decision path refuses it with 403 and says
why, and a person's token still decides."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from hookgate.approvals.quorum import QuorumRule
from hookgate.runtime.deployment import ChannelSpec, Deployment, UserSpec, token_digest
from hookgate.storage.users import sync_declared_users
from tests.fakes.slack import FakeSlack
from tests.live_server import live_server
from tests.portal.steps import WAIT_S, wait_finished
from tests.server.demo_world import auth, world

BOT_TOKEN = "tok-buyer-bot"
BOT = {"Authorization": f"Bearer {BOT_TOKEN}"}
SAID = "service (agent) identity"


def _with_bot(deployment: Deployment, *, admin: bool = False, **chat: Any) -> Deployment:
    """``deployment`` with the agent's service identity ``buyer-bot`` in org acme (``admin``:
    a record an admin flag was forced onto, which the file refuses, still never decides)."""
    bot = UserSpec("buyer-bot", "acme", admin=admin, token_sha256=token_digest(BOT_TOKEN),
                   service=True, **chat)
    return dataclasses.replace(deployment, users=[*deployment.users, bot])


def pending_of(c: httpx.Client, n: int) -> list[dict[str, Any]]:
    """The org's ``n`` requests (any status) by call id, once there are ``n``."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = c.get("/api/confirmations", headers=auth("alice")).json()
        if len(found) == n:
            return sorted(found, key=lambda r: r["tool_call_id"])
        time.sleep(0.05)
    raise AssertionError(f"{n} requests did not appear")


def _respond(c: httpx.Client, request_id: str, headers: dict[str, str],
             decision: str = "approve", **extra: Any) -> httpx.Response:
    return c.post(f"/api/confirmations/{request_id}/respond",
                  json={"decision": decision, **extra}, headers=headers)


def _refused(r: httpx.Response) -> None:
    assert r.status_code == 403, r.text
    assert SAID in r.text and "buyer-bot" in r.text, r.text


@pytest.mark.both_databases
@pytest.mark.parametrize(("scope", "admin"), [("initiator", False), ("org_members", True),
                                              ("agent_owner", False)])
def test_a_service_token_decides_nothing_on_any_path(database_url: str, scope: str,
                                                     admin: bool) -> None:
    turns = [{"tool_calls": [
        {"id": "p1", "name": "oa__purchase_pay", "args": {"amount": 60000, "vendor": "A"}},
        {"id": "p2", "name": "oa__purchase_pay", "args": {"amount": 70000, "vendor": "B"}},
    ]}, {"answer": "done"}]
    deployment, bank = world(database_url, turns=turns, scope=scope)
    deployment = _with_bot(deployment, admin=admin)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        # The agent's own token starts the run: under ``initiator`` it is the requester.
        started = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                         headers=BOT)
        assert started.status_code == 200, started.text
        run_id = started.json()["run_id"]
        p1, p2 = pending_of(c, 2)
        shown = c.get(f"/api/confirmations/{p1['id']}", headers=BOT).json()
        assert (shown["can_decide"], shown["can_approve"]) == (False, False)

        for decision in ("approve", "reject"):
            _refused(_respond(c, p1["id"], BOT, decision))
        _refused(_respond(c, p1["id"], BOT, remember={"scope": "run"}))
        _refused(c.post("/api/confirmations/batch", headers=BOT,
                        json={"ids": [p1["id"], p2["id"]], "decision": "approve"}))
        _refused(c.post("/api/approval-rules", headers=BOT, json={
            "agent_id": "buyer", "tool_name": "oa__purchase_pay", "scope": "org"}))
        cli = subprocess.run(
            [sys.executable, "-m", "hookgate.cli.main", "approvals", "approve", p1["id"],
             "--url", srv.url, "--token", BOT_TOKEN], capture_output=True, text=True,
            timeout=60)
        said = " ".join((cli.stdout + cli.stderr).split())
        assert cli.returncode != 0 and SAID in said, said
        assert c.get("/api/approval-rules", headers=auth("alice")).json() == []
        assert [r["status"] for r in pending_of(c, 2)] == ["pending", "pending"]
        assert bank.payments == []

        # A person still decides: the owner, in every scope but ``initiator``, where the
        # bot started the run and acts for nobody, so only an escalation could add someone.
        if scope == "initiator":
            assert _respond(c, p1["id"], auth("olivia")).status_code == 403
        else:
            for p in (p1, p2):
                assert _respond(c, p["id"], auth("olivia")).status_code == 200
            assert wait_finished(c, run_id) == "completed"
            assert len(bank.payments) == 2


@pytest.mark.both_databases
def test_a_service_vote_never_counts_towards_a_quorum(database_url: str) -> None:
    turns = [{"tool_calls": [{"id": "big", "name": "oa__purchase_pay",
                              "args": {"amount": 600000, "vendor": "ACME"}}]},
             {"answer": "done"}]
    deployment, bank = world(database_url, turns=turns, scope="org_members")
    deployment = _with_bot(dataclasses.replace(deployment, agents={"buyer": dataclasses.replace(
        deployment.agents["buyer"], approval_quorum=(QuorumRule.parse(
            "oa__purchase_pay", "args.amount > 500000", 2, None),))}))
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                        headers=auth("alice")).json()["run_id"]
        [req] = pending_of(c, 1)
        _refused(_respond(c, req["id"], BOT))
        # bob votes, then the file turns bob into a service identity: his vote no longer
        # counts, and olivia's alone does not reach two.
        assert _respond(c, req["id"], auth("bob")).json()["approvals"]["count"] == 1
        users = [dataclasses.replace(u, service=True) if u.id == "bob" else u
                 for u in deployment.users]
        srv.call(sync_declared_users(srv.runtime.db, users))
        shown = c.get(f"/api/confirmations/{req['id']}", headers=auth("alice")).json()
        assert shown["approvals"]["count"] == 0
        assert SAID in shown["approvals"]["no_longer_counting"][0]["no_longer_counts"]
        r = _respond(c, req["id"], auth("olivia"))
        assert r.status_code == 200 and r.json()["status"] == "pending", r.text
        assert bank.payments == []
        assert _respond(c, req["id"], auth("alice")).json()["status"] == "approved"
        assert wait_finished(c, run_id) == "completed"


@pytest.mark.both_databases
def test_a_chat_click_by_a_service_identity_is_refused(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from hookgate.runtime.channel_records import SECRETS_KEY_ENV, SecretsKey
    from tests.channels import world as chat

    monkeypatch.setenv(SECRETS_KEY_ENV, SecretsKey.generate())
    with FakeSlack() as slack:
        channels = [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
        deployment, bank = chat.world(database_url, channels, approval_channel_id="ops-slack",
                                      scope="org_members")
        deployment = _with_bot(deployment, slack_user_id="U_BOT")

        async def scene() -> None:
            with live_server(deployment) as srv:
                async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
                    run_id = await chat.start_run(client)
                    await chat.eventually(lambda: slack.messages, "the approval card")
                    pending = await chat.delivered_request(srv, client)
                    click = slack.block_action(pending["id"], "approve", "U_BOT")
                    reply = await click.send(client, chat.callback_url("ops-slack"))
                    assert reply.status_code == 200, reply.text
                    record = (await client.get(f"/api/confirmations/{pending['id']}",
                                               headers=chat.auth("alice"))).json()
                    assert record["status"] == "pending", record
                    assert bank.transfers == []
                    ok = slack.block_action(pending["id"], "approve", "U_OLIVIA")
                    assert (await ok.send(client, chat.callback_url("ops-slack"))
                            ).status_code == 200
                    assert (await chat.finished_run(client, run_id))["status"] == "completed"

        asyncio.run(scene())
    assert len(bank.transfers) == 1


@pytest.mark.both_databases
def test_a_service_token_neither_revokes_nor_enables_a_persons_rule(
        database_url: str) -> None:
    deployment, _bank = world(database_url, scope="org_members")
    with live_server(_with_bot(deployment)) as srv, \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        made = c.post("/api/approval-rules", headers=auth("olivia"), json={
            "agent_id": "buyer", "tool_name": "oa__purchase_pay", "scope": "org"})
        assert made.status_code == 201, made.text
        rule = made.json()["id"]
        _refused(c.delete(f"/api/approval-rules/{rule}", headers=BOT))
        _refused(c.post(f"/api/approval-rules/{rule}/enable", headers=BOT))
        shown = c.get(f"/api/approval-rules/{rule}", headers=auth("alice")).json()
        assert shown["revoked_at"] is None
