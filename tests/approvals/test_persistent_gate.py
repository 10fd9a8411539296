"""The approval gate over a real database (SQLite and PostgreSQL): a sensitive call waits
for a person, and only the exact approved call runs, once."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import textwrap
import threading
from typing import Any

import pytest
from starlette.responses import Response

from hookgate import Agent, HookContext, HookResult, PreToolUseHook, ReActEngine, ScriptedLLM, tool
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import AlreadyDecided, NotEligible, RequestNotFound
from hookgate.approvals.escalation import Escalations
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.records import ConfirmationRequest
from hookgate.approvals.service import ApprovalAsk
from hookgate.engines.events import RunEvent
from hookgate.escalation_policy import EscalationPolicy
from hookgate.hooks.services import HookServices
from hookgate.runtime.channel_directory import ConfiguredChannels
from hookgate.runtime.channel_records import SecretsKey
from hookgate.runtime.deployment import ChannelSpec
from hookgate.storage.database import Database
from hookgate.storage.ledger import DatabaseLedger
from hookgate.tools.tool import args_digest
from tests.channels.world import eventually
from tests.fakes.server import Received
from tests.fakes.slack import FakeSlack

pytestmark = pytest.mark.both_databases


class Bank:
    def __init__(self) -> None:
        self.payments: list[dict[str, Any]] = []

    def tools(self) -> list[Any]:
        @tool(requires_confirmation=lambda a: a["amount"] > 50_000, writes=True)
        async def oa__purchase_pay(amount: float, vendor: str) -> str:
            """Pay a vendor."""
            self.payments.append({"amount": amount, "vendor": vendor})
            return f"paid {amount:.0f} to {vendor}"

        return [oa__purchase_pay]


def make_agent(bank: Bank, **kw: Any) -> Agent:
    defaults: dict[str, Any] = dict(org_id="acme", owner_user_id="olivia")
    defaults.update(kw)
    return Agent(id="buyer", name="Purchasing agent", instructions="buy", tools=bank.tools(),
                 **defaults)


def slack_channels(slack: FakeSlack) -> ConfiguredChannels:
    """The channel ``ops`` of org acme, on ``slack``."""
    return ConfiguredChannels([ChannelSpec("ops", "slack", "acme", slack.channel_config())],
                              secrets=SecretsKey([SecretsKey.generate()]))


def pay_ask(agent: Agent, run_id: str, call_id: str, amount: float = 60_000) -> ApprovalAsk:
    """The gate's question for paying ACME ``amount`` in ``run_id``, asked by alice."""
    args = {"amount": amount, "vendor": "ACME"}
    return ApprovalAsk(agent=agent, run_id=run_id, tool_call_id=call_id,
                       tool_name="oa__purchase_pay", args=args, args_sha256=args_digest(args),
                       user_id="alice", org_id="acme")


def pay_script(amount: float = 60_000) -> ScriptedLLM:
    return ScriptedLLM([
        {"tool_calls": [{"name": "oa__purchase_pay", "args": {"amount": amount,
                                                              "vendor": "ACME"}}]},
        {"answer": "done"},
    ])


async def start_run(engine: ReActEngine, agent: Agent, user: str = "alice"
                    ) -> tuple[asyncio.Task[Any], asyncio.Queue[RunEvent]]:
    events: asyncio.Queue[RunEvent] = asyncio.Queue()
    state = engine.new_state(agent, "buy it", user_id=user, org_id="acme")
    task = asyncio.create_task(engine.execute(agent, state, sink=events.put_nowait))
    return task, events


async def next_event(events: asyncio.Queue[RunEvent], type_: str) -> RunEvent:
    while True:
        e = await asyncio.wait_for(events.get(), 10)
        if e.type == type_:
            return e


def engine_for(db: Database, approvals: PersistentApprovals, llm: ScriptedLLM) -> ReActEngine:
    return ReActEngine(llm, services=HookServices(approvals=approvals, database=db),
                       ledger=DatabaseLedger(db))


ALICE = Approver("alice", "acme")


