"""The Slack channel against a strict fake Slack Web API on loopback."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from hookgate.channels.base import (
    CardOutcome,
    ChannelConfigError,
    DeliveredCard,
    DeliveryError,
)
from hookgate.channels.registry import validate_channel_config
from hookgate.channels.slack.channel import SlackChannel
from hookgate.channels.slack.signing import signature
from tests.channels.conftest import approval_card, parse, rejection
from tests.fakes.server import BuiltCallback
from tests.fakes.slack import FakeSlack, block_texts

POST = "/api/chat.postMessage"


@pytest.fixture
async def channel(slack: FakeSlack) -> AsyncIterator[SlackChannel]:
    ch = SlackChannel("ch-slack", "org-1", slack.channel_config())
    yield ch
    await ch.aclose()


def buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for b in blocks if b["type"] == "actions" for e in b["elements"]]


async def test_the_message_has_a_fallback_text_and_approve_reject_buttons_for_the_request(
    slack: FakeSlack, channel: SlackChannel
) -> None:
    delivered = await channel.send_card(approval_card("req-1"))

    [sent] = slack.requests_to(POST)
    assert sent.headers["authorization"] == f"Bearer {slack.bot_token}"
    assert slack.violations == []
    message = slack.messages[delivered.ref["ts"]]
    assert "wire_transfer" in message.text
    actions = [b for b in message.blocks or [] if b["type"] == "actions"]
    assert actions[0]["block_id"] == "approval_req-1"
    assert [(b["action_id"], b["value"]) for b in buttons(message.blocks or [])] == [
        ("approve", "req-1"), ("reject", "req-1")
    ]
    assert delivered == DeliveredCard(
        "ch-slack", {"channel": slack.channel_id, "ts": message.ts, "tool": "wire_transfer"}
    )


async def test_the_message_masks_secrets_and_cuts_long_arguments(
    slack: FakeSlack, channel: SlackChannel
) -> None:
    card = approval_card("req-2", args={"password": "hunter2", "payload": "q" * 5000})
    delivered = await channel.send_card(card)
    text = block_texts(slack.messages[delivered.ref["ts"]].blocks or [])
    assert "hunter2" not in text
    assert "… [cut, 5000 chars in all — see the inbox: https://gate.example/inbox/req-2]" in text
    assert slack.violations == []  # and every section stayed within 3000 characters


async def test_user_text_cannot_ping_the_channel(slack: FakeSlack, channel: SlackChannel) -> None:
    card = approval_card("req-3", requester="<!channel> urgent", args={"note": "<@U123>"})
    delivered = await channel.send_card(card)
    blocks = slack.messages[delivered.ref["ts"]].blocks or []
    carrying = [b["text"] for b in blocks if "text" in b and "<!channel>" in b["text"]["text"]]
    assert carrying and all(t["type"] == "plain_text" for t in carrying)


async def test_after_the_decision_the_message_shows_the_outcome_without_buttons(
    slack: FakeSlack, channel: SlackChannel
) -> None:
    delivered = await channel.send_card(approval_card("req-4"))
    outcome = CardOutcome("req-4", "rejected", decided_by="dana",
                          decided_at=datetime(2025, 3, 1, 9, 30, tzinfo=UTC), reason="no")

    await channel.update_card(delivered, outcome)

    message = slack.messages[delivered.ref["ts"]]
    assert len(message.updates) == 1
    assert buttons(message.blocks or []) == []
    assert "Rejected by dana at 2025-03-01 09:30 UTC" in block_texts(message.blocks or [])
    assert "Rejected by dana" in message.text
    assert slack.violations == []


async def test_rate_limited_posts_wait_for_retry_after_then_go_through(
    slack: FakeSlack, channel: SlackChannel
) -> None:
    slack.fail_next(POST, status=429, headers={"Retry-After": "0.25"})
    started = time.monotonic()
    await channel.send_card(approval_card("req-5"))
    assert time.monotonic() - started >= 0.25
    assert len(slack.requests_to(POST)) == 2 and len(slack.messages) == 1


async def test_slack_errors_are_delivery_errors_naming_slacks_error(
    slack: FakeSlack,
) -> None:
    channel = SlackChannel("ch", "org", slack.channel_config(bot_token="xoxb-revoked"))
    try:
        with pytest.raises(DeliveryError, match="invalid_auth") as caught:
            await channel.send_card(approval_card("req-6"))
    finally:
        await channel.aclose()
    assert caught.value.endpoint == "POST chat.postMessage"


async def test_notify_posts_plain_text(slack: FakeSlack, channel: SlackChannel) -> None:
    await channel.notify("req-1 expired")
    assert [m.text for m in slack.messages.values()] == ["req-1 expired"]


# -- interactivity -----------------------------------------------------------------------------


async def test_a_signed_click_is_a_decision_by_the_slack_user(
    slack: FakeSlack, channel: SlackChannel
) -> None:
    delivered = await channel.send_card(approval_card("req-10"))
    callback = slack.block_action("req-10", "approve", "U_ALICE", action_ts="1700000000.1")
    action = parse(channel, callback)
    assert (action.kind, action.request_id, action.decision, action.platform_user_id) == (
        "decision", "req-10", "approve", "U_ALICE"
    )
    assert action.dedupe_key == f"{delivered.ref['ts']}:1700000000.1:U_ALICE"
    assert action.ref == {"channel": slack.channel_id, "ts": delivered.ref["ts"]}
    reply = channel.reply(callback.request(), action, outcome=None, message="")
    assert (reply.status_code, reply.body) == (200, b"")


async def test_forged_and_stale_clicks_are_refused(
    slack: FakeSlack, channel: SlackChannel
) -> None:
    now = int(time.time())
    cases = {
        "unsigned": slack.block_action("r", "approve", signed=False),
        "wrong secret": slack.block_action("r", "approve", signing_secret="guess"),
        "stale": slack.block_action("r", "approve", timestamp=now - 301),
        "future": slack.block_action("r", "approve", timestamp=now + 301),
    }
    assert {k: rejection(channel, v) for k, v in cases.items()} == dict.fromkeys(cases, 401)


async def test_a_tampered_body_no_longer_matches_its_signature(
    slack: FakeSlack, channel: SlackChannel
) -> None:
    genuine = slack.block_action("req-11", "reject")
    tampered = BuiltCallback("POST", genuine.headers, {},
                             genuine.body.replace(b"reject", b"approve"))
    assert rejection(channel, tampered) == 401


async def test_a_signed_body_without_a_payload_is_a_bad_request(
    slack: FakeSlack, channel: SlackChannel
) -> None:
    body = b"something=else"
    headers = {"X-Slack-Request-Timestamp": str(int(time.time()))}
    headers["X-Slack-Signature"] = signature(slack.signing_secret,
                                             headers["X-Slack-Request-Timestamp"], body)
    assert rejection(channel, BuiltCallback("POST", headers, {}, body)) == 400


async def test_other_interactions_are_ignored(slack: FakeSlack, channel: SlackChannel) -> None:
    action = parse(channel, slack.block_action("r", "approve", payload_type="view_submission"))
    assert action.kind == "ignored"


def test_config_validation_names_the_missing_secret(slack: FakeSlack) -> None:
    config = slack.channel_config()
    del config["signing_secret"]
    with pytest.raises(ChannelConfigError, match="'signing_secret'"):
        validate_channel_config("slack", config)
