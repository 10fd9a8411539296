"""A used link stays used for as long as it could still be clicked: the dedupe key of a
channel whose callbacks outlive the platforms' ±5-minute window (an email link valid for a
day, an ntfy button) is not pruned before the link expires, on any backend."""

from __future__ import annotations

import time

import pytest

from hookgate.channels.base import CallbackAction, CallbackRejected
from hookgate.runtime.channel_directory import ConfiguredChannels
from hookgate.runtime.deployment import ChannelSpec
from hookgate.server.callbacks import SEEN_KEY_TTL_S, ChannelCallbacks
from hookgate.storage.database import Database

pytestmark = pytest.mark.both_databases

DAY_S = 24 * 3600


def _mail(link_ttl_s: int) -> ChannelSpec:
    return ChannelSpec("ops-mail", "email", "acme", {
        "smtp_host": "127.0.0.1", "smtp_port": 2525, "starttls": False,
        "from_address": "hookgate@gate.example", "to": ["alice@acme.example"],
        "link_secret": "s" * 40, "link_ttl_s": link_ttl_s,
        "callback_url": "https://gate.example/api/channels/ops-mail/callback"})


def _click(key: str) -> CallbackAction:
    return CallbackAction("decision", request_id="REQ-1", decision="approve",
                          platform_user_id="alice@acme.example", dedupe_key=key)


@pytest.mark.parametrize("hours_later", [2, 23])
async def test_a_used_link_is_refused_until_it_expires(db: Database, secrets_key: str,
                                                       hours_later: int) -> None:
    channels = ConfiguredChannels([_mail(DAY_S)])
    now = [time.time()]
    handler = ChannelCallbacks(db, None, channels, clock=lambda: now[0])  # type: ignore[arg-type]
    channel = channels.get("ops-mail")
    assert channel is not None
    await handler._first_delivery(channel, _click("nonce-used"))
    now[0] += hours_later * 3600  # the next click prunes what may be forgotten
    await handler._first_delivery(channel, _click("nonce-other"))
    with pytest.raises(CallbackRejected) as refused:
        await handler._first_delivery(channel, _click("nonce-used"))
    assert refused.value.status == 401


async def test_keys_of_short_lived_callbacks_are_still_pruned(db: Database,
                                                              secrets_key: str) -> None:
    # The margin is kept: a key older than the link's lifetime plus an hour is forgotten.
    channels = ConfiguredChannels([_mail(600)])
    now = [time.time()]
    handler = ChannelCallbacks(db, None, channels, clock=lambda: now[0])  # type: ignore[arg-type]
    channel = channels.get("ops-mail")
    assert channel is not None
    await handler._first_delivery(channel, _click("nonce-old"))
    now[0] += SEEN_KEY_TTL_S + 600 + 60
    await handler._first_delivery(channel, _click("nonce-new"))
    await handler._first_delivery(channel, _click("nonce-old"))  # forgotten: no error
