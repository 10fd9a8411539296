"""An agent's ``approver_groups``: only people whose identity-provider groups (as read at
their last sign-in or re-check) include one of them decide its requests, on top of the
approver scope, on every path (the inbox's cookie session, the API with a session or a
token, a chat click); a person with no provider identity is in no group. SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from hookgate.approvals.quorum import QuorumRule
from hookgate.runtime.channel_records import SECRETS_KEY_ENV, SecretsKey
from hookgate.runtime.deployment import ChannelSpec
from hookgate.storage.database import Database
from hookgate.storage.tables import OidcIdentity
from tests.live_server import LiveServer, free_port, live_server
from tests.oidc.provider import MockProvider, mock_provider, sign_in
from tests.oidc.world import ALICE_ORG, oidc_world, pending_request
from tests.portal.steps import wait_finished
from tests.server.demo_world import Ledger, auth

pytestmark = pytest.mark.both_databases

FINANCE = {**ALICE_ORG, "groups": ["approvers", "finance"]}
RECHECK_S = 1.0


@contextmanager
def serving(database_url: str, idp: MockProvider, agent: dict[str, Any] | None = None,
            **overrides: Any) -> Iterator[tuple[LiveServer, Ledger]]:
    """The sign-in world with the buyer's requests decided only by the ``finance`` group."""
    port = free_port()
    deployment, bank = oidc_world(database_url, idp, port, **overrides)
    buyer = dataclasses.replace(deployment.agents["buyer"], approver_groups=("finance",),
                                **(agent or {}))
    deployment = dataclasses.replace(deployment, agents={"buyer": buyer})
    with live_server(deployment, port=port) as srv:
        yield srv, bank


def _csrf(c: httpx.Client) -> str:
    return str(c.get("/auth/session").json()["csrf_token"])


def _respond(c: httpx.Client, request_id: str, **headers: str) -> httpx.Response:
    return c.post(f"/api/confirmations/{request_id}/respond", json={"decision": "approve"},
                  headers=headers)


