"""ntfy end to end: a real server on loopback, the fake ntfy server, and the request the ntfy
app sends when an action button is pressed. The notification names the tool, never its
arguments; a button's token decides once, within its lifetime, as its topic's person."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from hookgate.approvals.quorum import QuorumRule
from hookgate.channels import signed_links
from hookgate.runtime.deployment import ChannelSpec
from tests.channels.world import API_TOKEN, NTFY, Scene, auth, waiting_run
from tests.fakes.ntfy import FakeNtfy, Notification
from tests.fakes.server import BuiltCallback

pytestmark = pytest.mark.both_databases

QUORUM = {"allow_self_approval": False,
          "approval_quorum": (QuorumRule.parse("wire_transfer", "args.amount > 50000", 2,
                                               None),)}
TOPICS = [NTFY["alice"], NTFY["bob"], NTFY["olivia"]]


@pytest.fixture
def ntfy() -> FakeNtfy:
    with FakeNtfy() as fake:
        yield fake  # type: ignore[misc]


def ops_ntfy(fake: FakeNtfy) -> list[ChannelSpec]:
    return [ChannelSpec("ops-ntfy", "ntfy", "acme", fake.channel_config(TOPICS))]


def first(fake: FakeNtfy, who: str) -> Notification:
    return fake.to(NTFY[who])[0]


async def press(scene: Scene, notification: Notification, label: str) -> httpx.Response:
    path, request = FakeNtfy.press(notification, label)
    assert path == "/api/channels/ops-ntfy/callback"
    return await scene.send(request)


def result(reply: httpx.Response) -> str:
    assert reply.status_code == 200, reply.text
    return str(reply.json()["result"])


def form(token: str) -> BuiltCallback:
    return BuiltCallback("POST", {"Content-Type": "application/x-www-form-urlencoded"}, {},
                         f"t={token}".encode())


async def test_a_button_decides_once_and_the_lock_screen_shows_no_arguments(
        database_url: str, ntfy: FakeNtfy, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_ntfy(ntfy), "ops-ntfy",
                           lambda: len(ntfy.notifications) >= 3) as scene:
        shown = first(ntfy, "alice").body
        assert "wire_transfer" in shown["title"]
        text = str(shown)
        for argument in ("60000", "60,000", "ACME", API_TOKEN, "vendor"):
            assert argument not in text.replace(scene.request_id, ""), argument
        assert [a["label"] for a in shown["actions"]] == ["Approve", "Reject", "Details"]

        assert result(await press(scene, first(ntfy, "alice"), "Approve")) == "Approved"
        assert (await scene.finished())["status"] == "completed"
        assert len(scene.bank.transfers) == 1
        record = await scene.record()
        assert record["decision"]["channel_identity"] == f"ntfy:{NTFY['alice']}"
        assert (await press(scene, first(ntfy, "alice"), "Approve")).status_code == 401
        assert "already" in result(await press(scene, first(ntfy, "alice"), "Reject"))
        await asyncio.to_thread(ntfy.wait, lambda: len(ntfy.to(NTFY["bob"])) >= 2,
                                "the outcome")
        # The outcome replaces the request on bob's phone, buttons and all: one notification.
        [outcome] = ntfy.shown(NTFY["bob"])
        assert outcome.sequence == first(ntfy, "bob").id
        assert "Approved by alice via ntfy" in outcome.body["message"]
        assert "actions" not in outcome.body
    assert ntfy.violations == []


async def test_forged_expired_foreign_and_ineligible_tokens_decide_nothing(
        database_url: str, ntfy: FakeNtfy, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_ntfy(ntfy), "ops-ntfy",
                           lambda: len(ntfy.notifications) >= 3) as scene:
        secret = ntfy.channel_config(TOPICS)["link_secret"]
        rid, now = scene.request_id, int(time.time())
        refused = {
            "no token": form(""),
            "forged": form(signed_links.mint("y" * 40, "ops-ntfy", rid, "approve",
                                             NTFY["alice"], now + 600)),
            "expired": form(signed_links.mint(secret, "ops-ntfy", rid, "approve",
                                              NTFY["alice"], now - 1)),
            "unknown topic": form(signed_links.mint(secret, "ops-ntfy", rid, "approve",
                                                    NTFY["mallory"], now + 600)),
        }
        statuses = {what: (await scene.send(c)).status_code for what, c in refused.items()}
        assert statuses == {"no token": 400, "forged": 401, "expired": 401,
                            "unknown topic": 401}
        assert result(await press(scene, first(ntfy, "bob"), "Approve")).startswith(
            "not allowed")
        await scene.untouched()
        assert result(await press(scene, first(ntfy, "alice"), "Approve")) == "Approved"
    assert ntfy.violations == []


async def test_four_eyes_and_quorum_count_a_person_once_across_ntfy_and_the_inbox(
        database_url: str, ntfy: FakeNtfy, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_ntfy(ntfy), "ops-ntfy",
                           lambda: len(ntfy.notifications) >= 3, agent_options=QUORUM,
                           scope="org_members") as scene:
        assert "four eyes" in result(await press(scene, first(ntfy, "alice"), "Approve"))
        assert result(await press(scene, first(ntfy, "bob"), "Approve")) == (
            "Approval recorded: 1 of 2 approvals (bob); waiting for more")
        again = await scene.client.post(
            f"/api/confirmations/{scene.request_id}/respond",
            json={"decision": "approve", "via": "inbox"}, headers=auth("bob"))
        assert again.status_code != 200
        assert (await scene.record())["approvals"]["count"] == 1
        assert result(await press(scene, first(ntfy, "olivia"), "Approve")) == "Approved"
        assert (await scene.finished())["status"] == "completed"
        assert len(scene.bank.transfers) == 1
    assert ntfy.violations == []


async def test_a_decision_in_the_inbox_replaces_every_phone_s_notification(
        database_url: str, ntfy: FakeNtfy, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_ntfy(ntfy), "ops-ntfy",
                           lambda: len(ntfy.notifications) >= 3) as scene:
        asked = {topic: ntfy.to(topic)[0].id for topic in TOPICS}
        decided = await scene.client.post(
            f"/api/confirmations/{scene.request_id}/respond",
            json={"decision": "reject", "via": "inbox"}, headers=auth("alice"))
        assert decided.status_code == 200, decided.text
        await asyncio.to_thread(ntfy.wait, lambda: len(ntfy.notifications) >= 6,
                                "the outcomes")
        for topic in TOPICS:
            [shown] = ntfy.shown(topic)
            assert shown.sequence == asked[topic], topic
            assert "Rejected by alice via the web inbox" in shown.body["message"]
            assert "actions" not in shown.body
    assert ntfy.violations == []
