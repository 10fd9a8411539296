"""Slack end to end: a real server on loopback, the fake Slack Web API, and signed
``block_actions`` payloads posted to the server's interactivity URL."""

from __future__ import annotations

from typing import Any

from hookgate.runtime.deployment import ChannelSpec
from tests.channels.world import API_TOKEN, CONTEXT, eventually, run_without_delivery, waiting_run
from tests.fakes.slack import FakeSlack, SlackMessage, block_texts


def ops_slack(fake: FakeSlack) -> list[ChannelSpec]:
    return [ChannelSpec("ops-slack", "slack", "acme", fake.channel_config())]


def buttons(message: SlackMessage) -> list[dict[str, Any]]:
    return [e for b in message.blocks or [] if b["type"] == "actions" for e in b["elements"]]


async def test_a_click_in_slack_approves_and_chat_update_shows_who(
        database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_slack(slack), "ops-slack",
                           lambda: slack.messages) as scene:
        message = next(iter(slack.messages.values()))
        shown = block_texts(message.blocks or [])
        assert "wire_transfer" in shown and "ACME GMBH" in shown
        assert all(line in shown for line in CONTEXT), shown
        assert API_TOKEN not in shown and API_TOKEN not in message.text
        assert {b["value"] for b in buttons(message)} == {scene.request_id}

        reply = await scene.send(slack.block_action(scene.request_id, "approve", "U_ALICE",
                                                    message_ts=message.ts))
        assert (reply.status_code, reply.content) == (200, b"")  # Slack's ack

        assert (await scene.finished())["status"] == "completed"
        assert scene.bank.transfers == [{"amount": 60000.0, "vendor": "ACME GMBH"}]
        await eventually(lambda: message.updates, "chat.update")
        assert buttons(message) == []
        assert "Approved by alice via Slack" in block_texts(message.blocks or [])
        record = await scene.record()
        assert record["decision"]["channel_identity"] == "slack:U_ALICE"
        assert record["decision"]["via"] == "slack"
    assert slack.violations == []


async def test_a_decision_in_the_inbox_updates_the_slack_message(
        database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_slack(slack), "ops-slack",
                           lambda: slack.messages) as scene:
        await scene.decide_in_inbox("approve")

        message = next(iter(slack.messages.values()))
        await eventually(lambda: message.updates, "chat.update")
        assert "Approved by alice via the web inbox" in block_texts(message.blocks or [])
        assert (await scene.finished())["status"] == "completed"
        assert len(scene.bank.transfers) == 1
    assert slack.violations == []


async def test_when_slack_keeps_rate_limiting_the_call_is_blocked_and_the_request_cancelled(
        database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    slack.fail_next("/api/chat.postMessage", status=429, headers={"Retry-After": "0"},
                    times=1000)

    blocked, request, bank = await run_without_delivery(database_url, ops_slack(slack),
                                                        "ops-slack")

    assert "approval card delivery failed" in blocked["observation"]
    assert "429" in blocked["observation"]
    assert request["status"] == "cancelled"
    assert bank.transfers == []
    assert len(slack.requests_to("/api/chat.postMessage")) == 5
