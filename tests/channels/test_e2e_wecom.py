"""WeCom end to end: a real server on loopback, the fake WeCom server API, and encrypted
``template_card_event`` callbacks (and the GET echostr handshake) sent to the server."""

from __future__ import annotations

import httpx

from hookgate.runtime.deployment import ChannelSpec
from tests.channels.world import (
    API_TOKEN,
    callback_url,
    eventually,
    run_without_delivery,
    waiting_run,
    world,
)
from tests.fakes.wecom import SEND_PATH, FakeWeCom
from tests.live_server import live_server


def ops_wecom(fake: FakeWeCom) -> list[ChannelSpec]:
    return [ChannelSpec("ops-wecom", "wecom", "acme", fake.channel_config())]


async def test_a_click_in_wecom_approves_and_update_template_card_shows_who(
        database_url: str, wecom: FakeWeCom, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_wecom(wecom), "ops-wecom",
                           lambda: wecom.cards) as scene:
        card = next(iter(wecom.cards.values()))
        assert "ACME GMBH" in card.card["sub_title_text"]
        # The context, cut to WeCom's small card: the user's words, why, readable numbers.
        assert card.card["sub_title_text"].endswith("\namount = 60,000")
        assert card.card["main_title"]["desc"] == "User asked: Pay ACME GMBH the 60,000 balanc…"
        rows = {r["keyname"]: r["value"] for r in card.card["horizontal_content_list"]}
        assert rows["Why"] == "the tool's rule: transfer…"
        assert len(rows) <= 6 and all(len(v) <= 26 for v in rows.values())
        assert API_TOKEN not in str(card.card)
        assert [b["key"] for b in card.card["button_list"]] == [
            f"approve:{scene.request_id}", f"reject:{scene.request_id}"]

        reply = await scene.send(wecom.card_click(scene.request_id, "approve", "alice"))
        assert (reply.status_code, reply.content) == (200, b"")  # no passive reply

        assert (await scene.finished())["status"] == "completed"
        assert scene.bank.transfers == [{"amount": 60000.0, "vendor": "ACME GMBH"}]
        await eventually(lambda: card.updates, "update_template_card")
        assert card.updates[0]["button"] == {"replace_name": "Approved by alice (wecom)"}
        assert card.updates[0]["userids"] == ["alice", "bob"]
        record = await scene.record()
        assert record["decision"]["channel_identity"] == "wecom:alice"
        assert record["decision"]["via"] == "wecom"
    assert wecom.violations == []


async def test_a_decision_in_the_inbox_updates_the_wecom_card(
        database_url: str, wecom: FakeWeCom, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_wecom(wecom), "ops-wecom",
                           lambda: wecom.cards) as scene:
        await scene.decide_in_inbox("reject")

        card = next(iter(wecom.cards.values()))
        await eventually(lambda: card.updates, "update_template_card")
        assert card.updates[0]["button"] == {"replace_name": "Rejected by alice (inbox)"}
        assert (await scene.finished())["status"] == "completed"
        assert scene.bank.transfers == []
    assert wecom.violations == []


async def test_the_wecom_echostr_handshake_is_answered_through_the_server(
        database_url: str, wecom: FakeWeCom, secrets_key: str) -> None:
    deployment, _ = world(database_url, ops_wecom(wecom))
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            url = callback_url("ops-wecom")
            good = await wecom.echostr_handshake("1288432023552776189").send(client, url)
            forged = await wecom.echostr_handshake("42", token="not-the-token").send(
                client, url)
    assert (good.status_code, good.content) == (200, b"1288432023552776189")
    assert forged.status_code == 401


async def test_when_wecom_keeps_failing_the_call_is_blocked_and_the_request_cancelled(
        database_url: str, wecom: FakeWeCom, secrets_key: str) -> None:
    wecom.fail_next(SEND_PATH, status=503, times=1000)

    blocked, request, bank = await run_without_delivery(database_url, ops_wecom(wecom),
                                                        "ops-wecom")

    assert "approval card delivery failed" in blocked["observation"]
    assert request["status"] == "cancelled"
    assert bank.transfers == []
    assert len(wecom.requests_to(SEND_PATH)) == 5