async def test_approved_payment_runs_once_with_exactly_the_approved_arguments(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    engine = engine_for(db, approvals, pay_script())
    task, events = await start_run(engine, make_agent(bank))
    pending = await next_event(events, "confirmation_pending")
    assert bank.payments == []
    request = await approvals.store.get(pending.data["request_id"])
    assert request is not None and request.status == "pending"
    assert request.args == {"amount": 60000.0, "vendor": "ACME"}
    assert request.requested_by == "alice" and request.org_id == "acme"
    assert request.mode == "inline"

    decided = await approvals.decide(request.id, "approve", ALICE, reason="budgeted")
    result = await asyncio.wait_for(task, 10)

    assert result.status == "completed"
    assert bank.payments == [{"amount": 60000.0, "vendor": "ACME"}]
    assert decided.status == "approved" and decided.responded_by == "alice"
    assert decided.reason == "budgeted" and decided.responded_at is not None
    resolved = [e for e in result.trace if e["type"] == "confirmation_resolved"]
    assert resolved[0]["status"] == "approved"


async def test_rejected_payment_never_reaches_the_bank(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    seen: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(messages)
        if len(seen) == 1:
            return {"tool_calls": [{"name": "oa__purchase_pay",
                                    "args": {"amount": 90_000, "vendor": "ACME"}}]}
        return {"answer": "ok"}

    engine = engine_for(db, approvals, ScriptedLLM(model))
    task, events = await start_run(engine, make_agent(bank))
    pending = await next_event(events, "confirmation_pending")
    await approvals.decide(pending.data["request_id"], "reject", ALICE, reason="too much")
    result = await asyncio.wait_for(task, 10)

    assert bank.payments == []
    tool_msg = seen[1][-1]
    assert tool_msg["role"] == "tool"
    assert "Not approved" in tool_msg["content"] and "rejected" in tool_msg["content"]
    assert "too much" in tool_msg["content"]
    assert result.tool_events()[0]["allowed"] is False


async def test_small_payment_needs_no_approval(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    result = await engine_for(db, approvals, pay_script(100)).run(
        make_agent(bank), "buy", user_id="alice")
    assert result.status == "completed"
    assert bank.payments == [{"amount": 100.0, "vendor": "ACME"}]
    assert await approvals.store.list_for_org(org_id="acme") == []


async def test_unanswered_request_is_rejected_by_the_timeout_fallback_by_default(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    engine = engine_for(db, approvals, pay_script())
    agent = make_agent(bank, confirmation_timeout_s=0.3)
    result = await asyncio.wait_for(engine.run(agent, "buy", user_id="alice"), 10)
    assert bank.payments == []
    blocked = result.tool_events()[0]
    assert blocked["allowed"] is False
    assert "was rejected" in blocked["observation"]
    assert "timeout fallback (on_timeout: reject)" in blocked["observation"]
    [request] = await approvals.store.list_for_org(org_id="acme")
    assert (request.status, request.decided_via, request.responded_by) == (
        "rejected", "timeout", None)
    with pytest.raises(AlreadyDecided, match="already decided: rejected"):
        await approvals.decide(request.id, "approve", ALICE)


async def test_unanswered_request_expires_with_on_timeout_expire_and_the_model_is_told(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    engine = engine_for(db, approvals, pay_script())
    agent = make_agent(bank, confirmation_timeout_s=0.3,
                       followup=EscalationPolicy(on_timeout="expire"))
    result = await asyncio.wait_for(engine.run(agent, "buy", user_id="alice"), 10)
    assert bank.payments == []
    blocked = result.tool_events()[0]
    assert blocked["allowed"] is False and "expired" in blocked["observation"]
    [request] = await approvals.store.list_for_org(org_id="acme")
    assert request.status == "expired"
    with pytest.raises(AlreadyDecided, match="already decided: expired"):
        await approvals.decide(request.id, "approve", ALICE)


async def test_first_decision_wins_among_a_hundred_concurrent_ones(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    engine = engine_for(db, approvals, pay_script())
    task, events = await start_run(engine, make_agent(bank, confirmation_approver_scope=
                                                      "org_members"))
    pending = await next_event(events, "confirmation_pending")
    rid = pending.data["request_id"]

    async def decide(i: int) -> str:
        try:
            await approvals.decide(rid, "approve" if i % 2 else "reject",
                                   Approver(f"user{i}", "acme"))
            return "ok"
        except AlreadyDecided as exc:
            assert "already decided" in str(exc)
            return "late"

    outcomes = await asyncio.gather(*(decide(i) for i in range(100)))
    assert outcomes.count("ok") == 1
    assert outcomes.count("late") == 99
    result = await asyncio.wait_for(task, 10)
    assert result.status == "completed"
    assert len(bank.payments) in (0, 1)
    final = await approvals.store.get(rid)
    assert final is not None
    assert len(bank.payments) == (1 if final.status == "approved" else 0)


@pytest.mark.parametrize(
    ("scope", "allowed", "refused"),
    [
        ("initiator", "alice", "olivia"),
        ("agent_owner", "olivia", "alice"),
        ("org_members", "bob", "mallory@other"),
    ],
)
async def test_only_eligible_people_may_decide(
        db: Database, approvals: PersistentApprovals, scope: str, allowed: str,
        refused: str) -> None:
    bank = Bank()
    engine = engine_for(db, approvals, pay_script())
    task, events = await start_run(engine, make_agent(bank, confirmation_approver_scope=scope))
    rid = (await next_event(events, "confirmation_pending")).data["request_id"]

    user, _, org = refused.partition("@")
    with pytest.raises(NotEligible):
        await approvals.decide(rid, "approve", Approver(user, org or "acme"))
    still = await approvals.store.get(rid)
    assert still is not None and still.status == "pending" and still.responded_by is None

    await approvals.decide(rid, "approve", Approver(allowed, "acme"))
    assert (await asyncio.wait_for(task, 10)).status == "completed"
    assert len(bank.payments) == 1


async def test_unknown_request_and_unknown_decision_change_nothing(
        approvals: PersistentApprovals) -> None:
    with pytest.raises(RequestNotFound):
        await approvals.decide("cr_nope", "approve", ALICE)
    with pytest.raises(ValueError, match="approve' or 'reject"):
        await approvals.decide("cr_nope", "maybe", ALICE)


class LateRewriter(PreToolUseHook):
    """A hook declared to run after the gate that changes the approved arguments."""

    name = "late_rewriter"
    priority = 2_000_000

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(modified_args={**ctx.tool_args, "vendor": "EVIL"})


async def test_arguments_changed_after_approval_are_blocked(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    agent = make_agent(bank, model_config_json={"hooks": {"class_hooks": [
        f"{__name__}:LateRewriter"]}})
    engine = engine_for(db, approvals, pay_script())
    task, events = await start_run(engine, agent)
    rid = (await next_event(events, "confirmation_pending")).data["request_id"]
    await approvals.decide(rid, "approve", ALICE)
    result = await asyncio.wait_for(task, 10)
    assert bank.payments == []
    ev = result.tool_events()[0]
    assert ev["allowed"] is False
    assert "changed after they were approved" in ev["observation"]


async def test_channel_only_agent_without_a_channel_is_blocked_with_a_clear_error(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    engine = engine_for(db, approvals, pay_script())
    result = await engine.run(make_agent(bank, confirmation_mode="channel_only"), "buy",
                              user_id="alice")
    assert bank.payments == []
    obs = result.tool_events()[0]["observation"]
    assert "channel_only" in obs and "no approver can be reached" in obs
    assert await approvals.store.list_for_org(org_id="acme") == []


async def test_cancelled_run_cancels_its_pending_request(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    engine = engine_for(db, approvals, pay_script())
    task, events = await start_run(engine, make_agent(bank))
    rid = (await next_event(events, "confirmation_pending")).data["request_id"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    request = await approvals.store.get(rid)
    assert request is not None and request.status == "cancelled"
    assert request.reason == "the run was cancelled"


class HeldSlack(FakeSlack):
    """Slack that takes a card only once the test lets it: the card is on its way."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.reached, self.release = threading.Event(), threading.Event()

    def _post_message(self, received: Received, match: re.Match[str]) -> Response:
        self.reached.set()
        self.release.wait(30)
        return super()._post_message(received, match)


async def test_a_call_cancelled_while_its_card_goes_out_cancels_its_request(
        db: Database) -> None:
    # The request exists (the inbox lists it) before its card is out: a cancel landing then
    # must end it as one landing during the wait does, or a later approval could run it.
    with HeldSlack() as slack:
        channels = slack_channels(slack)
        gate = PersistentApprovals(db, channels=channels, sweep_interval=0.2)
        await gate.start()
        agent = make_agent(Bank(), confirmation_mode="channel_only", confirmation_timeout_s=60)
        ask = pay_ask(agent, "run-held", "call-1")
        asking = asyncio.create_task(gate.request_and_wait(ask))
        try:
            assert await asyncio.to_thread(slack.reached.wait, 30), "no card was sent"
            [pending] = await gate.store.list_for_org(org_id="acme")
            assert pending.status == "pending"
            asking.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asking
        finally:
            slack.release.set()
        await gate.stop()
        await channels.aclose()
    request = await gate.store.get(pending.id)
    assert request is not None and request.status == "cancelled", request
    assert request.reason == "the run was cancelled"
    with pytest.raises(AlreadyDecided):
        await gate.decide(pending.id, "approve", ALICE)


class HeldEscalations(Escalations):
    """Follow-ups that never finish scheduling: the new request is in, its call not yet
    waiting."""

    def __init__(self, approvals: PersistentApprovals) -> None:
        super().__init__(approvals)
        self.reached = asyncio.Event()

    async def created(self, request: ConfirmationRequest) -> None:
        self.reached.set()
        await asyncio.Event().wait()


async def test_a_call_cancelled_right_after_its_request_is_inserted_cancels_it(
        db: Database) -> None:
    gate = PersistentApprovals(db, escalations=HeldEscalations)
    await gate.start()
    assert isinstance(gate.escalations, HeldEscalations)
    ask = pay_ask(make_agent(Bank()), "run-new", "call-1")
    asking = asyncio.create_task(gate.request_and_wait(ask))
    await asyncio.wait_for(gate.escalations.reached.wait(), 30)
    [pending] = await gate.store.list_for_org(org_id="acme")
    assert pending.status == "pending"
    asking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asking
    await gate.stop()
    request = await gate.store.get(pending.id)
    assert request is not None and request.status == "cancelled", request
    assert request.reason == "the run was cancelled"


async def test_decision_written_by_another_process_wakes_the_waiting_call(
        db: Database, approvals: PersistentApprovals, database_url: str) -> None:
    bank = Bank()
    engine = engine_for(db, approvals, pay_script())
    task, events = await start_run(engine, make_agent(bank))
    rid = (await next_event(events, "confirmation_pending")).data["request_id"]
    script = textwrap.dedent(f"""
        import asyncio
        from hookgate.storage.database import Database
        from hookgate.approvals.persistent import PersistentApprovals
        from hookgate.approvals.eligibility import Approver
        async def main():
            db = Database({database_url!r})
            await PersistentApprovals(db).decide({rid!r}, "approve", Approver("alice", "acme"))
            await db.dispose()
        asyncio.run(main())
    """)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script,
                                                env={**os.environ})
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    result = await asyncio.wait_for(task, 10)
    assert result.status == "completed"
    assert len(bank.payments) == 1


async def test_an_unreachable_database_blocks_the_call_with_a_clear_error(
        tmp_path: Any) -> None:
    bank = Bank()
    broken = Database(f"sqlite+aiosqlite:///{tmp_path}/missing-dir/hookgate.db")
    approvals = PersistentApprovals(broken)
    engine = ReActEngine(pay_script(), services=HookServices(approvals=approvals))
    result = await engine.run(make_agent(bank), "buy", user_id="alice")
    await broken.dispose()
    assert bank.payments == []
    blocked = result.tool_events()[0]
    assert blocked["allowed"] is False
    assert "approval_gate" in blocked["observation"]
    assert "unable to open database file" in blocked["observation"]


async def test_a_new_request_held_by_two_processes_at_once_gets_one_card(
        db: Database, database_url: str) -> None:
    # Two gate services on one database (as two instances) resume the same request whose
    # card is not out yet: the delivery claim lets one of them send it.
    with FakeSlack() as slack:
        channels = slack_channels(slack)
        one = PersistentApprovals(db, channels=channels, sweep_interval=0.2)
        other_db = Database(database_url)
        two = PersistentApprovals(other_db, channels=channels, sweep_interval=0.2)
        await one.start()
        await two.start()
        agent = make_agent(Bank(), confirmation_mode="channel_only", confirmation_timeout_s=30)
        ask = pay_ask(agent, "run-twice", "call-1")
        created = await one._create(ask)
        assert created.delivery_ref is None
        waits = [asyncio.create_task(s.request_and_wait(ask)) for s in (one, two)]
        await eventually(lambda: slack.messages, "the approval card")
        await asyncio.sleep(0.5)  # a second card would be out by now
        assert len(slack.messages) == 1, slack.messages
        await one.decide(created.id, "approve", ALICE)
        decisions = await asyncio.wait_for(asyncio.gather(*waits), 10)
        await one.stop()
        await two.stop()
        await other_db.dispose()
        await channels.aclose()
    assert [d.status for d in decisions] == ["approved", "approved"]
    stored = await one.store.get(created.id)
    assert stored is not None and stored.delivery_ref is not None
    assert stored.delivery_ref["channel_id"] == "ops"


async def _abandoned(db: Database, request_id: str, *, by: str, age_s: float) -> None:
    """Leave a claim on the request as a sender that stopped ``age_s`` ago would."""
    from datetime import timedelta

    from sqlalchemy import update

    from hookgate.storage.tables import ConfirmationRequestRow

    at = (await db.now()) - timedelta(seconds=age_s)
    async with db.transaction() as s:
        await s.execute(update(ConfirmationRequestRow).where(
            ConfirmationRequestRow.id == request_id).values(delivery_ref={
                "sending": True, "by": by, "claim": "c0ffee", "at": at.isoformat()}))


async def test_a_card_whose_sender_died_before_sending_it_is_sent_by_the_next_holder(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    # A process claimed the card and died before the platform answered. Resuming the
    # request takes over another process's claim older than TAKEOVER_S; a fresh claim (the
    # other process may be sending right now) is left alone until it is STALE_S old, when
    # the waiting call itself sends the card. One card each time, never two.
    from hookgate.approvals import delivery_claims

    monkeypatch.setattr(delivery_claims, "STALE_S", 1.0)
    with FakeSlack() as slack:
        channels = slack_channels(slack)
        gate = PersistentApprovals(db, channels=channels, sweep_interval=0.2)
        await gate.start()
        agent = make_agent(Bank(), confirmation_mode="channel_only", confirmation_timeout_s=60)
        asks = [pay_ask(agent, f"run-claim-{n}", "c", 60_000 + n) for n in (1, 2)]
        made = [await gate._create(ask) for ask in asks]
        await _abandoned(db, made[0].id, by="a-dead-process", age_s=40)
        await _abandoned(db, made[1].id, by="a-busy-process", age_s=0)
        waits = [asyncio.create_task(gate.request_and_wait(ask)) for ask in asks]
        await eventually(lambda: len(slack.messages) >= 1, "the dead sender's card")
        first = list(slack.messages.values())
        assert len(first) == 1 and "60,001" in str(first[0].blocks)
        # The fresh claim: no card at once, then one once the claim is STALE_S old.
        await eventually(lambda: len(slack.messages) >= 2, "the slow sender's card")
        await asyncio.sleep(1.5)  # another round of the waiting loop: still two cards
        assert len(slack.messages) == 2, list(slack.messages)
        stored = [await gate.store.get(m.id) for m in made]
        assert all(r is not None and r.delivery_ref is not None
                   and r.delivery_ref.get("channel_id") == "ops" for r in stored), stored
        for m in made:
            await gate.decide(m.id, "approve", ALICE)
        decisions = await asyncio.wait_for(asyncio.gather(*waits), 10)
        await gate.stop()
        await channels.aclose()
    assert [d.status for d in decisions] == ["approved", "approved"]
