"""The WeCom channel against a strict fake WeCom server API on loopback."""

from __future__ import annotations

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
from hookgate.channels.registry import validate_channel_config
from hookgate.channels.wecom.cards import task_id
from hookgate.channels.wecom.channel import WeComChannel
from hookgate.channels.wecom.crypto import signature
from tests.channels.conftest import approval_card, parse, rejection
from tests.fakes.server import BuiltCallback
from tests.fakes.wecom import SEND_PATH, UPDATE_PATH, FakeWeCom


@pytest.fixture
async def channel(wecom: FakeWeCom) -> AsyncIterator[WeComChannel]:
    ch = WeComChannel("ch-wecom", "org-1", wecom.channel_config())
    yield ch
    await ch.aclose()


async def test_the_card_goes_to_the_configured_users_with_approve_and_reject_keys(
    wecom: FakeWeCom, channel: WeComChannel
) -> None:
    delivered = await channel.send_card(approval_card("req-1"))

    assert wecom.violations == []
    card = wecom.cards["req_req-1"]
    assert card.touser == "alice|bob"
    assert [b["key"] for b in card.card["button_list"]] == ["approve:req-1", "reject:req-1"]
    assert delivered == DeliveredCard(
        "ch-wecom", {"task_id": "req_req-1", "response_code": card.response_code,
                     "msgid": "msg1"}
    )


async def test_the_card_masks_secrets_and_marks_what_it_cut(
    wecom: FakeWeCom, channel: WeComChannel
) -> None:
    await channel.send_card(approval_card("req-2", args={"token": "t0k3n", "sql": "S" * 900}))
    card = wecom.cards["req_req-2"].card
    assert "t0k3n" not in str(card)
    assert "chars in all — see the inbox]" in card["sub_title_text"]
    inbox = [r for r in card["horizontal_content_list"] if r.get("type") == 1]
    assert inbox == [{"keyname": "Inbox", "value": "Open to edit", "type": 1,
                      "url": "https://gate.example/inbox/req-2"}]


def test_task_ids_keep_to_wecoms_alphabet_and_stay_distinct() -> None:
    assert task_id("r1") == "req_r1"
    odd, odder = task_id("a/b c"), task_id("a_b_c")
    assert odd.startswith("req_a_b_c_") and odd != odder
    long_id = task_id("x" * 300)
    assert len(long_id) <= 128 and long_id != task_id("x" * 299)


async def test_after_the_decision_the_buttons_read_approved_by_the_approver(
    wecom: FakeWeCom, channel: WeComChannel
) -> None:
    delivered = await channel.send_card(approval_card("req-3"))
    outcome = CardOutcome("req-3", "approved", decided_by="alice",
                          decided_at=datetime.now(UTC))

    await channel.update_card(delivered, outcome)

    [update] = wecom.cards["req_req-3"].updates
    assert update["button"] == {"replace_name": "Approved by alice"}
    assert update["userids"] == ["alice", "bob"]
    assert wecom.violations == []


async def test_a_response_code_works_once(wecom: FakeWeCom, channel: WeComChannel) -> None:
    delivered = await channel.send_card(approval_card("req-4"))
    outcome = CardOutcome("req-4", "expired")
    await channel.update_card(delivered, outcome)
    with pytest.raises(DeliveryError, match="response_code"):
        await channel.update_card(delivered, outcome)


async def test_a_resent_card_for_the_same_request_is_not_posted_twice(
    wecom: FakeWeCom, channel: WeComChannel
) -> None:
    await channel.send_card(approval_card("req-5"))
    again = await channel.send_card(approval_card("req-5"))
    assert len(wecom.cards) == 1
    assert again.ref["response_code"] is None  # the code went out with the first answer


async def test_the_access_token_is_cached_and_refetched_when_wecom_says_it_expired(
    wecom: FakeWeCom, channel: WeComChannel
) -> None:
    await channel.send_card(approval_card("req-6"))
    await channel.notify("hello")
    assert wecom.token_requests == 1

    wecom.expire_tokens()
    await channel.send_card(approval_card("req-7"))

    assert wecom.token_requests == 2
    assert set(wecom.cards) == {"req_req-6", "req_req-7"}
    assert wecom.texts == ["hello"]


async def test_an_unknown_token_errcode_40014_is_refetched_too(
    wecom: FakeWeCom, channel: WeComChannel
) -> None:
    await channel.notify("first")
    wecom.tokens.clear()  # WeCom forgot every token
    await channel.notify("second")
    assert wecom.texts == ["first", "second"] and wecom.token_requests == 2


async def test_a_wrong_secret_is_a_delivery_error_without_the_secret_in_it(
    wecom: FakeWeCom,
) -> None:
    channel = WeComChannel("ch", "org", wecom.channel_config(corp_secret="wrong-secret"))
    try:
        with pytest.raises(DeliveryError) as caught:
            await channel.notify("x")
    finally:
        await channel.aclose()
    assert "40001" in str(caught.value)
    assert "wrong-secret" not in str(caught.value)
    assert caught.value.endpoint == "GET /cgi-bin/gettoken"


async def test_server_errors_are_retried_then_reported(wecom: FakeWeCom) -> None:
    channel = WeComChannel("ch", "org", wecom.channel_config(
        retry={"max_attempts": 2, "base_delay": 0.01, "total_timeout": 5}))
    await channel.notify("warm the token")
    wecom.fail_next(SEND_PATH, status=502, times=5)
    try:
        with pytest.raises(DeliveryError) as caught:
            await channel.send_card(approval_card("req-8"))
    finally:
        await channel.aclose()
    assert (caught.value.status, caught.value.endpoint) == (502, f"POST {SEND_PATH}")
    assert "access_token" not in str(caught.value)
    assert len(wecom.requests_to(SEND_PATH)) == 3  # the notice, then two tries


