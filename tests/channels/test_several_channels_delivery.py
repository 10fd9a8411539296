"""Delivery of one request to several channels holds across processes (real databases, the
platforms' fakes): two processes holding the same new request send one card per channel,
and a card set whose sender died before sending is sent, once per channel, by the process
that resumes the request. Each card is recorded where the later update finds it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from hookgate import Agent
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.service import ApprovalAsk
from hookgate.runtime.channel_directory import ConfiguredChannels
from hookgate.runtime.channel_records import SecretsKey
from hookgate.runtime.deployment import ChannelSpec
from hookgate.storage.database import Database
from hookgate.storage.tables import ConfirmationRequestRow
from hookgate.tools.tool import args_digest
from tests.channels.world import eventually
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.both_databases

ALICE = Approver("alice", "acme")


def directory(slack: FakeSlack, telegram: FakeTelegram) -> ConfiguredChannels:
    return ConfiguredChannels([ChannelSpec("ops-slack", "slack", "acme",
                                           slack.channel_config()),
                               ChannelSpec("ops-telegram", "telegram", "acme",
                                           telegram.channel_config())],
                              secrets=SecretsKey([SecretsKey.generate()]))


def ask(run_id: str, amount: int = 60_000) -> ApprovalAsk:
    agent = Agent(id="buyer", name="Buyer", instructions="", tools=[], org_id="acme",
                  confirmation_mode="channel_only", confirmation_timeout_s=60,
                  approval_channel_id="ops-slack", approval_channel_ids=("ops-telegram",))
    args: dict[str, Any] = {"amount": amount, "vendor": "ACME"}
    return ApprovalAsk(agent=agent, run_id=run_id, tool_call_id="c", tool_name="pay",
                       args=args, args_sha256=args_digest(args), user_id="alice",
                       org_id="acme")


def cards(slack: FakeSlack, telegram: FakeTelegram) -> tuple[int, int]:
    return (len([m for m in slack.messages.values() if m.blocks is not None]),
            len(telegram.messages))


async def recorded_everywhere(gate: PersistentApprovals, request_id: str) -> None:
    async def both() -> bool:
        request = await gate.store.get(request_id)
        return (request is not None and request.delivery_ref is not None
                and request.delivery_ref.get("channel_id") == "ops-slack"
                and [r["channel_id"] for r in request.escalation_refs] == ["ops-telegram"])

    await eventually(both, "both cards recorded")


async def test_two_processes_holding_a_new_request_send_one_card_per_channel(
        db: Database, database_url: str, slack: FakeSlack, telegram: FakeTelegram) -> None:
    channels = directory(slack, telegram)
    other_db = Database(database_url)
    one = PersistentApprovals(db, channels=channels, sweep_interval=0.2)
    two = PersistentApprovals(other_db, channels=channels, sweep_interval=0.2)
    try:
        await one.start()
        await two.start()
        held = ask("run-twice")
        created = await one._create(held)
        waits = [asyncio.create_task(gate.request_and_wait(held)) for gate in (one, two)]
        await eventually(lambda: cards(slack, telegram) == (1, 1), "a card in each channel")
        await recorded_everywhere(one, created.id)
        assert cards(slack, telegram) == (1, 1)

        await one.decide(created.id, "approve", ALICE)
        decisions = await asyncio.wait_for(asyncio.gather(*waits), 10)
        assert [d.status for d in decisions] == ["approved", "approved"]
        [message] = telegram.messages.values()
        await asyncio.to_thread(telegram.wait_for_edit, message)
        await eventually(lambda: any(m.updates for m in slack.messages.values()),
                         "the Slack card updated")
        assert cards(slack, telegram) == (1, 1)
    finally:
        await one.stop()
        await two.stop()
        await other_db.dispose()
        await channels.aclose()
    assert slack.violations == [] and telegram.violations == []


async def test_cards_whose_sender_died_are_sent_once_per_channel_by_the_next_holder(
        db: Database, slack: FakeSlack, telegram: FakeTelegram) -> None:
    channels = directory(slack, telegram)
    gate = PersistentApprovals(db, channels=channels, sweep_interval=0.2)
    try:
        await gate.start()
        held = ask("run-dead-sender")
        created = await gate._create(held)
        # Another process claimed the cards 40 s ago and died before any platform answered.
        at = (await db.now()) - timedelta(seconds=40)
        async with db.transaction() as s:
            await s.execute(update(ConfirmationRequestRow).where(
                ConfirmationRequestRow.id == created.id).values(delivery_ref={
                    "sending": True, "by": "a-dead-process", "claim": "c0ffee",
                    "at": at.isoformat()}))
        wait = asyncio.create_task(gate.request_and_wait(held))
        await eventually(lambda: cards(slack, telegram) == (1, 1), "a card in each channel")
        await recorded_everywhere(gate, created.id)
        await gate.decide(created.id, "reject", ALICE)
        assert (await asyncio.wait_for(wait, 10)).status == "rejected"
        assert cards(slack, telegram) == (1, 1)
    finally:
        await gate.stop()
        await channels.aclose()
    assert slack.violations == [] and telegram.violations == []
