"""Telegram end to end: a real server on loopback, the fake Bot API, and Updates posted to
the server's webhook as Telegram posts them (the webhook's answer is performed as the
answerCallbackQuery call it holds)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from hookgate.approvals.quorum import QuorumRule
from hookgate.runtime.deployment import ChannelSpec
from tests.channels.world import (
    API_TOKEN,
    CONTEXT,
    TELEGRAM,
    Scene,
    auth,
    callback_url,
    waiting_run,
)
from tests.fakes.server import BuiltCallback
from tests.fakes.telegram import FakeTelegram, TelegramMessage

pytestmark = pytest.mark.both_databases

QUORUM = {"allow_self_approval": False,
          "approval_quorum": (QuorumRule.parse("wire_transfer", "args.amount > 50000", 2,
                                               None),)}


def ops_telegram(fake: FakeTelegram) -> list[ChannelSpec]:
    return [ChannelSpec("ops-telegram", "telegram", "acme", fake.channel_config()),
            ChannelSpec("sales-telegram", "telegram", "acme", fake.channel_config())]


def the_message(fake: FakeTelegram) -> TelegramMessage:
    [message] = fake.messages.values()
    return message


async def deliver(fake: FakeTelegram, scene: Scene, update: BuiltCallback,
                  channel_id: str = "ops-telegram") -> httpx.Response:
    return await fake.deliver(scene.client, callback_url(channel_id), update)


def answer(fake: FakeTelegram, reply: httpx.Response) -> str:
    """What the clicker was shown (the answerCallbackQuery the webhook answered with)."""
    assert reply.status_code == 200, reply.text
    return str(fake.answers[reply.json()["callback_query_id"]]["text"])


async def edited(fake: FakeTelegram, message: TelegramMessage) -> dict[str, Any]:
    return await asyncio.to_thread(fake.wait_for_edit, message)


async def test_a_click_in_telegram_approves_once_and_the_message_shows_who(
        database_url: str, telegram: FakeTelegram, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_telegram(telegram), "ops-telegram",
                           lambda: telegram.messages) as scene:
        message = the_message(telegram)
        assert "wire_transfer" in message.text and "ACME GMBH" in message.text
        assert all(line in message.text for line in CONTEXT), message.text
        assert API_TOKEN not in message.text
        assert all(len(d.encode()) <= 64 and scene.request_id in d
                   for d in message.callback_data().values())

        click = telegram.click(message, "Approve", TELEGRAM["alice"])
        assert answer(telegram, await deliver(telegram, scene, click)) == "Approved"
        assert (await scene.finished())["status"] == "completed"
        assert scene.bank.transfers == [{"amount": 60000.0, "vendor": "ACME GMBH"}]
        await edited(telegram, message)
        assert "Approved by alice via Telegram" in message.text
        assert message.keyboard == []
        record = await scene.record()
        assert record["decision"]["channel_identity"] == f"telegram:{TELEGRAM['alice']}"
        assert record["decision"]["via"] == "telegram"

        # The same update delivered again (Telegram retries) is a replay; a new click on
        # the decided request changes nothing either.
        assert (await deliver(telegram, scene, click)).status_code == 401
        late = telegram.click(message, "Reject", TELEGRAM["alice"],
                              data=click_data(click))
        assert "already" in answer(telegram, await deliver(telegram, scene, late))
        assert len(scene.bank.transfers) == 1
        assert (await scene.record())["status"] == "approved"
    assert telegram.violations == []


def click_data(click: BuiltCallback) -> str:
    return str(json.loads(click.body)["callback_query"]["data"])


async def test_a_decision_in_the_inbox_edits_the_telegram_message(
        database_url: str, telegram: FakeTelegram, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_telegram(telegram), "ops-telegram",
                           lambda: telegram.messages) as scene:
        await scene.decide_in_inbox("reject", "not this quarter")
        message = the_message(telegram)
        await edited(telegram, message)
        assert "Rejected by alice via the web inbox" in message.text
        assert "Reason: not this quarter" in message.text
        assert message.keyboard == []
        assert scene.bank.transfers == []
    assert telegram.violations == []


async def test_forged_replayed_and_foreign_telegram_clicks_change_nothing(
        database_url: str, telegram: FakeTelegram, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_telegram(telegram), "ops-telegram",
                           lambda: telegram.messages) as scene:
        message = the_message(telegram)
        alice = TELEGRAM["alice"]
        approve = message.callback_data()["Approve"]
        _, request_id, tag = approve.split(".")
        refused = {
            "no secret token": telegram.click(message, "Approve", alice, signed=False),
            "wrong secret token": telegram.click(message, "Approve", alice,
                                                 secret_token="a-guessed-secret-token-0000"),
            "forged callback_data": telegram.click(message, "Approve", alice,
                                                   data=f"r.{request_id}.{tag}"),
        }
        statuses = {what: (await deliver(telegram, scene, u)).status_code
                    for what, u in refused.items()}
        assert statuses == {"no secret token": 401, "wrong secret token": 401,
                            "forged callback_data": 401}
        # The key is bound to its channel: another channel of the same bot refuses it.
        other = await deliver(telegram, scene, telegram.click(message, "Approve", alice),
                              "sales-telegram")
        assert other.status_code == 401

        not_allowed = {
            "unknown Telegram user": telegram.click(message, "Approve", 99999),
            "user of another org": telegram.click(message, "Approve", TELEGRAM["mallory"]),
            "not the initiator": telegram.click(message, "Approve", TELEGRAM["bob"]),
        }
        for what, update in not_allowed.items():
            shown = answer(telegram, await deliver(telegram, scene, update))
            assert shown.startswith("not allowed"), (what, shown)
        await scene.untouched()
        assert message.edits == []

        click = telegram.click(message, "Approve", alice)
        assert answer(telegram, await deliver(telegram, scene, click)) == "Approved"
        assert (await deliver(telegram, scene, click)).status_code == 401  # replay
        assert (await scene.finished())["status"] == "completed"
        assert len(scene.bank.transfers) == 1
    assert telegram.violations == []


async def test_four_eyes_and_quorum_count_a_person_once_across_telegram_and_the_inbox(
        database_url: str, telegram: FakeTelegram, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_telegram(telegram), "ops-telegram",
                           lambda: telegram.messages, agent_options=QUORUM,
                           scope="org_members") as scene:
        message = the_message(telegram)
        mine = telegram.click(message, "Approve", TELEGRAM["alice"])
        assert "four eyes" in answer(telegram, await deliver(telegram, scene, mine))
        first = telegram.click(message, "Approve", TELEGRAM["bob"])
        assert answer(telegram, await deliver(telegram, scene, first)) == (
            "Approval recorded: 1 of 2 approvals (bob); waiting for more")
        assert message.edits == [] and message.callback_data()  # still waiting

        # bob again, this time in the inbox: still one vote.
        again = await scene.client.post(
            f"/api/confirmations/{scene.request_id}/respond",
            json={"decision": "approve", "via": "inbox"}, headers=auth("bob"))
        assert again.status_code != 200
        record = await scene.record()
        assert (record["status"], record["approvals"]["count"]) == ("pending", 1)
        assert scene.bank.transfers == []

        second = telegram.click(message, "Approve", TELEGRAM["olivia"])
        assert answer(telegram, await deliver(telegram, scene, second)) == "Approved"
        assert (await scene.finished())["status"] == "completed"
        assert len(scene.bank.transfers) == 1
        await edited(telegram, message)
        assert "Approved by olivia via Telegram" in message.text
        record = await scene.record()
        assert [(a["user_id"], a["via"]) for a in record["approvals"]["approved_by"]] == [
            ("bob", "telegram"), ("olivia", "telegram")]
    assert telegram.violations == []


async def test_a_click_after_the_request_timed_out_changes_nothing(
        database_url: str, telegram: FakeTelegram, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_telegram(telegram), "ops-telegram",
                           lambda: telegram.messages,
                           agent_options={"confirmation_timeout_s": 3.0}) as scene:
        message = the_message(telegram)
        await edited(telegram, message)  # the timeout's decision rewrites the message
        assert "Rejected via the timeout fallback" in message.text
        assert message.keyboard == []
        assert (await scene.record())["status"] == "rejected"

        late = telegram.click(message, "Approve", TELEGRAM["alice"],
                              data=approve_data_of_first_send(telegram))
        shown = answer(telegram, await deliver(telegram, scene, late))
        assert "already" in shown
        assert (await scene.record())["status"] == "rejected"
        assert scene.bank.transfers == []
    assert telegram.violations == []


def approve_data_of_first_send(fake: FakeTelegram) -> str:
    """The Approve button's callback_data as first sent (the message has none left)."""
    [sent] = [r for r in fake.received if r.path.endswith("/sendMessage")]
    return str(sent.json()["reply_markup"]["inline_keyboard"][0][0]["callback_data"])