def test_only_people_in_the_agents_approver_groups_decide(database_url: str) -> None:
    with mock_provider() as idp, serving(database_url, idp) as (srv, bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("dave-sub", ALICE_ORG)  # may sign in (approvers), not in finance
        idp.set_user("carol-sub", FINANCE)
        request = pending_request(c)
        # Outside the group: refused in the inbox (cookie session + CSRF) ...
        with httpx.Client(base_url=srv.url, timeout=20) as dave:
            assert sign_in(dave, "dave-sub").status_code == 302
            got = _respond(dave, request["id"], **{"X-CSRF-Token": _csrf(dave)})
            assert got.status_code == 403, got.text
            assert "approver groups (finance)" in got.text
            # ... and through the API with the session as a bearer token (the CLI's way).
            session = dave.cookies.get("hookgate_session")
            assert session
        with httpx.Client(base_url=srv.url, timeout=20) as cli:
            got = _respond(cli, request["id"], Authorization=f"Bearer {session}")
            assert got.status_code == 403, got.text
        # A person with an API token and no provider identity is in no group (the scope,
        # org_members, would let alice decide).
        got = _respond(c, request["id"], **auth("alice"))
        assert got.status_code == 403, got.text
        assert "does not sign in through the identity provider" in got.text
        shown = c.get(f"/api/confirmations/{request['id']}", headers=auth("alice")).json()
        assert shown["status"] == "pending" and bank.payments == []
        # In the group: decides.
        with httpx.Client(base_url=srv.url, timeout=20) as carol:
            assert sign_in(carol, "carol-sub").status_code == 302
            done = _respond(carol, request["id"], **{"X-CSRF-Token": _csrf(carol)})
            assert done.status_code == 200, done.text
            assert done.json()["status"] == "approved"


def test_groups_changed_at_the_provider_count_after_the_next_recheck(
        database_url: str) -> None:
    with mock_provider() as idp, serving(database_url, idp,
                                         access_recheck_s=RECHECK_S) as (srv, _bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", FINANCE)
        request = pending_request(c)
        assert sign_in(c, "carol-sub").status_code == 302
        csrf = _csrf(c)
        # The provider takes carol out of finance (she still may sign in: approvers).
        idp.set_user("carol-sub", ALICE_ORG)
        time.sleep(RECHECK_S * 1.5)
        got = _respond(c, request["id"], **{"X-CSRF-Token": csrf})
        assert got.status_code == 403, got.text
        assert "none of the agent's approver groups" in got.text
        # Put back: after the next re-check she decides.
        idp.set_user("carol-sub", FINANCE)
        time.sleep(RECHECK_S * 1.5)
        done = _respond(c, request["id"], **{"X-CSRF-Token": csrf})
        assert done.status_code == 200, done.text


def test_a_vote_stops_counting_once_its_voter_left_the_groups(database_url: str) -> None:
    two = {"approval_quorum": (QuorumRule.parse("*", None, 2, None),)}
    with mock_provider() as idp, serving(database_url, idp, two,
                                         access_recheck_s=RECHECK_S) as (srv, bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", FINANCE)
        idp.set_user("dave-sub", FINANCE)
        request = pending_request(c)
        with httpx.Client(base_url=srv.url, timeout=20) as carol, \
                httpx.Client(base_url=srv.url, timeout=20) as dave:
            assert sign_in(carol, "carol-sub").status_code == 302
            assert sign_in(dave, "dave-sub").status_code == 302
            voted = _respond(carol, request["id"], **{"X-CSRF-Token": _csrf(carol)})
            assert voted.status_code == 200 and voted.json()["status"] == "pending"
            # carol leaves finance; her next request's re-check reads her groups again.
            idp.set_user("carol-sub", ALICE_ORG)
            time.sleep(RECHECK_S * 1.5)
            assert carol.get("/api/confirmations").status_code == 200
            second = _respond(dave, request["id"], **{"X-CSRF-Token": _csrf(dave)})
            assert second.status_code == 200, second.text
            # Only dave's vote counts now: one of two.
            assert second.json()["status"] == "pending", second.json()
        assert bank.payments == []


def _run(c: httpx.Client) -> str:
    started = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"},
                     headers=auth("alice"))
    assert started.status_code == 200, started.text
    return str(started.json()["run_id"])


def test_a_standing_rule_stands_only_while_its_creator_is_in_the_groups(
        database_url: str) -> None:
    with mock_provider() as idp, serving(database_url, idp,
                                         access_recheck_s=RECHECK_S) as (srv, bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        idp.set_user("carol-sub", FINANCE)
        rule = {"agent_id": "buyer", "tool_name": "oa__purchase_pay", "scope": "org"}
        # alice (an API token, no provider identity) may not create one.
        made = c.post("/api/approval-rules", json=rule, headers=auth("alice"))
        assert made.status_code == 403, made.text
        assert "does not sign in through the identity provider" in made.text
        assert sign_in(c, "carol-sub").status_code == 302
        made = c.post("/api/approval-rules", json=rule, headers={"X-CSRF-Token": _csrf(c)})
        assert made.status_code == 201, made.text
        # carol's rule approves the call: it runs without asking anyone.
        assert wait_finished(c, _run(c)) == "completed"
        assert len(bank.payments) == 1
        # carol leaves finance; once re-checked, her rule no longer stands in for anyone.
        idp.set_user("carol-sub", ALICE_ORG)
        time.sleep(RECHECK_S * 1.5)
        assert c.get("/api/confirmations").status_code == 200
        _run(c)
        assert pending_request(c)["status"] == "pending"
        assert len(bank.payments) == 1


async def _in_finance(db: Database, user_id: str) -> None:
    """``user_id`` signed in through a provider that put them in ``finance``."""
    async with db.transaction() as s:
        s.add(OidcIdentity(issuer="https://idp.example", subject=f"{user_id}-sub",
                           user_id=user_id, groups=["finance"]))


def test_a_chat_click_by_someone_outside_the_groups_is_refused(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.channels import world as chat
    from tests.fakes.slack import FakeSlack

    monkeypatch.setenv(SECRETS_KEY_ENV, SecretsKey.generate())
    with FakeSlack() as slack:
        channels = [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
        deployment, bank = chat.world(database_url, channels, approval_channel_id="ops-slack",
                                      scope="org_members",
                                      agent_options={"approver_groups": ("finance",)})

        async def scene() -> None:
            with live_server(deployment) as srv:
                async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
                    run_id = await chat.start_run(client)
                    await chat.eventually(lambda: slack.messages, "the approval card")
                    pending = await chat.delivered_request(srv, client)
                    # bob has no provider identity: in no group.
                    click = slack.block_action(pending["id"], "approve", "U_BOB")
                    reply = await click.send(client, chat.callback_url("ops-slack"))
                    assert reply.status_code == 200, reply.text
                    record = (await client.get(f"/api/confirmations/{pending['id']}",
                                               headers=chat.auth("alice"))).json()
                    assert record["status"] == "pending", record
                    assert bank.transfers == []
                    # olivia signed in through the provider, which put her in finance.
                    srv.call(_in_finance(srv.runtime.db, "olivia"))
                    ok = slack.block_action(pending["id"], "approve", "U_OLIVIA")
                    assert (await ok.send(client, chat.callback_url("ops-slack"))
                            ).status_code == 200
                    assert (await chat.finished_run(client, run_id))["status"] == "completed"

        asyncio.run(scene())
    assert len(bank.transfers) == 1
