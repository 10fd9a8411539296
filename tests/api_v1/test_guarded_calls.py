"""The guarded-call API against a real server on SQLite and PostgreSQL, through the real
HTTP client: allowed calls are audited under their framework, gated calls wait for a person
and run once, and the attacks on exactly-once are refused."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hookgate import Agent, ScriptedLLM
from hookgate.client import (
    Allowed,
    AlreadyRan,
    AsyncClient,
    Client,
    Decided,
    Denied,
    GuardRefused,
    GuardUnavailable,
    Pending,
)
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from tests.conftest import migrated_database_url
from tests.live_server import LiveServer, free_port, live_server
from tests.sse import read_events

BOT, ALICE = "tok-bot", "tok-alice"


def deployment(url: str) -> Deployment:
    agent = Agent(
        id="payer", name="payer", instructions="", tools=[], org_id="acme",
        owner_user_id="alice", confirmation_approver_scope="agent_owner",
        model_config_json={
            "hooks": {"class_hooks": [
                "audit_log", "readonly_guard",
                {"name": "connector_rate_limit",
                 "params": {"limits": {"pinger": "2/day", "wirer": "2/day"}}}]},
            "guarded_calls": {"rules": [
                {"matcher": "transfer", "requires_confirmation": True},
                {"matcher": "search", "writes": False},
                # A sub-agent's searches need a person; the agent's own do not.
                {"matcher": "search", "when": "metadata.depth > 0",
                 "requires_confirmation": True},
                {"matcher": "ping", "writes": False, "connector": "pinger"},
                {"matcher": "wire", "connector": "wirer", "requires_confirmation": True}]},
        },
    )
    return Deployment(
        database_url=url, orgs=[OrgSpec("acme", "ACME")],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest(ALICE)),
               UserSpec("bot", "acme", token_sha256=token_digest(BOT))],
        agents={"payer": agent}, model_for=lambda _a: ScriptedLLM([{"answer": "-"}]),
        channels=[])


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[LiveServer]:
    url = migrated_database_url(request, tmp_path_factory.mktemp("v1"))
    with live_server(deployment(url)) as srv:
        yield srv


@pytest.fixture
def guard(server: LiveServer) -> Iterator[Client]:
    client = Client(server.url, BOT, framework="langgraph")
    yield client
    client.close()


def audit(server: LiveServer) -> list[dict[str, Any]]:
    r = httpx.get(f"{server.url}/api/audit", params={"limit": 100},
                  headers={"Authorization": f"Bearer {ALICE}"})
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


def decide(server: LiveServer, request_id: str, decision: str, **extra: Any) -> None:
    r = httpx.post(f"{server.url}/api/confirmations/{request_id}/respond",
                   json={"decision": decision, **extra},
                   headers={"Authorization": f"Bearer {ALICE}"})
    assert r.status_code == 200, r.text


def test_an_ungated_call_is_allowed_reported_and_audited_under_the_fixed_connector(
        server: LiveServer, guard: Client) -> None:
    started = guard.start_session(agent="payer", session_id="s-plain")
    assert started.stopped is None
    verdict = guard.before_call(agent="payer", session_id="s-plain", call_id="c1",
                                tool="search", arguments={"q": "invoices"})
    assert isinstance(verdict, Allowed) and verdict.arguments == {"q": "invoices"}
    seen = guard.report(verdict.call, output={"hits": 3})
    assert seen.text == '{"hits": 3}' and not seen.withheld
    rows = [r for r in audit(server) if r["tool_call_id"] == "c1"]
    # The client's X-Hookgate-Framework header decides nothing: an undeclared tool no rule
    # names a connector for has the fixed one.
    assert [(r["outcome"], r["connector"], r["execution_path"]) for r in rows] == [
        ("ok", "guarded_calls", "external")]


def test_a_gated_call_waits_for_a_person_and_runs_once(
        server: LiveServer, guard: Client, attempt: Any) -> None:
    asked = guard.before_call(agent="payer", session_id="s-pay", call_id="t1",
                              tool="transfer", arguments={"amount": 500, "to": "bob"})
    assert isinstance(asked, Pending)
    box: dict[str, Any] = {}
    waiter = threading.Thread(target=lambda: box.update(v=guard.wait(asked.call, timeout=30)))
    waiter.start()
    decide(server, asked.request_id, "approve", reason="invoice 7")
    waiter.join(40)
    allowed = box["v"]
    assert isinstance(allowed, Allowed)
    assert allowed.arguments == {"amount": 500, "to": "bob"}
    assert allowed.note is not None and "by alice" in allowed.note and "invoice 7" in allowed.note
    # The same call asked again (a crash after the tool started): it does not run twice.
    again = guard.before_call(agent="payer", session_id="s-pay", call_id="t1",
                              tool="transfer", arguments={"amount": 500, "to": "bob"})
    attempt.record("v1 API: replay of an approved call", not isinstance(again, AlreadyRan))
    assert isinstance(again, AlreadyRan)
    guard.report(allowed.call, output="sent 500 to bob")
    replay = guard.wait(allowed.call, timeout=0)
    assert replay == AlreadyRan(allowed.call, "sent 500 to bob")
    # Another user of the org (an admin, even) cannot read or report this user's call.
    other = httpx.get(f"{server.url}/api/v1/calls/{allowed.call}",
                      headers={"Authorization": f"Bearer {ALICE}"})
    attempt.record("v1 API: another user reads a call", other.status_code != 404)
    assert other.status_code == 404
    # The approval is used: the same arguments under a new call id ask a person again.
    fresh = guard.before_call(agent="payer", session_id="s-pay", call_id="t2",
                              tool="transfer", arguments={"amount": 500, "to": "bob"})
    attempt.record("v1 API: an approval re-used by a new call id", not isinstance(fresh, Pending))
    assert isinstance(fresh, Pending)
    decide(server, fresh.request_id, "reject", reason="once is enough")
    denied = guard.wait(fresh.call, timeout=5)
    assert isinstance(denied, Denied) and "once is enough" in denied.reason


def test_an_allow_nobody_waits_for_any_more_does_not_use_up_the_call(
        server: LiveServer, guard: Client) -> None:
    asked = guard.before_call(agent="payer", session_id="s-gone", call_id="g1",
                              tool="transfer", arguments={"amount": 1, "to": "bob"})
    assert isinstance(asked, Pending)
    with pytest.raises(httpx.ReadTimeout):  # a client that gives up on its long-poll
        httpx.get(f"{server.url}/api/v1/calls/{asked.call}", params={"wait": 20},
                  headers={"Authorization": f"Bearer {BOT}"}, timeout=0.5)
    decide(server, asked.request_id, "approve")
    verdict = guard.wait(asked.call, timeout=10)
    assert isinstance(verdict, Allowed)


def test_a_reused_call_id_with_other_arguments_and_nan_are_refused(
        server: LiveServer, guard: Client, attempt: Any) -> None:
    first = guard.before_call(agent="payer", session_id="s-x", call_id="r1", tool="search",
                              arguments={"q": "a"})
    assert isinstance(first, Allowed)
    with pytest.raises(GuardRefused, match="already used") as refused:
        guard.before_call(agent="payer", session_id="s-x", call_id="r1", tool="search",
                          arguments={"q": "b"})
    attempt.record("v1 API: a re-used call id with other arguments", refused.value is None)
    r = httpx.post(f"{server.url}/api/v1/calls", content=(
        b'{"agent": "payer", "session_id": "s-x", "call_id": "n1", "tool": "search", '
        b'"arguments": {"q": NaN}}'), headers={"Authorization": f"Bearer {BOT}",
                                               "Content-Type": "application/json"})
    attempt.record("v1 API: NaN in the arguments", r.status_code < 400)
    assert r.status_code in (400, 422) and "nan" in r.text.lower()


def test_a_sub_agents_session_keeps_its_parent_however_it_is_asked_later(
        server: LiveServer, guard: Client, attempt: Any) -> None:
    guard.start_session(agent="payer", session_id="s-top")
    guard.start_session(agent="payer", session_id="s-top/child", parent_session="s-top")
    # Started again, or asked about, without its parent: the first record holds (depth 1).
    guard.start_session(agent="payer", session_id="s-top/child")
    asked = guard.before_call(agent="payer", session_id="s-top/child", call_id="d1",
                              tool="search", arguments={"q": "x"})
    attempt.record("v1 API: a sub-agent's session named again without its parent",
                   not isinstance(asked, Pending))
    assert isinstance(asked, Pending)
    # The parent's own search, and one whose call names a parent of its own, at depth 0/1.
    own = guard.before_call(agent="payer", session_id="s-top", call_id="d2", tool="search",
                            arguments={"q": "x"})
    assert isinstance(own, Allowed)
    assert isinstance(guard.before_call(agent="payer", session_id="s-fresh", call_id="d3",
                                        tool="search", arguments={"q": "x"},
                                        parent_session="s-top"), Pending)
    # Approved and run, the sub-agent's search leaves an audit row naming its parent session
    # and depth (hashed with the row); the parent's own search names neither.
    decide(server, asked.request_id, "approve")
    assert isinstance(guard.wait(asked.call, timeout=5), Allowed)
    for call in (asked.call, own.call):
        guard.report(call, output="found")
    rows = {r["tool_call_id"]: r for r in audit(server) if r["outcome"] == "ok"
            and r["tool_call_id"] in ("d1", "d2")}
    # Version 5: the row names its session, and so covers every field.
    assert (rows["d1"]["parent_session"], rows["d1"]["depth"], rows["d1"]["hash_v"]) == (
        "s-top", 1, 5)
    assert (rows["d2"]["parent_session"], rows["d2"]["depth"]) == (None, None)


def test_a_rate_limit_holds_across_two_agent_clients(server: LiveServer) -> None:
    with Client(server.url, BOT, framework="langgraph") as one, \
            Client(server.url, BOT, framework="crewai") as two:
        verdicts = [guard.before_call(agent="payer", session_id=f"s-{i}", call_id=f"p{i}",
                                      tool="ping", arguments={})
                    for i, guard in enumerate((one, two, one, two))]
    assert [type(v).__name__ for v in verdicts] == ["Allowed", "Allowed", "Denied", "Denied"]
    assert isinstance(verdicts[2], Denied) and "rate limit" in verdicts[2].reason.lower()


def test_a_gated_call_takes_one_rate_limit_slot_however_often_it_is_asked(
        server: LiveServer, guard: Client) -> None:
    # wirer allows 2 a day: each gated call takes its slot at its first ask; polling it,
    # and asking it again once a person decided, take none.
    asked = guard.before_call(agent="payer", session_id="s-wire", call_id="w1", tool="wire",
                              arguments={"amount": 1})
    assert isinstance(asked, Pending)
    for _ in range(3):
        assert isinstance(guard.wait(asked.call, timeout=0), Pending)
    decide(server, asked.request_id, "approve")
    assert isinstance(guard.wait(asked.call, timeout=5), Allowed)
    second = guard.before_call(agent="payer", session_id="s-wire", call_id="w2", tool="wire",
                               arguments={"amount": 2})
    assert isinstance(second, Pending)
    decide(server, second.request_id, "approve")
    again = guard.before_call(agent="payer", session_id="s-wire", call_id="w2", tool="wire",
                              arguments={"amount": 2})
    assert isinstance(again, Allowed)
    third = guard.before_call(agent="payer", session_id="s-wire", call_id="w3", tool="wire",
                              arguments={"amount": 3})
    assert isinstance(third, Denied) and "rate limit" in third.reason.lower()


async def test_the_async_client_asks_reports_and_learns_decisions(server: LiveServer) -> None:
    async with AsyncClient(server.url, BOT, framework="pydantic-ai") as guard:
        assert (await guard.start_session(agent="payer", session_id="s-async")).context is None
        plain = await guard.before_call(agent="payer", session_id="s-async", call_id="a1",
                                        tool="search", arguments={"q": "z"})
        assert isinstance(plain, Allowed)
        assert (await guard.report(plain.call, error="boom")).text == "Error: boom"
        gated = await guard.before_call(agent="payer", session_id="s-async", call_id="a2",
                                        tool="transfer", arguments={"amount": 2, "to": "x"})
        assert isinstance(gated, Pending)
        await asyncio.to_thread(decide, server, gated.request_id, "reject", reason="no")
        assert await guard.decision(gated.call, timeout=5) == Decided(
            gated.call, gated.request_id, False, "no")
        denied = await guard.wait(gated.call, timeout=5)
        assert isinstance(denied, Denied) and "rejected" in denied.reason
        # An approval with an edit: the decision carries the arguments the person approved.
        schema = {"type": "object", "properties": {"amount": {"type": "integer"},
                                                   "to": {"type": "string"}}}
        edited = await guard.before_call(agent="payer", session_id="s-async", call_id="a3",
                                         tool="transfer", arguments={"amount": 9, "to": "x"},
                                         parameters=schema)
        assert isinstance(edited, Pending)
        await asyncio.to_thread(decide, server, edited.request_id, "approve",
                                arguments={"amount": 4, "to": "x"})
        assert await guard.decision(edited.call, timeout=5) == Decided(
            edited.call, edited.request_id, True, None, {"amount": 4, "to": "x"})


def test_the_event_stream_says_when_a_person_decided_and_starts_nothing(
        server: LiveServer, guard: Client) -> None:
    asked = guard.before_call(agent="payer", session_id="s-sse", call_id="e1",
                              tool="transfer", arguments={"amount": 3, "to": "bob"})
    assert isinstance(asked, Pending)
    seen = []
    with httpx.stream("GET", f"{server.url}/api/v1/calls/{asked.call}/events",
                      headers={"Authorization": f"Bearer {BOT}"}, timeout=30) as stream:
        for event in read_events(stream):
            if event.comment:
                continue  # a keep-alive
            seen.append((event.event, event.data.get("approved")))
            if event.event == "pending":
                decide(server, asked.request_id, "approve")
    assert seen == [("pending", None), ("decided", True)]
    assert isinstance(guard.wait(asked.call, timeout=0), Allowed)  # nothing started before


def test_the_routes_are_described_in_the_openapi_document(server: LiveServer) -> None:
    paths = httpx.get(f"{server.url}/openapi.json").json()["paths"]
    for path in ("/api/v1/sessions", "/api/v1/calls", "/api/v1/calls/{call}",
                 "/api/v1/calls/{call}/result"):
        assert path in paths, sorted(paths)
    answer = paths["/api/v1/calls"]["post"]["responses"]["200"]["content"]
    assert answer["application/json"]["schema"]["$ref"].endswith("/CallOut")


def test_an_unreachable_server_fails_closed_and_says_why() -> None:
    client = Client(f"http://127.0.0.1:{free_port()}", BOT, framework="langgraph", timeout=3)
    with pytest.raises(GuardUnavailable, match="unreachable"):
        client.before_call(agent="payer", session_id="s", call_id="c", tool="search",
                           arguments={})


def test_the_same_call_asked_while_its_approval_is_being_claimed_finds_it_its_own(
        server: LiveServer, guard: Client, attempt: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The approval's use is claimed, then its owner (the call id) is written. Asked again in
    # between (a retry racing the first ask, on this or another instance), the call finds
    # the claim before it names anyone: it waits for the owner, finds itself, and its start
    # claim answers already_ran. Before, it was refused as "already used by one execution".
    from hookgate.storage.confirmations import ApprovalUse
    from hookgate.storage.ledger import DatabaseLedger

    owner_written = threading.Event()
    slow_finish = DatabaseLedger.finish

    async def finish(self: DatabaseLedger, run_id: str, tool_call_id: str,
                     observation: str, ok: bool) -> None:
        if tool_call_id.startswith(ApprovalUse.USE.value + "-"):
            await asyncio.sleep(0.5)  # the window a racing ask falls into
            owner_written.set()
        await slow_finish(self, run_id, tool_call_id, observation, ok)

    monkeypatch.setattr(DatabaseLedger, "finish", finish)
    args = {"amount": 70, "to": "carol"}
    asked = guard.before_call(agent="payer", session_id="s-race", call_id="r1",
                              tool="transfer", arguments=args)
    assert isinstance(asked, Pending)
    decide(server, asked.request_id, "approve")
    verdicts: list[Any] = []

    def ask() -> None:
        with Client(server.url, BOT, framework="langgraph") as other:
            verdicts.append(other.before_call(agent="payer", session_id="s-race",
                                              call_id="r1", tool="transfer",
                                              arguments=args))

    first = threading.Thread(target=ask)
    first.start()
    second = threading.Thread(target=ask)
    time.sleep(0.2)  # the first has claimed the use and waits to write its owner
    second.start()
    first.join(30)
    second.join(30)
    assert owner_written.is_set()
    started = [v for v in verdicts if isinstance(v, Allowed)]
    attempt.record("v1 API: a call raced with itself started twice", len(started) != 1)
    assert len(verdicts) == 2 and len(started) == 1, verdicts
    assert [type(v) for v in verdicts if v not in started] == [AlreadyRan], verdicts