async def test_wecoms_frequency_limit_errcode_is_retried(
    wecom: FakeWeCom, channel: WeComChannel
) -> None:
    await channel.notify("warm the token")
    wecom.fail_next(UPDATE_PATH, status=200, json_body={"errcode": 45009, "errmsg": "freq"})
    delivered = await channel.send_card(approval_card("req-9"))
    await channel.update_card(delivered, CardOutcome("req-9", "cancelled"))
    assert len(wecom.cards["req_req-9"].updates) == 1


# -- callbacks ---------------------------------------------------------------------------------


async def test_the_echostr_handshake_is_answered_with_the_plaintext(
    wecom: FakeWeCom, channel: WeComChannel
) -> None:
    callback = wecom.echostr_handshake("1288432023552776189")
    action = parse(channel, callback)
    assert action.kind == "handshake"
    reply = channel.reply(callback.request(), action, outcome=None, message="")
    assert (reply.status_code, reply.body, reply.content_type) == (
        200, b"1288432023552776189", "text/plain"
    )


async def test_forged_handshakes_are_refused(wecom: FakeWeCom, channel: WeComChannel) -> None:
    assert rejection(channel, wecom.echostr_handshake(token="guess")) == 401
    assert rejection(channel, wecom.echostr_handshake(receive_id="ww_other")) == 401
    assert rejection(channel, wecom.echostr_handshake(timestamp=int(time.time()) - 301)) == 401


async def test_a_genuine_click_is_a_decision_by_the_wecom_user(
    wecom: FakeWeCom, channel: WeComChannel
) -> None:
    await channel.send_card(approval_card("req-20"))
    callback = wecom.card_click("req-20", "reject", "bob", create_time=1700000000)
    action = parse(channel, callback)
    assert (action.kind, action.request_id, action.decision, action.platform_user_id) == (
        "decision", "req-20", "reject", "bob"
    )
    assert action.dedupe_key == "bob:1700000000:req_req-20:reject:req-20"
    assert action.ref["task_id"] == "req_req-20"
    assert action.ref["response_code"].startswith("rc-")
    reply = channel.reply(callback.request(), action, outcome=None, message="")
    assert (reply.status_code, reply.body) == (200, b"")


async def test_the_response_code_of_a_click_can_update_the_card(
    wecom: FakeWeCom, channel: WeComChannel
) -> None:
    delivered = await channel.send_card(approval_card("req-21"))
    action = parse(channel, wecom.card_click("req-21", "approve", "alice"))
    merged = DeliveredCard(delivered.channel_id, {**delivered.ref, **action.ref})
    await channel.update_card(merged, CardOutcome("req-21", "approved", decided_by="alice"))
    assert wecom.cards["req_req-21"].updates[0]["response_code"] == action.ref["response_code"]


async def test_forged_stale_and_misaddressed_clicks_are_refused(
    wecom: FakeWeCom, channel: WeComChannel
) -> None:
    now = int(time.time())
    cases = {
        "unsigned": wecom.card_click("r", "approve", signed=False),
        "wrong token": wecom.card_click("r", "approve", token="guess"),
        "stale": wecom.card_click("r", "approve", timestamp=now - 301),
        "other corp": wecom.card_click("r", "approve", receive_id="ww_other"),
    }
    assert {k: rejection(channel, v) for k, v in cases.items()} == dict.fromkeys(cases, 401)


async def test_bodies_with_entities_or_that_do_not_decrypt_are_bad_requests(
    wecom: FakeWeCom, channel: WeComChannel
) -> None:
    genuine = wecom.card_click("r", "approve")
    bomb = (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;">]>'
            b"<xml><Encrypt>&b;</Encrypt></xml>")
    assert rejection(channel, BuiltCallback("POST", {}, genuine.query, bomb)) == 400
    huge = b"<xml><Encrypt>" + b"A" * 300_000 + b"</Encrypt></xml>"
    assert rejection(channel, BuiltCallback("POST", {}, genuine.query, huge)) == 400
    assert rejection(channel, BuiltCallback("POST", {}, genuine.query, b"<xml><oops")) == 400
    # A correctly signed ciphertext that is not ours to open.
    bogus = "A" * 64
    query = dict(genuine.query, msg_signature=signature(wecom.token, genuine.query["timestamp"],
                                                        genuine.query["nonce"], bogus))
    body = f"<xml><Encrypt><![CDATA[{bogus}]]></Encrypt></xml>".encode()
    assert rejection(channel, BuiltCallback("POST", {}, query, body)) == 400


async def test_other_events_and_other_buttons_are_ignored(
    wecom: FakeWeCom, channel: WeComChannel
) -> None:
    assert parse(channel, wecom.card_click("r", "approve", event="enter_agent")).kind == "ignored"
    assert parse(channel, wecom.card_click("r", "x", event_key="menu:1")).kind == "ignored"


def test_config_validation_names_the_missing_secret_and_checks_the_aes_key(
    wecom: FakeWeCom,
) -> None:
    config = wecom.channel_config()
    del config["corp_secret"]
    with pytest.raises(ChannelConfigError, match="'corp_secret'"):
        validate_channel_config("wecom", config)
    with pytest.raises(ChannelConfigError, match=r"encoding_aes_key.*43"):
        validate_channel_config("wecom", {**wecom.channel_config(), "encoding_aes_key": "short"})
    for key in ("touser", "agent_id", "token"):
        with pytest.raises(ChannelConfigError, match=f"'{key}'"):
            validate_channel_config("wecom", {**wecom.channel_config(), key: ""})
