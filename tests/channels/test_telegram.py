"""TelegramChannel against the fake Bot API on loopback: the message and its inline keyboard,
callback_data that fits 64 bytes and holds no part of the call, the webhook's secret token,
keys the channel did not issue, and the edit that leaves no buttons."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from hookgate.channels.base import CardOutcome, ChannelConfigError, DeliveredCard, DeliveryError
from hookgate.channels.telegram import callback_data
from hookgate.channels.telegram.channel import TelegramChannel
from tests.channels.conftest import approval_card, parse, rejection
from tests.fakes.telegram import FakeTelegram, TelegramMessage


async def sent(fake: FakeTelegram, **card: object) -> tuple[TelegramChannel, TelegramMessage]:
    channel = TelegramChannel("ops-telegram", "acme", fake.channel_config())
    delivered = await channel.send_card(approval_card("cr_0123456789abcdef01234567", **card))
    assert delivered.ref["chat_id"] == fake.chat_id
    return channel, fake.messages[delivered.ref["message_id"]]


async def test_the_message_shows_the_call_with_secrets_masked_and_two_buttons(
        telegram: FakeTelegram) -> None:
    channel, message = await sent(telegram)
    assert "Approval required: wire_transfer" in message.text
    assert "ACME GmbH" in message.text and "sk-live-123" not in message.text
    assert set(message.callback_data()) == {"Approve", "Reject"}
    await channel.aclose()
    assert telegram.violations == []


async def test_callback_data_is_a_short_key_that_holds_nothing_of_the_call(
        telegram: FakeTelegram) -> None:
    long_args = {"memo": "x" * 3000, "to": "ACME GmbH", "amount_eur": 1200}
    channel, message = await sent(telegram, args=long_args)
    for data in message.callback_data().values():
        assert len(data.encode()) <= 64
        assert not any(word in data for word in ("wire_transfer", "ACME", "1200", "xxxx"))
    await channel.aclose()


def test_a_request_id_too_long_for_64_bytes_is_refused_before_sending() -> None:
    with pytest.raises(callback_data.CallbackDataTooLong):
        callback_data.encode("s" * 32, "ops", "cr_" + "0" * 60, "approve")


async def test_a_request_id_too_long_fails_delivery_and_posts_nothing(
        telegram: FakeTelegram) -> None:
    channel = TelegramChannel("ops-telegram", "acme", telegram.channel_config())
    with pytest.raises(DeliveryError, match="64-byte callback_data"):
        await channel.send_card(approval_card("cr_" + "0" * 60))
    assert telegram.messages == {}
    await channel.aclose()


async def test_a_click_with_the_secret_token_is_a_decision_by_the_telegram_user(
        telegram: FakeTelegram) -> None:
    channel, message = await sent(telegram)
    action = parse(channel, telegram.click(message, "Reject", 1002, query_id="q-1"))
    assert (action.kind, action.request_id, action.decision, action.platform_user_id) == (
        "decision", "cr_0123456789abcdef01234567", "reject", "1002")
    assert action.dedupe_key == "callback_query:q-1"
    reply = channel.reply(telegram.click(message, "Reject", 1002).request(), action,
                          outcome=None, message="not allowed: " + "n" * 300)
    answer = json.loads(reply.body)
    assert answer["method"] == "answerCallbackQuery" and answer["callback_query_id"] == "q-1"
    assert len(answer["text"]) <= 200
    await channel.aclose()


async def test_updates_without_the_right_secret_token_are_refused_with_401(
        telegram: FakeTelegram) -> None:
    channel, message = await sent(telegram)
    assert rejection(channel, telegram.click(message, "Approve", 1001, signed=False)) == 401
    guessed = telegram.click(message, "Approve", 1001, secret_token="guessed-secret-token-000000")
    assert rejection(channel, guessed) == 401
    prefix = telegram.click(message, "Approve", 1001, secret_token=telegram.secret_token[:-1])
    assert rejection(channel, prefix) == 401
    await channel.aclose()


async def test_callback_data_the_channel_did_not_issue_is_refused_with_401(
        telegram: FakeTelegram) -> None:
    channel, message = await sent(telegram)
    approve = message.callback_data()["Approve"]
    _, request_id, tag = approve.split(".")
    forged = {
        "flipped decision": f"r.{request_id}.{tag}",
        "another request": f"a.cr_ffffffffffffffffffffffff.{tag}",
        "no tag": f"a.{request_id}",
        "raw request id": request_id,
    }
    for what, data in forged.items():
        assert rejection(channel, telegram.click(message, "Approve", 1001, data=data)) == 401, what
    # The same key is not valid for another channel sharing the bot and its secret.
    other = TelegramChannel("sales-telegram", "acme", telegram.channel_config())
    assert rejection(other, telegram.click(message, "Approve", 1001)) == 401
    await channel.aclose()
    await other.aclose()


async def test_other_updates_are_ignored_and_bad_bodies_get_400(
        telegram: FakeTelegram) -> None:
    channel, _message = await sent(telegram)
    text = telegram.update({"message": {"message_id": 1, "date": 0, "text": "hi",
                                        "chat": {"id": telegram.chat_id, "type": "group"}}})
    assert parse(channel, text).kind == "ignored"
    bad = telegram.update({})
    bad = type(bad)(bad.method, bad.headers, bad.query, b"not json")
    assert rejection(channel, bad) == 400
    await channel.aclose()


async def test_the_decided_message_says_who_and_has_no_buttons(
        telegram: FakeTelegram) -> None:
    channel, message = await sent(telegram)
    delivered_ref = {"chat_id": telegram.chat_id, "message_id": message.message_id,
                     "tool": "wire_transfer"}
    outcome = CardOutcome("cr_0123456789abcdef01234567", "approved", decided_by="bob",
                          decided_at=datetime(2025, 3, 1, 9, 0, tzinfo=UTC), via="telegram")
    await channel.update_card(DeliveredCard("ops-telegram", delivered_ref), outcome)
    assert "Approved by bob via Telegram at 2025-03-01 09:00 UTC" in message.text
    assert message.keyboard == []
    # The same update again is not an error ("message is not modified").
    await channel.update_card(DeliveredCard("ops-telegram", delivered_ref), outcome)
    assert len(message.edits) == 1
    await channel.aclose()
    assert telegram.violations == []


@pytest.mark.parametrize(("config", "words"), [
    ({"secret_token": "short"}, "at least 24"),
    ({"secret_token": "has spaces in it and is long enough"}, "only A-Z"),
    ({"bot_token": ""}, "missing 'bot_token'"),
])
def test_unusable_settings_are_refused_naming_the_setting(
        telegram: FakeTelegram, config: dict[str, str], words: str) -> None:
    with pytest.raises(ChannelConfigError, match=words):
        TelegramChannel("t", "acme", telegram.channel_config(**config))
