"""People decide, machines do not, on the guarded-call API: an agent's service identity asks
with ``acts_for`` naming the person its call acts for; that person is the call's initiator
(the request's ``requested_by``, whom approver scope ``initiator`` lets decide), while the
call stays the service's (only its token waits on and reports it). The service never
decides; ``acts_for`` naming someone it may not act for is refused with the reason; a
service acting for nobody has no initiator, so only an escalation decides. Against a real
server on SQLite and PostgreSQL, through the real client."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from hookgate import Agent, ScriptedLLM
from hookgate.client import Allowed, Client, GuardRefused, Pending
from hookgate.escalation_policy import EscalationPolicy
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from hookgate.storage.audit import verify
from hookgate.storage.tables import User
from tests.conftest import migrated_database_url
from tests.live_server import LiveServer, live_server

TOKENS = {u: f"tok-{u}" for u in ("alice", "bob", "carol", "dave", "buyer-bot",
                                  "other-bot", "mallory")}
ARGS = {"amount": 500, "to": "acme-supplies"}
SERVICE_SAID = "service (agent) identity"


def _agent(agent_id: str, **extra: Any) -> Agent:
    return Agent(
        id=agent_id, name=agent_id, instructions="", tools=[], org_id="acme",
        owner_user_id="bob", confirmation_approver_scope="initiator",
        model_config_json={
            "hooks": {"class_hooks": ["audit_log"]},
            "guarded_calls": {"rules": [{"matcher": "transfer",
                                         "requires_confirmation": True}]}},
        **extra)


def deployment(url: str) -> Deployment:
    def user(uid: str, org: str = "acme", **kw: Any) -> UserSpec:
        return UserSpec(uid, org, token_sha256=token_digest(TOKENS[uid]), **kw)

    return Deployment(
        database_url=url, orgs=[OrgSpec("acme", "ACME"), OrgSpec("evil", "Evil")],
        users=[user("alice", admin=True), user("bob"), user("carol"), user("dave"),
               user("buyer-bot", service=True), user("other-bot", service=True),
               user("mallory", "evil")],
        agents={"buyer": _agent("buyer"),
                # Its requests nobody decides go to dave after a moment.
                "buyer-esc": _agent("buyer-esc", followup=EscalationPolicy(
                    escalate_after_s=0.5, escalate_to=("dave",)))},
        model_for=lambda _a: ScriptedLLM([{"answer": "-"}]), channels=[])


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[LiveServer]:
    url = migrated_database_url(request, tmp_path_factory.mktemp("actsfor"))
    with live_server(deployment(url)) as srv:
        srv.call(_disable(srv, "carol"))
        yield srv


async def _disable(srv: LiveServer, user_id: str) -> None:
    async with srv.runtime.db.transaction() as s:
        await s.execute(update(User).where(User.id == user_id).values(disabled=True))


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


def respond(server: LiveServer, request_id: str, user: str, decision: str = "approve"
            ) -> httpx.Response:
    return httpx.post(f"{server.url}/api/confirmations/{request_id}/respond",
                      json={"decision": decision}, headers=auth(user), timeout=30)


def request_of(server: LiveServer, request_id: str) -> dict[str, Any]:
    r = httpx.get(f"{server.url}/api/confirmations/{request_id}", headers=auth("alice"))
    assert r.status_code == 200, r.text
    return dict(r.json())


def audit_rows(server: LiveServer, call_id: str) -> list[dict[str, Any]]:
    r = httpx.get(f"{server.url}/api/audit", params={"limit": 200}, headers=auth("alice"))
    assert r.status_code == 200, r.text
    return [row for row in r.json()["items"] if row["tool_call_id"] == call_id]


def test_a_services_call_acting_for_alice_is_alices_to_decide_never_the_services(
        server: LiveServer) -> None:
    with Client(server.url, TOKENS["buyer-bot"], framework="langgraph",
                acts_for="alice") as bot:
        assert bot.start_session(agent="buyer", session_id="s1").stopped is None
        asked = bot.before_call(agent="buyer", session_id="s1", call_id="c1",
                                tool="transfer", arguments=ARGS)
        assert isinstance(asked, Pending), asked
        assert request_of(server, asked.request_id)["requested_by"] == "alice"
        # The service never decides (it is the token that asked), nor does another member
        # under initiator scope.
        for decision in ("approve", "reject"):
            r = respond(server, asked.request_id, "buyer-bot", decision)
            assert r.status_code == 403 and SERVICE_SAID in r.text, r.text
        r = respond(server, asked.request_id, "bob")
        assert r.status_code == 403 and "only the user who started the run ('alice')" in \
            r.text, r.text
        # The call is the service's: the person acted for neither waits on nor reports it.
        other = httpx.get(f"{server.url}/api/v1/calls/{asked.call}", headers=auth("alice"))
        assert other.status_code == 404, other.text
        assert respond(server, asked.request_id, "alice").status_code == 200
        allowed = bot.wait(asked.call, timeout=10)
        assert isinstance(allowed, Allowed) and allowed.arguments == ARGS
        bot.report(allowed.call, output="paid")
    # Every row of the call (the attempt that waited, the run) names both: the person it
    # acted for and the service that asked; the run's row names who decided.
    rows = audit_rows(server, "c1")
    assert sorted((r["outcome"], r["user_id"], r["acting_service"]) for r in rows) == [
        ("blocked", "alice", "buyer-bot"), ("ok", "alice", "buyer-bot")], rows
    assert [r["approver"] for r in rows if r["outcome"] == "ok"] == ["alice"]
    # The rows that name a service hash it (version 5), and the chain verifies.
    assert {r["hash_v"] for r in rows} == {6}
    report = server.call(verify(server.runtime.db, chain="acme"))
    assert report.ok, report.problems


def test_a_person_acting_for_themself_is_unchanged_and_the_audit_names_no_service(
        server: LiveServer) -> None:
    with Client(server.url, TOKENS["alice"], framework="api", acts_for="alice") as own:
        asked = own.before_call(agent="buyer", session_id="s-own", call_id="own1",
                                tool="transfer", arguments=ARGS)
        assert isinstance(asked, Pending)
        assert request_of(server, asked.request_id)["requested_by"] == "alice"
        assert respond(server, asked.request_id, "alice").status_code == 200
        allowed = own.wait(asked.call, timeout=10)
        assert isinstance(allowed, Allowed)
        own.report(allowed.call, output="paid")
    rows = audit_rows(server, "own1")
    assert {(r["user_id"], r["acting_service"]) for r in rows} == {("alice", None)}, rows


@pytest.mark.parametrize(("token", "acts_for", "said"), [
    ("buyer-bot", "mallory", "acts_for 'mallory' is not a user of org 'acme'"),
    ("buyer-bot", "carol", "acts_for 'carol' is disabled"),
    ("buyer-bot", "other-bot", "acts_for 'other-bot' is a service identity"),
    ("buyer-bot", "buyer-bot", "acts_for 'buyer-bot' is a service identity"),
    ("buyer-bot", "nobody-here", "acts_for 'nobody-here' is not a user of org 'acme'"),
    ("alice", "bob", "only a service identity (kind: service) acts for someone else"),
])
def test_acts_for_naming_someone_the_caller_may_not_act_for_is_refused_with_the_reason(
        server: LiveServer, token: str, acts_for: str, said: str) -> None:
    with Client(server.url, TOKENS[token], framework="api", acts_for=acts_for) as guard:
        with pytest.raises(GuardRefused) as session:
            guard.start_session(agent="buyer", session_id=f"s-bad-{acts_for}")
        with pytest.raises(GuardRefused) as call:
            guard.before_call(agent="buyer", session_id=f"s-bad-{acts_for}",
                              call_id="bad1", tool="transfer", arguments=ARGS)
    for refused in (session.value, call.value):
        assert refused.status == 403 and said in str(refused), refused
    # Nothing was asked of anyone.
    r = httpx.get(f"{server.url}/api/confirmations", params={"status": "pending"},
                  headers=auth("alice"))
    assert not [q for q in r.json() if q["tool_call_id"] == "bad1"], r.json()


def test_a_call_id_cannot_switch_whom_it_acts_for(server: LiveServer) -> None:
    with Client(server.url, TOKENS["buyer-bot"], framework="api") as bot:
        first = bot.before_call(agent="buyer", session_id="s-switch", call_id="sw1",
                                tool="transfer", arguments=ARGS, acts_for="alice")
        assert isinstance(first, Pending)
        with pytest.raises(GuardRefused) as refused:
            bot.before_call(agent="buyer", session_id="s-switch", call_id="sw1",
                            tool="transfer", arguments=ARGS, acts_for="bob")
    assert refused.value.status == 409 and "another person" in str(refused.value)


def test_a_service_acting_for_nobody_is_decided_by_no_one_but_an_escalation(
        server: LiveServer) -> None:
    with Client(server.url, TOKENS["buyer-bot"], framework="api") as bot:
        asked = bot.before_call(agent="buyer-esc", session_id="s-nobody", call_id="n1",
                                tool="transfer", arguments=ARGS)
        assert isinstance(asked, Pending), asked
        assert request_of(server, asked.request_id)["requested_by"] is None
        for user in ("buyer-bot", "alice", "bob"):
            r = respond(server, asked.request_id, user)
            assert r.status_code == 403, (user, r.text)
        # Once the request escalates to dave, dave (and only he) may decide.
        deadline = time.monotonic() + 60
        while "dave" not in (request_of(server, asked.request_id)["followup"] or {}).get(
                "escalated_to", []):
            assert time.monotonic() < deadline, request_of(server, asked.request_id)
            time.sleep(0.1)
        for user in ("buyer-bot", "alice", "bob"):
            assert respond(server, asked.request_id, user).status_code == 403, user
        box: dict[str, Any] = {}
        waiter = threading.Thread(target=lambda: box.update(v=bot.wait(asked.call, timeout=30)))
        waiter.start()
        assert respond(server, asked.request_id, "dave").status_code == 200
        waiter.join(40)
        assert isinstance(box["v"], Allowed), box
