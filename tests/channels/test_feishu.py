"""The Feishu/Lark channel against a strict fake Feishu on loopback."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from hookgate.channels.base import (
    CardOutcome,
    ChannelConfigError,
    DeliveredCard,
    DeliveryError,
)
from hookgate.channels.feishu.channel import FeishuChannel
from hookgate.channels.registry import validate_channel_config
from tests.channels.conftest import approval_card, parse, rejection
from tests.fakes.feishu import MESSAGES_PATH, FakeFeishu, buttons_of, card_text, check_card


@pytest.fixture
async def channel(feishu: FakeFeishu) -> AsyncIterator[FeishuChannel]:
    ch = FeishuChannel("ch-feishu", "org-1", feishu.channel_config())
    yield ch
    await ch.aclose()


# -- sending and updating ----------------------------------------------------------------------


async def test_the_card_reaches_the_chat_as_a_json_2_string_with_approve_and_reject(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    delivered = await channel.send_card(approval_card("req-1"))

    sent = feishu.requests_to(MESSAGES_PATH)[0]
    assert isinstance(sent.json()["content"], str)
    assert sent.json()["uuid"] == "req-1"
    assert sent.query == {"receive_id_type": "chat_id"}
    assert feishu.violations == []
    [card] = feishu.cards()
    assert card["schema"] == "2.0"
    values = [b["behaviors"][0]["value"] for b in buttons_of(card)]
    assert [(v["req"], v["decision"]) for v in values] == [("req-1", "approve"),
                                                           ("req-1", "reject")]
    text = card_text(card)
    assert "wire_transfer" in text and "Buyer (buyer)" in text and "bob" in text
    assert "14 min" in text or "15 min" in text
    assert delivered == DeliveredCard("ch-feishu", {"message_id": "om_1",
                                                    "tool": "wire_transfer"})


async def test_the_card_masks_secrets_and_cuts_long_arguments_pointing_to_the_inbox(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    card = approval_card("req-2", args={"api_key": "sk-live-123", "sql": "SELECT 1 " * 400})
    await channel.send_card(card)

    text = card_text(feishu.cards()[0])
    assert "sk-live-123" not in text
    assert "••••" in text
    assert "… [cut, 3600 chars in all — see the inbox: https://gate.example/inbox/req-2]" in text
    assert feishu.violations == []


async def test_a_send_retried_with_the_same_request_id_posts_one_card(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    first = await channel.send_card(approval_card("req-3"))
    second = await channel.send_card(approval_card("req-3"))
    assert first.ref["message_id"] == second.ref["message_id"]
    assert len(feishu.cards()) == 1


async def test_the_tenant_token_is_fetched_once_and_shared_by_concurrent_sends(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    await asyncio.gather(*(channel.send_card(approval_card(f"req-c{i}")) for i in range(3)))
    await channel.notify("three cards are waiting")
    assert feishu.token_requests == 1
    assert all(
        r.headers["authorization"].startswith("Bearer t-")
        for r in feishu.requests_to(MESSAGES_PATH)
    )


async def test_a_token_with_less_than_ten_minutes_left_is_refreshed_before_use(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    feishu.token_lifetime = 600
    await channel.send_card(approval_card("req-4"))
    await channel.send_card(approval_card("req-5"))
    assert feishu.token_requests == 2


async def test_a_revoked_token_is_refreshed_and_the_call_retried_once(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    await channel.send_card(approval_card("req-6"))
    feishu.expire_tokens()

    await channel.send_card(approval_card("req-7"))

    assert feishu.token_requests == 2
    assert len(feishu.cards()) == 2
    assert [r.json()["uuid"] for r in feishu.requests_to(MESSAGES_PATH)] == [
        "req-6", "req-7", "req-7"
    ]


async def test_a_token_that_stays_invalid_ends_in_a_delivery_error(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    feishu.fail_next(MESSAGES_PATH, status=400, times=5,
                     json_body={"code": 99991663, "msg": "Invalid access token"})
    with pytest.raises(DeliveryError) as caught:
        await channel.send_card(approval_card("req-8"))
    assert "99991663" in str(caught.value)
    assert feishu.token_requests == 2
    assert len(feishu.requests_to(MESSAGES_PATH)) == 2


async def test_rate_limit_waits_as_long_as_x_ogw_ratelimit_reset_says(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    feishu.fail_next(MESSAGES_PATH, status=429, headers={"x-ogw-ratelimit-reset": "0.3"},
                     json_body={"code": 99991400, "msg": "request trigger frequency limit"})
    started = time.monotonic()
    await channel.send_card(approval_card("req-9"))
    assert time.monotonic() - started >= 0.3
    assert len(feishu.requests_to(MESSAGES_PATH)) == 2
    assert len(feishu.cards()) == 1


async def test_the_older_rate_limit_answer_http_400_code_99991400_is_retried_too(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    feishu.fail_next(MESSAGES_PATH, status=400,
                     json_body={"code": 99991400, "msg": "request trigger frequency limit"})
    await channel.send_card(approval_card("req-10"))
    assert len(feishu.cards()) == 1


async def test_server_errors_are_retried_then_reported_with_platform_endpoint_and_status(
    feishu: FakeFeishu,
) -> None:
    channel = FeishuChannel("ch", "org", feishu.channel_config(
        retry={"max_attempts": 3, "base_delay": 0.01, "total_timeout": 5}))
    feishu.fail_next(MESSAGES_PATH, status=503, json_body={"code": 1, "msg": "busy"}, times=9)
    try:
        with pytest.raises(DeliveryError) as caught:
            await channel.send_card(approval_card("req-11"))
    finally:
        await channel.aclose()
    error = caught.value
    assert (error.platform, error.endpoint, error.status) == (
        "feishu", f"POST {MESSAGES_PATH}", 503
    )
    assert "busy" in (error.body or "")
    assert len(feishu.requests_to(MESSAGES_PATH)) == 3


async def test_a_refused_card_is_a_delivery_error_with_feishus_code_and_log_id(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    feishu.fail_next(MESSAGES_PATH, status=400, headers={"X-Tt-Logid": "log-42"},
                     json_body={"code": 230002, "msg": "bot is not in the chat"})
    with pytest.raises(DeliveryError, match=r"230002.*bot is not in the chat.*log-42"):
        await channel.send_card(approval_card("req-12"))


async def test_after_the_decision_the_card_shows_the_outcome_and_no_buttons(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    delivered = await channel.send_card(approval_card("req-13"))
    outcome = CardOutcome("req-13", "approved", decided_by="alice",
                          decided_at=datetime(2025, 3, 1, 9, 30, tzinfo=UTC))

    await channel.update_card(delivered, outcome)

    message = feishu.messages[delivered.ref["message_id"]]
    assert len(message.patches) == 1
    assert buttons_of(message.content) == []
    text = card_text(message.content)
    assert "Approved by alice at 2025-03-01 09:30 UTC" in text
    assert "wire_transfer" in text
    assert message.content["header"]["template"] == "green"
    assert feishu.violations == []


async def test_notify_posts_a_plain_text_message(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    await channel.notify("request req-1 expired")
    assert feishu.texts() == ["request req-1 expired"]


async def test_a_lark_base_url_is_accepted(feishu: FakeFeishu) -> None:
    config = feishu.channel_config(base_url="https://open.larksuite.com")
    validate_channel_config("feishu", config)
    lark = FeishuChannel("lark", "org1", config)
    assert lark.settings.base_url.rstrip("/") == "https://open.larksuite.com"


# -- callbacks ---------------------------------------------------------------------------------


async def test_an_encrypted_signed_click_is_a_decision_by_the_operator(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    delivered = await channel.send_card(approval_card("req-20"))
    action = parse(channel, feishu.card_click("req-20", "approve", "ou_alice",
                                              event_id="ev-1"))
    assert action.kind == "decision"
    assert (action.request_id, action.decision, action.platform_user_id) == (
        "req-20", "approve", "ou_alice"
    )
    assert action.dedupe_key == "ev-1"
    assert action.ref["message_id"] == delivered.ref["message_id"]


async def test_a_plain_signed_click_and_a_string_action_value_are_understood(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    action = parse(channel, feishu.card_click("req-21", "reject", encrypted=False,
                                              value_as_string=True))
    assert (action.kind, action.request_id, action.decision) == ("decision", "req-21", "reject")


async def test_a_redelivered_click_keeps_its_dedupe_key_for_the_caller(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    first = parse(channel, feishu.card_click("req-22", "approve", event_id="ev-22"))
    again = parse(channel, feishu.card_click("req-22", "approve", event_id="ev-22"))
    assert first.dedupe_key == again.dedupe_key == "ev-22"


@pytest.mark.parametrize("encrypted", [False, True])
async def test_url_verification_is_answered_with_the_challenge(
    feishu: FakeFeishu, channel: FeishuChannel, encrypted: bool
) -> None:
    callback = feishu.url_verification("ch-77", encrypted=encrypted)
    action = parse(channel, callback)
    assert action.kind == "handshake"
    reply = channel.reply(callback.request(), action, outcome=None, message="")
    assert (reply.status_code, reply.content_type) == (200, "application/json")
    assert json.loads(reply.body) == {"challenge": "ch-77"}


async def test_url_verification_with_a_wrong_token_is_refused(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    assert rejection(channel, feishu.url_verification(verification_token="guess")) == 401
    assert rejection(channel, feishu.url_verification(encrypted=True,
                                                      verification_token="guess")) == 401


async def test_forged_and_stale_clicks_are_refused(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    cases = {
        "unsigned": feishu.card_click("r", "approve", signed=False),
        "wrong signature": feishu.card_click("r", "approve", signing_key="not-the-key"),
        "wrong verification token": feishu.card_click("r", "approve",
                                                      verification_token="guess"),
        "stale": feishu.card_click("r", "approve", timestamp=int(time.time()) - 301),
        "from the future": feishu.card_click("r", "approve", timestamp=int(time.time()) + 301),
    }
    assert {name: rejection(channel, cb) for name, cb in cases.items()} == dict.fromkeys(
        cases, 401
    )


async def test_a_click_inside_the_five_minute_window_is_accepted(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    callback = feishu.card_click("r", "approve", timestamp=int(time.time()) - 290)
    assert parse(channel, callback).kind == "decision"


async def test_signed_bodies_that_cannot_be_decrypted_or_read_are_bad_requests(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    garbage = feishu.sign_body(b'{"encrypt":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}')
    assert rejection(channel, garbage) == 400
    assert rejection(channel, feishu.sign_body(b"not json")) == 400
    not_a_button = feishu.card_click("r", "approve", value={"something": "else"})
    assert rejection(channel, not_a_button) == 400


async def test_unsigned_undecryptable_bodies_are_refused_as_unauthenticated(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    # The same answer whether or not a forged ciphertext pads correctly: no padding oracle.
    callback = feishu.card_click("r", "approve", signed=False)
    body = json.loads(callback.body)
    body["encrypt"] = body["encrypt"][:-8] + "AAAAAAA="
    tampered = type(callback)("POST", callback.headers, {}, json.dumps(body).encode())
    assert rejection(channel, tampered) == 401


async def test_other_verified_events_are_ignored(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    action = parse(channel, feishu.card_click("r", "approve", event_type="im.message.receive_v1"))
    assert action.kind == "ignored"
    reply = channel.reply(feishu.card_click("r", "approve").request(), action, outcome=None,
                          message="")
    assert json.loads(reply.body) == {}


async def test_without_encrypt_key_only_allow_unsigned_channels_accept_token_checked_clicks(
) -> None:
    with FakeFeishu(encrypt_key=None) as fake:
        channel = FeishuChannel("ch", "org", fake.channel_config())
        try:
            action = parse(channel, fake.card_click("r", "approve", encrypted=False))
            assert action.kind == "decision"
            wrong = fake.card_click("r", "approve", encrypted=False, verification_token="x")
            assert rejection(channel, wrong) == 401
            stale = fake.card_click("r", "approve", encrypted=False,
                                    timestamp=int(time.time()) - 600)
            assert rejection(channel, stale) == 401
        finally:
            await channel.aclose()


# -- the immediate reply -----------------------------------------------------------------------


async def test_the_reply_to_a_decisive_click_is_a_toast_and_the_decided_card(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    callback = feishu.card_click("req-30", "reject", "ou_carol")
    action = parse(channel, callback)
    outcome = CardOutcome("req-30", "rejected", decided_by="carol",
                          decided_at=datetime.now(UTC), reason="too expensive")

    reply = channel.reply(callback.request(), action, outcome=outcome, message="Rejected")

    body = json.loads(reply.body)
    assert body["toast"] == {"type": "success", "content": "Rejected"}
    assert body["card"]["type"] == "raw"
    card = body["card"]["data"]
    check_card(card)  # Feishu would accept it
    assert buttons_of(card) == []
    assert "Rejected by carol" in card_text(card) and "too expensive" in card_text(card)


async def test_a_click_that_changed_nothing_gets_only_a_toast(
    feishu: FakeFeishu, channel: FeishuChannel
) -> None:
    callback = feishu.card_click("req-31", "approve", "ou_mallory")
    action = parse(channel, callback)
    reply = channel.reply(callback.request(), action, outcome=None,
                          message="You may not decide this request")
    assert json.loads(reply.body) == {
        "toast": {"type": "warning", "content": "You may not decide this request"}
    }


# -- configuration -----------------------------------------------------------------------------


def test_config_validation_names_the_missing_secret(feishu: FakeFeishu) -> None:
    config = feishu.channel_config()
    del config["app_secret"]
    with pytest.raises(ChannelConfigError, match="'app_secret'"):
        validate_channel_config("feishu", config)


def test_a_channel_without_encrypt_key_is_refused_unless_unsigned_is_allowed(
    feishu: FakeFeishu,
) -> None:
    config = feishu.channel_config()
    del config["encrypt_key"]
    with pytest.raises(ChannelConfigError, match=r"'encrypt_key'.*allow_unsigned"):
        validate_channel_config("feishu", config)
    validate_channel_config("feishu", {**config, "allow_unsigned": True})
