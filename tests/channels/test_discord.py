"""DiscordChannel against the fake Discord API on loopback: the message (everything written
by an agent or a person inside one code block, no mentions), the Ed25519 signature over
timestamp + body, PING → PONG, the deferred acknowledgement and the edit with no buttons."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hookgate.channels.base import CardOutcome, DeliveredCard
from hookgate.channels.discord.channel import DiscordChannel
from tests.channels.conftest import approval_card, parse, rejection
from tests.fakes.discord import DiscordMessage, FakeDiscord

RID = "cr_0123456789abcdef01234567"


async def sent(fake: FakeDiscord, **card: object) -> tuple[DiscordChannel, DiscordMessage]:
    channel = DiscordChannel("ops-discord", "acme", fake.channel_config())
    delivered = await channel.send_card(approval_card(RID, **card))
    return channel, fake.messages[delivered.ref["message_id"]]


async def test_the_message_keeps_agent_text_in_a_code_block_and_pings_nobody(
        discord: FakeDiscord) -> None:
    channel, message = await sent(discord, requester="@everyone ```\n**bold** [x](https://e)")
    assert message.content.startswith("```\nApproval required: wire_transfer")
    assert message.content.count("```") == 2  # the requester's fence cannot close the block
    assert "ACME GmbH" in message.content and "sk-live-123" not in message.content
    assert set(message.custom_ids()) == {"Approve", "Reject"}
    await channel.aclose()
    assert discord.violations == []  # allowed_mentions: {"parse": []}


async def test_ping_is_answered_with_pong_and_bad_signatures_get_401(
        discord: FakeDiscord) -> None:
    channel = DiscordChannel("ops-discord", "acme", discord.channel_config())
    action = parse(channel, discord.ping())
    assert json.loads(channel.reply(discord.ping().request(), action, outcome=None,
                                    message="").body) == {"type": 1}
    now = int(time.time())
    assert rejection(channel, discord.ping(signed=False)) == 401
    assert rejection(channel, discord.ping(key=Ed25519PrivateKey.generate())) == 401
    assert rejection(channel, discord.ping(timestamp=now - 600)) == 401
    tampered = discord.ping()
    tampered = type(tampered)(tampered.method, tampered.headers, {},
                              tampered.body.replace(b'"type": 1', b'"type": 3'))
    assert rejection(channel, tampered) == 401
    await channel.aclose()


async def test_a_click_is_acknowledged_with_a_deferred_update_and_names_the_user(
        discord: FakeDiscord) -> None:
    channel, message = await sent(discord)
    click = discord.click(message, "Reject", "200000000000000002")
    action = parse(channel, click)
    assert (action.kind, action.request_id, action.decision, action.platform_user_id) == (
        "decision", RID, "reject", "200000000000000002")
    assert action.dedupe_key == f"interaction:{json.loads(click.body)['id']}"
    reply = channel.reply(click.request(), action, outcome=None, message="")
    assert json.loads(reply.body) == {"type": 6}
    await channel.aclose()


async def test_the_decided_message_says_who_and_has_no_buttons(discord: FakeDiscord) -> None:
    channel, message = await sent(discord)
    outcome = CardOutcome(RID, "approved", decided_by="bob", via="discord",
                          decided_at=datetime(2025, 3, 1, 9, 0, tzinfo=UTC))
    await channel.update_card(DeliveredCard("ops-discord", {
        "channel": discord.channel_id, "message_id": message.message_id,
        "tool": "wire_transfer"}), outcome)
    assert "Approved by bob via Discord at 2025-03-01 09:00 UTC" in message.content
    assert message.components == []
    await channel.aclose()
    assert discord.violations == []
