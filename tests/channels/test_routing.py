"""Where an agent's requests go when it names several channels (approvals/routing.py), read
from a server's real channel directory: the named channels in order, without the disabled
ones and those of another org; none left, the org's first active channel; channel_only with
nothing to reach fails closed, naming what it looked for."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hookgate import Agent
from hookgate.approvals.errors import RoutingError
from hookgate.approvals.routing import route
from hookgate.runtime.channel_directory import ConfiguredChannels
from hookgate.runtime.deployment import ChannelSpec
from tests.fakes.telegram import FakeTelegram


@pytest.fixture
def directory(telegram: FakeTelegram, secrets_key: str) -> Iterator[ConfiguredChannels]:
    config = telegram.channel_config()
    yield ConfiguredChannels([
        ChannelSpec("first", "telegram", "acme", config),
        ChannelSpec("off", "telegram", "acme", config, enabled=False),
        ChannelSpec("theirs", "telegram", "other", config),
        ChannelSpec("on-call", "telegram", "acme", config),
        ChannelSpec("office", "telegram", "acme", config),
    ])


def agent(**options: Any) -> Agent:
    return Agent(id="buyer", name="Buyer", instructions="", tools=[], org_id="acme", **options)


@pytest.mark.parametrize(("named", "expected"), [
    ({"approval_channel_id": "office", "approval_channel_ids": ("on-call", "office")},
     ["office", "on-call"]),
    ({"approval_channel_ids": ("off", "on-call", "theirs")}, ["on-call"]),
    ({"approval_channel_id": "off", "approval_channel_ids": ("theirs",)}, ["first"]),
    ({}, ["first"]),
])
def test_the_named_channels_that_can_be_reached_in_order(
        directory: ConfiguredChannels, named: dict[str, Any], expected: list[str]) -> None:
    mode, found = route(agent(**named), directory)
    assert (mode, [c.id for c in found]) == ("channel", expected)


def test_channel_only_with_no_channel_left_fails_closed(telegram: FakeTelegram,
                                                        secrets_key: str) -> None:
    config = telegram.channel_config()
    only_off = ConfiguredChannels([ChannelSpec("off", "telegram", "acme", config,
                                               enabled=False),
                                   ChannelSpec("theirs", "telegram", "other", config)])
    with pytest.raises(RoutingError, match=r"is channel_only but none of its approval "
                                           r"channels \('off', 'theirs'\) is available"):
        route(agent(confirmation_mode="channel_only", approval_channel_id="off",
                    approval_channel_ids=("theirs",)), only_off)
    assert route(agent(approval_channel_ids=("off",)), only_off) == ("inline", [])
