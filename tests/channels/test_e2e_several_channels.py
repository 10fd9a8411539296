"""One request, cards in several chat channels at once (Teams and Telegram here): a real
server on loopback and both platforms' fakes. A click in either decides once, every other
card is updated in place, the channels count people, not clicks (one person clicking in
both is one vote; four eyes holds in each), and a channel whose platform fails holds up no
other."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from hookgate.approvals.quorum import QuorumRule
from hookgate.channels.teams.cards import card_texts
from hookgate.runtime.deployment import ChannelSpec
from tests.channels.world import (
    TEAMS,
    TELEGRAM,
    Scene,
    auth,
    callback_url,
    eventually,
    finished_run,
    requests,
    start_run,
    waiting_run,
    world,
)
from tests.fakes.teams import FakeTeams, TeamsActivity
from tests.fakes.telegram import FakeTelegram, TelegramMessage
from tests.live_server import live_server

pytestmark = pytest.mark.both_databases

#: The buyer's requests go to Teams first, then Telegram.
BOTH = {"approval_channel_ids": ("ops-telegram",)}
QUORUM = {**BOTH, "allow_self_approval": False,
          "approval_quorum": (QuorumRule.parse("wire_transfer", "args.amount > 50000", 2,
                                               None),)}


def both_channels(teams: FakeTeams, telegram: FakeTelegram) -> list[ChannelSpec]:
    """Teams and Telegram, and a second Telegram chat that requests are not routed to."""
    return [ChannelSpec("ops-teams", "teams", "acme", teams.channel_config()),
            ChannelSpec("ops-telegram", "telegram", "acme", telegram.channel_config()),
            ChannelSpec("sales-telegram", "telegram", "acme", telegram.channel_config())]


@asynccontextmanager
async def in_both(database_url: str, teams: FakeTeams, telegram: FakeTelegram,
                  **options: Any) -> AsyncIterator[tuple[Scene, TeamsActivity,
                                                         TelegramMessage]]:
    """The buyer waiting for approval, its card out in Teams and in Telegram."""
    async with waiting_run(database_url, both_channels(teams, telegram), "ops-teams",
                           lambda: teams.activities and telegram.messages,
                           agent_options=options.pop("agent_options", BOTH),
                           **options) as scene:
        [activity] = teams.activities.values()
        [message] = telegram.messages.values()
        yield scene, activity, message
    assert teams.violations == [] and telegram.violations == []


async def in_teams(scene: Scene, teams: FakeTeams, activity: TeamsActivity, verb: str,
                   who: str) -> str:
    """``who`` clicks ``verb`` on the Teams card; what Teams shows them."""
    reply = await scene.send(teams.invoke(activity.activity_id, verb, TEAMS[who]),
                             "ops-teams")
    assert reply.status_code == 200, reply.text
    body = reply.json()
    if body["type"] == "application/vnd.microsoft.card.adaptive":
        return card_texts(body["value"])
    return str(body["value"])


async def in_telegram(scene: Scene, telegram: FakeTelegram, message: TelegramMessage,
                      button: str, who: str, *, data: str | None = None) -> str:
    """``who`` presses ``button`` under the Telegram message (``data``: the button's
    callback_data as the person's client still shows it); what Telegram shows them."""
    reply = await telegram.deliver(scene.client, callback_url("ops-telegram"),
                                   telegram.click(message, button, TELEGRAM[who], data=data))
    assert reply.status_code == 200, reply.text
    return str(telegram.answers[reply.json()["callback_query_id"]]["text"])


async def teams_updated(teams: FakeTeams, activity: TeamsActivity) -> str:
    await asyncio.to_thread(teams.wait_for_update, activity)
    assert activity.card is not None
    return card_texts(activity.card)


async def telegram_edited(telegram: FakeTelegram, message: TelegramMessage) -> str:
    await asyncio.to_thread(telegram.wait_for_edit, message)
    return message.text


async def test_a_click_in_teams_decides_once_and_the_telegram_message_is_edited(
        database_url: str, teams: FakeTeams, telegram: FakeTelegram,
        secrets_key: str) -> None:
    async with in_both(database_url, teams, telegram) as (scene, activity, message):
        buttons = message.callback_data()
        # The same click through a chat the request was not routed to decides nothing.
        elsewhere = await telegram.deliver(scene.client, callback_url("sales-telegram"),
                                           telegram.click(message, "Approve",
                                                          TELEGRAM["alice"]))
        assert elsewhere.status_code == 401, elsewhere.text
        await scene.untouched()
        assert "Approved by alice via Teams" in await in_teams(scene, teams, activity,
                                                                "approve", "alice")
        assert (await scene.finished())["status"] == "completed"
        assert "Approved by alice via Teams" in await telegram_edited(telegram, message)
        assert message.keyboard == []
        # The other channel's buttons, pressed before the edit reached the person, change
        # nothing: the request is decided.
        assert "already" in await in_telegram(scene, telegram, message, "Reject", "alice",
                                              data=buttons["Reject"])
        assert len(scene.bank.transfers) == 1
        assert (await scene.record())["status"] == "approved"


async def test_a_click_in_telegram_decides_and_the_teams_card_is_replaced(
        database_url: str, teams: FakeTeams, telegram: FakeTelegram,
        secrets_key: str) -> None:
    async with in_both(database_url, teams, telegram) as (scene, activity, message):
        assert await in_telegram(scene, telegram, message, "Reject", "alice") == "Rejected"
        assert (await scene.finished())["status"] == "completed"
        shown = await teams_updated(teams, activity)
        assert "Rejected by alice via Telegram" in shown
        assert "actions" not in (activity.card or {})
        assert "Rejected by alice via Telegram" in await telegram_edited(telegram, message)
        assert scene.bank.transfers == []
        record = await scene.record()
        assert record["decision"]["channel_identity"] == f"telegram:{TELEGRAM['alice']}"


async def test_a_decision_in_the_inbox_updates_the_cards_in_both_channels(
        database_url: str, teams: FakeTeams, telegram: FakeTelegram,
        secrets_key: str) -> None:
    async with in_both(database_url, teams, telegram) as (scene, activity, message):
        await scene.decide_in_inbox("reject", "not this quarter")
        assert "Rejected by alice via the web inbox" in await teams_updated(teams, activity)
        assert "Rejected by alice via the web inbox" in await telegram_edited(telegram,
                                                                              message)
        assert message.keyboard == []


async def test_one_person_clicking_in_both_channels_is_one_vote_of_a_quorum(
        database_url: str, teams: FakeTeams, telegram: FakeTelegram,
        secrets_key: str) -> None:
    async with in_both(database_url, teams, telegram, agent_options=QUORUM,
                       scope="org_members") as (scene, activity, message):
        # Four eyes in each channel: alice asked, so neither of her clicks counts.
        assert "four eyes" in await in_teams(scene, teams, activity, "approve", "alice")
        assert "four eyes" in await in_telegram(scene, telegram, message, "Approve", "alice")
        assert await in_teams(scene, teams, activity, "approve", "bob") == (
            "Approval recorded: 1 of 2 approvals (bob); waiting for more")
        # bob again, in the other channel: still bob, still one vote.
        again = await in_telegram(scene, telegram, message, "Approve", "bob")
        assert "already" in again, again
        record = await scene.record()
        assert (record["status"], record["approvals"]["count"]) == ("pending", 1)
        assert scene.bank.transfers == []
        assert activity.updates == [] and message.edits == []

        # A second person, in the other channel, completes the quorum of two.
        assert await in_telegram(scene, telegram, message, "Approve", "olivia") == "Approved"
        assert (await scene.finished())["status"] == "completed"
        assert len(scene.bank.transfers) == 1
        assert "Approved by olivia via Telegram" in await teams_updated(teams, activity)
        assert "Approved by olivia via Telegram" in await telegram_edited(telegram, message)


async def test_a_platform_that_fails_holds_up_no_other_channel(
        database_url: str, teams: FakeTeams, telegram: FakeTelegram,
        secrets_key: str) -> None:
    # Telegram answers 503 to every sendMessage until its retries run out (about 5 s).
    telegram.fail_next("/bot" + telegram.bot_token + "/sendMessage", status=503,
                       times=10_000)
    channels = [ChannelSpec("ops-teams", "teams", "acme", teams.channel_config()),
                ChannelSpec("ops-telegram", "telegram", "acme", telegram.channel_config(
                    retry={"base_delay": 0.5, "max_delay": 0.5, "max_attempts": 10_000,
                           "total_timeout": 8}))]
    deployment, bank = world(database_url, channels, approval_channel_id="ops-telegram",
                             agent_options={"approval_channel_ids": ("ops-teams",)})
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as client:
            run_id = await start_run(client)
            await eventually(lambda: teams.activities, "the Teams card")
            [activity] = teams.activities.values()
            pending = (await eventually(lambda: requests(client, "pending"),
                                        "a pending request"))[0]
            # Decided in Teams while Telegram is still refusing the card.
            click = teams.invoke(activity.activity_id, "approve", TEAMS["alice"])
            decided = await click.send(client, callback_url("ops-teams"))
            assert decided.status_code == 200, decided.text
            assert "Approved by alice via Teams" in card_texts(decided.json()["value"])
            assert telegram.messages == {}
            run = await finished_run(client, run_id)
            assert run["status"] == "completed" and len(bank.transfers) == 1
            r = await client.get(f"/api/confirmations/{pending['id']}", headers=auth("alice"))
            assert r.json()["status"] == "approved"
    assert teams.violations == []
