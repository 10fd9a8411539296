"""Feishu/Lark end to end: a real server on loopback, the fake Feishu Open Platform posting
its signed, encrypted card callbacks to the server's callback URL."""

from __future__ import annotations

import time

import httpx
import pytest

from hookgate.runtime.deployment import ChannelSpec
from tests.channels.world import (
    API_TOKEN,
    CONTEXT,
    PUBLIC_URL,
    callback_url,
    eventually,
    run_without_delivery,
    waiting_run,
    world,
)
from tests.fakes.feishu import MESSAGES_PATH, FakeFeishu, buttons_of, card_text
from tests.live_server import live_server


def ops_feishu(fake: FakeFeishu) -> list[ChannelSpec]:
    return [ChannelSpec("ops-feishu", "feishu", "acme", fake.channel_config())]


@pytest.mark.both_databases
async def test_a_click_in_feishu_approves_the_exact_call_and_the_card_shows_who(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_feishu(feishu), "ops-feishu",
                           feishu.cards) as scene:
        card = feishu.cards()[0]
        shown = card_text(card)
        assert "wire_transfer" in shown and "ACME GMBH" in shown  # as the hook rewrote it
        assert all(line in shown for line in CONTEXT), shown
        assert API_TOKEN not in shown and "••••" in shown
        assert f"{PUBLIC_URL}/#/confirmations/{scene.request_id}" in shown
        approve, reject = (b["behaviors"][0]["value"] for b in buttons_of(card))
        assert (approve["req"], approve["decision"]) == (scene.request_id, "approve")
        assert (reject["req"], reject["decision"]) == (scene.request_id, "reject")
        assert scene.bank.transfers == []

        clicked_at = time.monotonic()
        reply = await scene.send(feishu.card_click(scene.request_id, "approve",
                                                   open_id="ou_alice", value=approve))
        assert time.monotonic() - clicked_at < 3  # Feishu shows an error after 3 s

        assert reply.status_code == 200, reply.text
        assert reply.json()["toast"] == {"type": "success", "content": "Approved"}
        decided = reply.json()["card"]["data"]
        assert buttons_of(decided) == [] and "Approved by alice via Feishu" in card_text(decided)

        run = await scene.finished()
        assert run["status"] == "completed" and run["answer"] == "Paid ACME GMBH."
        assert scene.bank.transfers == [{"amount": 60000.0, "vendor": "ACME GMBH"}]

        message = next(iter(feishu.messages.values()))
        await eventually(lambda: message.patches, "the card's PATCH by message id")
        assert buttons_of(message.content) == []
        assert "Approved by alice via Feishu" in card_text(message.content)

        record = await scene.record()
        assert (record["status"], record["decision"]["responded_by"]) == ("approved", "alice")
        assert record["decision"]["channel_identity"] == "feishu:ou_alice"
        assert record["decision"]["via"] == "feishu"
    assert feishu.violations == []


async def test_a_decision_in_the_inbox_updates_the_feishu_card(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_feishu(feishu), "ops-feishu",
                           feishu.cards) as scene:
        await scene.decide_in_inbox("reject", reason="wrong vendor")

        message = next(iter(feishu.messages.values()))
        await eventually(lambda: message.patches, "the card's PATCH by message id")
        shown = card_text(message.content)
        assert "Rejected by alice via the web inbox" in shown and "Reason: wrong vendor" in shown
        assert buttons_of(message.content) == []
        assert (await scene.finished())["status"] == "completed"
        assert scene.bank.transfers == []
    assert feishu.violations == []


async def test_feishu_url_verification_is_answered_with_the_challenge(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    deployment, _ = world(database_url, ops_feishu(feishu))
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            url = callback_url("ops-feishu")
            plain = await feishu.url_verification("ch-1").send(client, url)
            sealed = await feishu.url_verification("ch-2", encrypted=True).send(client, url)
            forged = await feishu.url_verification("ch-3", verification_token="guess").send(
                client, url)
    assert (plain.status_code, plain.json()) == (200, {"challenge": "ch-1"})
    assert (sealed.status_code, sealed.json()) == (200, {"challenge": "ch-2"})
    assert forged.status_code == 401


async def test_when_feishu_keeps_failing_the_call_is_blocked_and_the_request_cancelled(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    feishu.fail_next(MESSAGES_PATH, status=500, times=1000,
                     json_body={"code": 1, "msg": "internal error"})

    blocked, request, bank = await run_without_delivery(database_url, ops_feishu(feishu),
                                                        "ops-feishu")

    assert "approval card delivery failed" in blocked["observation"]
    assert "feishu" in blocked["observation"] and "500" in blocked["observation"]
    assert request["status"] == "cancelled"
    assert "delivery failed" in request["decision"]["reason"]
    assert bank.transfers == []
    assert len(feishu.requests_to(MESSAGES_PATH)) == 5  # retried up to max_attempts
