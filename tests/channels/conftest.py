"""Fixtures for the channel tests: the fake platforms on loopback and a sample request."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hookgate.approvals.card_text import card_numbers, card_reasons
from hookgate.channels.base import ApprovalCard, CallbackAction, CallbackRejected, Channel
from hookgate.runtime.channel_records import SECRETS_KEY_ENV, SecretsKey
from tests.fakes.discord import FakeDiscord
from tests.fakes.feishu import FakeFeishu
from tests.fakes.server import BuiltCallback
from tests.fakes.slack import FakeSlack
from tests.fakes.teams import FakeTeams
from tests.fakes.telegram import FakeTelegram
from tests.fakes.wecom import FakeWeCom


def approval_card(request_id: str = "req-1", **overrides: Any) -> ApprovalCard:
    values: dict[str, Any] = {
        "request_id": request_id,
        "tool_name": "wire_transfer",
        "args": {"to": "ACME GmbH", "amount_eur": 1200, "api_key": "sk-live-123",
                 "memo": "invoice 2024-117"},
        "agent_id": "buyer",
        "agent_name": "Buyer",
        "requester": "bob",
        "expires_at": datetime.now(UTC) + timedelta(minutes=15),
        "inbox_url": f"https://gate.example/inbox/{request_id}",
        "editable": True,  # wire_transfer is a tool the agent declares
    }
    values.update(overrides)
    # The approval wording, prepared from the context and arguments as the gate does.
    values.setdefault("reasons", card_reasons(values.get("context")))
    values.setdefault("numbers", card_numbers(values["args"]))
    return ApprovalCard(**values)


def parse(channel: Channel, callback: BuiltCallback, now: float | None = None
          ) -> CallbackAction:
    """What the channel makes of a platform's callback, received now (or at ``now``)."""
    return channel.parse_callback(callback.request(), time.time() if now is None else now)


def rejection(channel: Channel, callback: BuiltCallback, now: float | None = None) -> int:
    """The HTTP status the channel refuses ``callback`` with (fails if it is accepted)."""
    with pytest.raises(CallbackRejected) as caught:
        parse(channel, callback, now)
    return caught.value.status


@pytest.fixture
def feishu() -> Iterator[FakeFeishu]:
    with FakeFeishu() as fake:
        yield fake


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram() as fake:
        yield fake


@pytest.fixture
def teams() -> Iterator[FakeTeams]:
    with FakeTeams() as fake:
        yield fake


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake


@pytest.fixture
def wecom() -> Iterator[FakeWeCom]:
    with FakeWeCom() as fake:
        yield fake


@pytest.fixture
def secrets_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh HOOKGATE_SECRETS_KEY for this test (servers with channels need one)."""
    key = SecretsKey.generate()
    monkeypatch.setenv(SECRETS_KEY_ENV, key)
    return key
