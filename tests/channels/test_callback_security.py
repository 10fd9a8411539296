"""Issue 4 §5, point by point, against a real server: every callback that should not decide
a request is refused, and the request, the run and the bank stay exactly as they were.

Several channels share one fake Feishu app here on purpose: their callbacks all carry a
valid signature, so what refuses them is the channel/org binding, not the crypto.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from hookgate.channels.wecom.crypto import signature
from hookgate.runtime.deployment import ChannelSpec
from tests.channels.world import Scene, waiting_run
from tests.fakes.feishu import FakeFeishu
from tests.fakes.server import BuiltCallback
from tests.fakes.slack import FakeSlack
from tests.fakes.wecom import FakeWeCom


def feishu_channels(fake: FakeFeishu) -> list[ChannelSpec]:
    config = fake.channel_config()
    return [
        ChannelSpec("ops-feishu", "feishu", "acme", dict(config)),
        ChannelSpec("sales-feishu", "feishu", "acme", dict(config)),
        ChannelSpec("other-feishu", "feishu", "other", dict(config)),
        ChannelSpec("off-feishu", "feishu", "acme", dict(config), enabled=False),
    ]


@asynccontextmanager
async def feishu_scene(database_url: str, fake: FakeFeishu, **options: Any
                       ) -> AsyncIterator[Scene]:
    async with waiting_run(database_url, feishu_channels(fake), "ops-feishu", fake.cards,
                           **options) as scene:
        yield scene


def toast(reply: httpx.Response) -> dict[str, str]:
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert "card" not in body  # a refused click leaves the card as it is
    return dict(body["toast"])


# -- unsigned, wrongly signed, stale, undecryptable, replayed ----------------------------


async def test_unsigned_forged_stale_and_undecryptable_feishu_callbacks_change_nothing(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    async with feishu_scene(database_url, feishu) as scene:
        rid, now = scene.request_id, int(time.time())
        refused = {
            "unsigned": await scene.send(feishu.card_click(rid, "approve", "ou_alice",
                                                           signed=False)),
            "wrong signature": await scene.send(feishu.card_click(
                rid, "approve", "ou_alice", signing_key="a-guessed-key")),
            "wrong token": await scene.send(feishu.card_click(
                rid, "approve", "ou_alice", verification_token="a-guessed-token")),
            "stale": await scene.send(feishu.card_click(rid, "approve", "ou_alice",
                                                        timestamp=now - 600)),
            "from the future": await scene.send(feishu.card_click(
                rid, "approve", "ou_alice", timestamp=now + 600)),
            "undecryptable": await scene.send(feishu.sign_body(
                b'{"encrypt":"bm90IGEgY2lwaGVydGV4dCBhdCBhbGwgISEhISEh"}')),
            "not json": await scene.send(feishu.sign_body(b"approve r1 please")),
        }
        assert {what: r.status_code for what, r in refused.items()} == {
            "unsigned": 401, "wrong signature": 401, "wrong token": 401, "stale": 401,
            "from the future": 401, "undecryptable": 400, "not json": 400}
        assert "stale timestamp" in refused["stale"].json()["error"]
        await scene.untouched()
        await scene.approve_for_real(feishu.card_click(rid, "approve", "ou_alice"))


@pytest.mark.both_databases
async def test_a_replayed_feishu_click_is_refused_and_a_late_one_is_told_it_is_decided(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    async with feishu_scene(database_url, feishu) as scene:
        click = feishu.card_click(scene.request_id, "reject", "ou_alice")
        first = await scene.send(click)
        assert first.status_code == 200 and first.json()["toast"]["content"] == "Rejected"
        decided = await scene.record()

        replay = await scene.send(click)
        assert replay.status_code == 401 and "replayed" in replay.json()["error"]

        late = await scene.send(feishu.card_click(scene.request_id, "approve", "ou_alice"))
        assert toast(late)["content"].startswith("already decided: rejected by alice")
        assert await scene.record() == decided
        assert scene.bank.transfers == []


async def test_forged_stale_and_replayed_slack_clicks_change_nothing(
        database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    channels = [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
    async with waiting_run(database_url, channels, "ops-slack",
                           lambda: slack.messages) as scene:
        rid, stale = scene.request_id, int(time.time()) - 301
        forged = {
            "unsigned": slack.block_action(rid, "approve", "U_ALICE", signed=False),
            "wrong secret": slack.block_action(rid, "approve", "U_ALICE",
                                               signing_secret="guess"),
            "stale": slack.block_action(rid, "approve", "U_ALICE", timestamp=stale),
        }
        answers = {what: (await scene.send(cb)).status_code for what, cb in forged.items()}
        assert answers == {"unsigned": 401, "wrong secret": 401, "stale": 401}
        await scene.untouched()

        click = slack.block_action(rid, "approve", "U_ALICE")
        await scene.approve_for_real(click)
        replay = await scene.send(click)
        assert replay.status_code == 401 and "replayed" in replay.json()["error"]


async def test_forged_undecryptable_and_replayed_wecom_clicks_change_nothing(
        database_url: str, wecom: FakeWeCom, secrets_key: str) -> None:
    channels = [ChannelSpec("ops-wecom", "wecom", "acme", wecom.channel_config())]
    async with waiting_run(database_url, channels, "ops-wecom",
                           lambda: wecom.cards) as scene:
        rid = scene.request_id
        garbled = wecom.card_click(rid, "approve", "alice")
        garbled_body = garbled.body.replace(b"<Encrypt><![CDATA[", b"<Encrypt><![CDATA[AAAA")
        junk, stamp = "bm90IGEgY2lwaGVydGV4dCBhdCBhbGw=", str(int(time.time()))
        undecryptable = BuiltCallback(
            "POST", {"Content-Type": "text/xml"},
            {"msg_signature": signature(wecom.token, stamp, "7", junk), "timestamp": stamp,
             "nonce": "7"},
            f"<xml><Encrypt><![CDATA[{junk}]]></Encrypt></xml>".encode())
        statuses = {
            "unsigned": wecom.card_click(rid, "approve", "alice", signed=False),
            "wrong token": wecom.card_click(rid, "approve", "alice", token="guess"),
            "another corp": wecom.card_click(rid, "approve", "alice", receive_id="ww_other"),
            "stale": wecom.card_click(rid, "approve", "alice",
                                      timestamp=int(time.time()) - 400),
            # the signature covers Encrypt, so a garbled one fails as a bad signature
            "garbled": BuiltCallback("POST", garbled.headers, garbled.query, garbled_body),
            "undecryptable": undecryptable,
        }
        answers = {what: (await scene.send(cb)).status_code for what, cb in statuses.items()}
        assert answers == {"unsigned": 401, "wrong token": 401, "another corp": 401,
                           "stale": 401, "garbled": 401, "undecryptable": 400}
        await scene.untouched()

        click = wecom.card_click(rid, "approve", "alice")
        await scene.approve_for_real(click)
        replay = await scene.send(click)
        assert replay.status_code == 401 and "replayed" in replay.json()["error"]


# -- the request must belong to the channel, the org, and an eligible user ----------------


async def test_a_click_through_another_channel_of_the_same_org_is_not_allowed(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    async with feishu_scene(database_url, feishu) as scene:
        reply = await scene.send(feishu.card_click(scene.request_id, "approve", "ou_alice"),
                                 "sales-feishu")
        assert toast(reply) == {
            "type": "warning",
            "content": f"not allowed: request '{scene.request_id}' was not sent through "
                       "this channel"}
        await scene.untouched()
        await scene.approve_for_real(feishu.card_click(scene.request_id, "approve",
                                                       "ou_alice"))


async def test_a_click_through_another_orgs_channel_is_not_allowed(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    async with feishu_scene(database_url, feishu, scope="org_members") as scene:
        rid = scene.request_id
        by_member = toast(await scene.send(feishu.card_click(rid, "approve", "ou_mallory"),
                                           "other-feishu"))
        # alice's identity means nothing in Other Inc: she has no user there
        by_outsider = toast(await scene.send(feishu.card_click(rid, "approve", "ou_alice"),
                                             "other-feishu"))
        assert by_member["content"] == (f"not allowed: request '{rid}' was not sent "
                                        "through this channel")
        assert by_outsider["content"].startswith("not allowed: feishu user 'ou_alice' is not "
                                                 "linked to a hookgate user of org 'other'")
        await scene.untouched()


async def test_a_clicker_with_no_hookgate_user_is_not_allowed(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    async with feishu_scene(database_url, feishu, scope="org_members") as scene:
        reply = await scene.send(feishu.card_click(scene.request_id, "approve", "ou_stranger"))
        assert toast(reply) == {
            "type": "warning",
            "content": "not allowed: feishu user 'ou_stranger' is not linked to a "
                       "hookgate user of org 'acme' (users[].chat)"}
        await scene.untouched()


async def test_a_mapped_user_outside_the_approver_scope_is_not_allowed(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    async with feishu_scene(database_url, feishu, scope="agent_owner") as scene:
        rid = scene.request_id
        initiator = toast(await scene.send(feishu.card_click(rid, "approve", "ou_alice")))
        colleague = toast(await scene.send(feishu.card_click(rid, "approve", "ou_bob")))
        assert initiator["content"] == ("not allowed: only the agent's owner ('olivia') may "
                                        "decide this request")
        assert colleague == initiator
        await scene.untouched()
        await scene.approve_for_real(feishu.card_click(rid, "approve", "ou_olivia"))
        record = await scene.record()
        assert record["decision"]["responded_by"] == "olivia"


# -- a disabled channel, an unknown one ---------------------------------------------------


async def test_a_disabled_channel_refuses_every_callback_and_an_unknown_one_is_404(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    async with feishu_scene(database_url, feishu, scope="org_members") as scene:
        click = await scene.send(feishu.card_click(scene.request_id, "approve", "ou_alice"),
                                 "off-feishu")
        handshake = await scene.send(feishu.url_verification("c-1"), "off-feishu")
        unknown = await scene.send(feishu.card_click(scene.request_id, "approve", "ou_alice"),
                                   "nowhere")
        assert (click.status_code, click.json()) == (
            403, {"error": "channel 'off-feishu' is disabled"})
        assert handshake.status_code == 403
        assert (unknown.status_code, unknown.json()) == (404, {"error": "no channel 'nowhere'"})
        await scene.untouched()


async def test_an_oversized_callback_body_is_refused_unread(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    async with feishu_scene(database_url, feishu) as scene:
        reply = await scene.send(feishu.sign_body(b'{"encrypt":"' + b"A" * 300_000 + b'"}'))
        assert reply.status_code in (400, 413)
        await scene.untouched()


async def test_old_dedupe_keys_are_pruned_and_fresh_ones_kept(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import select

    from hookgate.storage.database import Database
    from hookgate.storage.tables import ChannelCallbackSeen

    db = Database(database_url)
    try:
        async with feishu_scene(database_url, feishu) as scene:
            async with db.transaction() as s:
                s.add(ChannelCallbackSeen(channel_id="ops-feishu", dedupe_key="old",
                                          seen_at=datetime.now(UTC) - timedelta(hours=2)))
                s.add(ChannelCallbackSeen(channel_id="ops-feishu", dedupe_key="recent",
                                          seen_at=datetime.now(UTC) - timedelta(minutes=20)))
            click = feishu.card_click(scene.request_id, "approve", "ou_alice")
            assert (await scene.send(click)).status_code == 200
            async with db.session() as s:
                keys = set((await s.execute(select(ChannelCallbackSeen.dedupe_key))).scalars())
        assert "old" not in keys and "recent" in keys and len(keys) == 2
    finally:
        await db.dispose()
