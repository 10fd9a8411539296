"""Discord end to end: a real server on loopback, the fake Discord API, and signed
interactions posted to the server as Discord posts them. A click is acknowledged before the
database is touched (deferred update), so Discord's 3-second deadline holds while the
database is held by another connection; the decision follows, the clicker hears it in an
ephemeral follow-up, and the message is edited."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from hookgate.approvals.quorum import QuorumRule
from hookgate.runtime.deployment import ChannelSpec
from tests.channels.world import API_TOKEN, DISCORD, Scene, auth, waiting_run
from tests.fakes.discord import DiscordMessage, FakeDiscord
from tests.fakes.server import BuiltCallback

pytestmark = pytest.mark.both_databases

QUORUM = {"allow_self_approval": False,
          "approval_quorum": (QuorumRule.parse("wire_transfer", "args.amount > 50000", 2,
                                               None),)}


def ops_discord(fake: FakeDiscord) -> list[ChannelSpec]:
    return [ChannelSpec("ops-discord", "discord", "acme", fake.channel_config())]


def the_message(fake: FakeDiscord) -> DiscordMessage:
    [message] = fake.messages.values()
    return message


def token_of(click: BuiltCallback) -> str:
    return str(json.loads(click.body)["token"])


async def follow_up(fake: FakeDiscord, click: BuiltCallback) -> str:
    """What the clicker was told (the ephemeral follow-up of the click's interaction)."""
    token = token_of(click)
    [body] = await asyncio.to_thread(fake.wait, lambda: fake.followups.get(token),
                                     f"the follow-up of {token}")
    assert body["flags"] == 64  # ephemeral: only the clicker sees it
    return str(body["content"])


async def acknowledged(scene: Scene, click: BuiltCallback) -> None:
    reply = await scene.send(click)
    assert (reply.status_code, reply.json()) == (200, {"type": 6}), reply.text


async def edited(fake: FakeDiscord, message: DiscordMessage) -> None:
    await asyncio.to_thread(fake.wait, lambda: message.edits, "the message's edit")


@contextlib.contextmanager
def database_held(database_url: str) -> Iterator[None]:
    """Another connection holds the database so that every write waits until it lets go."""
    if database_url.startswith("sqlite"):
        conn = sqlite3.connect(database_url.split("///", 1)[1], isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    url = database_url.replace("postgresql+asyncpg://", "postgresql://").replace(
        "postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as pg:
        pg.execute("LOCK TABLE channel_callbacks_seen, confirmation_requests "
                   "IN ACCESS EXCLUSIVE MODE")
        yield
        pg.rollback()


async def test_a_click_is_acknowledged_while_the_database_is_held_then_decides_once(
        database_url: str, discord: FakeDiscord, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_discord(discord), "ops-discord",
                           lambda: discord.messages) as scene:
        message = the_message(discord)
        assert "wire_transfer" in message.content and "ACME GMBH" in message.content
        assert API_TOKEN not in message.content

        click = discord.click(message, "Approve", DISCORD["alice"])
        with database_held(database_url):
            # Answered while no write can happen: the answer does not wait on the database.
            await acknowledged(scene, click)
            assert message.edits == [] and discord.followups == {}
        assert await follow_up(discord, click) == "Approved"
        assert (await scene.finished())["status"] == "completed"
        assert scene.bank.transfers == [{"amount": 60000.0, "vendor": "ACME GMBH"}]
        await edited(discord, message)
        assert "Approved by alice via Discord" in message.content
        assert message.components == []
        record = await scene.record()
        assert record["decision"]["channel_identity"] == f"discord:{DISCORD['alice']}"
        assert record["decision"]["via"] == "discord"

        assert (await scene.send(click)).status_code == 401  # the same interaction again
        assert len(scene.bank.transfers) == 1
    assert discord.violations == []


async def test_ping_bad_signatures_and_foreign_clicks_change_nothing(
        database_url: str, discord: FakeDiscord, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_discord(discord), "ops-discord",
                           lambda: discord.messages) as scene:
        message = the_message(discord)
        pong = await scene.send(discord.ping())
        assert (pong.status_code, pong.json()) == (200, {"type": 1})
        forged = await scene.send(discord.click(message, "Approve", DISCORD["alice"],
                                                signed=False))
        assert forged.status_code == 401
        stale = await scene.send(discord.click(message, "Approve", DISCORD["alice"],
                                               timestamp=1_600_000_000))
        assert stale.status_code == 401

        not_allowed = {
            "unknown user": discord.click(message, "Approve", "299999999999999999"),
            "user of another org": discord.click(message, "Approve", DISCORD["mallory"]),
            "not the initiator": discord.click(message, "Approve", DISCORD["bob"]),
            "another request": discord.click(message, "Approve", DISCORD["alice"],
                                             custom_id="hookgate:approve:cr_fffffff"),
        }
        for what, click in not_allowed.items():
            await acknowledged(scene, click)
            assert (await follow_up(discord, click)).startswith("not allowed"), what
        await scene.untouched()
        assert message.edits == []

        click = discord.click(message, "Approve", DISCORD["alice"])
        await acknowledged(scene, click)
        assert await follow_up(discord, click) == "Approved"
        assert (await scene.finished())["status"] == "completed"
    assert discord.violations == []


async def test_a_decision_in_the_inbox_edits_the_discord_message(
        database_url: str, discord: FakeDiscord, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_discord(discord), "ops-discord",
                           lambda: discord.messages) as scene:
        await scene.decide_in_inbox("reject", "not this quarter")
        message = the_message(discord)
        await edited(discord, message)
        assert "Rejected by alice via the web inbox" in message.content
        assert message.components == []
        assert scene.bank.transfers == []
    assert discord.violations == []


async def test_four_eyes_and_quorum_count_a_person_once_across_discord_and_the_inbox(
        database_url: str, discord: FakeDiscord, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_discord(discord), "ops-discord",
                           lambda: discord.messages, agent_options=QUORUM,
                           scope="org_members") as scene:
        message = the_message(discord)
        mine = discord.click(message, "Approve", DISCORD["alice"])
        await acknowledged(scene, mine)
        assert "four eyes" in await follow_up(discord, mine)
        first = discord.click(message, "Approve", DISCORD["bob"])
        await acknowledged(scene, first)
        assert await follow_up(discord, first) == (
            "Approval recorded: 1 of 2 approvals (bob); waiting for more")
        again: httpx.Response = await scene.client.post(
            f"/api/confirmations/{scene.request_id}/respond",
            json={"decision": "approve", "via": "inbox"}, headers=auth("bob"))
        assert again.status_code != 200
        record = await scene.record()
        assert (record["status"], record["approvals"]["count"]) == ("pending", 1)

        last = discord.click(message, "Approve", DISCORD["olivia"])
        await acknowledged(scene, last)
        assert await follow_up(discord, last) == "Approved"
        assert (await scene.finished())["status"] == "completed"
        assert len(scene.bank.transfers) == 1
    assert discord.violations == []
