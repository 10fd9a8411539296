"""Session-aware limits on the guarded path, against a real server on SQLite and PostgreSQL
through the real HTTP client: a sum per user per hour, a count per session whose failed
calls give their claims back, "only after an approved call of review in this session", and
hostile amounts refused with a reason."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hookgate import Agent, ScriptedLLM
from hookgate.client import Allowed, Client, Denied, GuardRefused, Pending
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from tests.conftest import migrated_database_url
from tests.live_server import LiveServer, live_server

BOT, ALICE = "tok-bot", "tok-alice"
LIMITS = {
    "transfers": {"tools": ["transfer"], "per": "user", "window": "1h", "sum": "amount",
                  "max": 5000},
    "deletes": {"tools": ["delete_*"], "per": "session", "window": "1 hour", "count": 2},
    "refunds": {"tools": ["refund"], "after_approved": "review"},
}


def deployment(url: str) -> Deployment:
    agent = Agent(
        id="payer", name="payer", instructions="", tools=[], org_id="acme",
        owner_user_id="alice", confirmation_approver_scope="agent_owner",
        model_config_json={
            "hooks": {"class_hooks": [
                "audit_log", {"name": "session_limits", "params": {"limits": LIMITS}}]},
            "guarded_calls": {"rules": [
                {"matcher": "review", "requires_confirmation": True},
                {"matcher": "delete_file", "when": "args.path == '/'",
                 "requires_confirmation": True}]},
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
    url = migrated_database_url(request, tmp_path_factory.mktemp("limits"))
    with live_server(deployment(url)) as srv:
        yield srv


@pytest.fixture
def guard(server: LiveServer) -> Iterator[Client]:
    client = Client(server.url, BOT, framework="langgraph")
    yield client
    client.close()


def decide(server: LiveServer, request_id: str, decision: str) -> None:
    r = httpx.post(f"{server.url}/api/confirmations/{request_id}/respond",
                   json={"decision": decision}, headers={"Authorization": f"Bearer {ALICE}"})
    assert r.status_code == 200, r.text


def ask(guard: Client, session: str, call: str, tool: str, **args: Any) -> Any:
    return guard.before_call(agent="payer", session_id=session, call_id=call, tool=tool,
                             arguments=args)


def test_three_concurrent_transfers_of_2000_cannot_pass_5000_an_hour(
        server: LiveServer) -> None:
    # Sessions of their own: the limit counts per user, across the user's sessions.
    verdicts: dict[int, Any] = {}

    def one(i: int) -> None:
        with Client(server.url, BOT, framework="langgraph") as client:
            verdicts[i] = ask(client, f"s-t{i}", f"t{i}", "transfer", amount=2000)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    kinds = sorted(type(v).__name__ for v in verdicts.values())
    assert kinds == ["Allowed", "Allowed", "Denied"], verdicts
    (denied,) = [v for v in verdicts.values() if isinstance(v, Denied)]
    assert "limit 'transfers' allows at most 5000 in amount per user per hour" in denied.reason
    # 1000 more is within the cap; anything more is not.
    with Client(server.url, BOT, framework="langgraph") as client:
        assert isinstance(ask(client, "s-t9", "t9", "transfer", amount=1000), Allowed)
        assert isinstance(ask(client, "s-t9", "t10", "transfer", amount=0.0001), Denied)


@pytest.mark.parametrize("amount", [math.nan, math.inf, -1, 10**30, "2000", True, None])
def test_a_hostile_amount_is_refused_with_a_reason(guard: Client, amount: Any) -> None:
    try:
        verdict = ask(guard, f"s-h{amount!r}", "h1", "transfer", amount=amount)
    except GuardRefused as refused:
        # NaN and inf JSON cannot carry; 10**30 no canonical JSON pins: refused before any
        # hook (test_limit_declarations.py attacks the hook's own check with them).
        assert "JSON" in str(refused), refused
        return
    assert isinstance(verdict, Denied), verdict
    assert "Refused by session limits: limit 'transfers': argument amount" in verdict.reason \
        or "has no argument 'amount'" in verdict.reason, verdict.reason
    # Nothing was claimed: the whole cap is still there.
    assert isinstance(ask(guard, f"s-h{amount!r}", "h2", "transfer", amount=0), Allowed)


def test_a_failed_call_gives_its_claim_back_and_a_session_counts_its_own(
        guard: Client) -> None:
    first = ask(guard, "s-d", "d1", "delete_file", path="a")
    assert isinstance(first, Allowed)
    guard.report(first.call, error="disk on fire")  # it failed: the claim is given back
    second = ask(guard, "s-d", "d2", "delete_file", path="b")
    third = ask(guard, "s-d", "d3", "delete_row", path="c")
    assert isinstance(second, Allowed) and isinstance(third, Allowed)
    guard.report(second.call, output="deleted")
    fourth = ask(guard, "s-d", "d4", "delete_file", path="d")
    assert isinstance(fourth, Denied)
    assert "limit 'deletes' allows at most 2 calls per session per hour" in fourth.reason
    # Another session has its own.
    assert isinstance(ask(guard, "s-d2", "d1", "delete_file", path="a"), Allowed)


def test_a_call_waiting_for_a_person_keeps_its_claim_and_a_rejected_one_gives_it_back(
        server: LiveServer, guard: Client) -> None:
    waiting = ask(guard, "s-w", "w1", "delete_file", path="/")
    assert isinstance(waiting, Pending)
    assert isinstance(ask(guard, "s-w", "w2", "delete_file", path="a"), Allowed)
    # Two in flight (one waits for a person): a third is refused.
    assert isinstance(ask(guard, "s-w", "w3", "delete_file", path="b"), Denied)
    decide(server, waiting.request_id, "reject")
    assert isinstance(guard.wait(waiting.call, timeout=5), Denied)
    assert isinstance(ask(guard, "s-w", "w4", "delete_file", path="b"), Allowed)


def test_a_refund_runs_only_after_an_approved_review_in_the_same_session(
        server: LiveServer, guard: Client) -> None:
    early = ask(guard, "s-r", "r1", "refund", order="7")
    assert isinstance(early, Denied)
    assert "'refund' runs only after an approved call of 'review' in this session" in \
        early.reason
    # A rejected review unlocks nothing.
    rejected = ask(guard, "s-r", "v0", "review", order="6")
    assert isinstance(rejected, Pending)
    decide(server, rejected.request_id, "reject")
    assert isinstance(guard.wait(rejected.call, timeout=5), Denied)
    assert isinstance(ask(guard, "s-r", "r2", "refund", order="7"), Denied)
    # An approved review that ran does.
    review = ask(guard, "s-r", "v1", "review", order="7")
    assert isinstance(review, Pending)
    decide(server, review.request_id, "approve")
    allowed = guard.wait(review.call, timeout=5)
    assert isinstance(allowed, Allowed)
    guard.report(allowed.call, output="looks fine")
    assert isinstance(ask(guard, "s-r", "r3", "refund", order="7"), Allowed)
    # Only in that session.
    assert isinstance(ask(guard, "s-other", "r1", "refund", order="7"), Denied)
