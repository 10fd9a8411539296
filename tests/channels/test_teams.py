"""TeamsChannel against the fake Bot Connector and Entra ID on loopback: the Adaptive Card
and its Action.Execute buttons, the Bot Connector JWT (signature against the published keys,
issuer, audience, expiry, serviceUrl claim, endorsement), the invoke's answer and the card
replaced after the decision."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from hookgate.channels.base import CallbackRejected, CardOutcome, DeliveredCard
from hookgate.channels.teams.cards import card_texts
from hookgate.channels.teams.channel import TeamsChannel
from tests.channels.conftest import approval_card
from tests.fakes.server import BuiltCallback
from tests.fakes.teams import FakeTeams, TeamsActivity, new_key

RID = "cr_0123456789abcdef01234567"


async def sent(fake: FakeTeams) -> tuple[TeamsChannel, TeamsActivity]:
    channel = TeamsChannel("ops-teams", "acme", fake.channel_config())
    delivered = await channel.send_card(approval_card(RID))
    return channel, fake.activities[delivered.ref["activity_id"]]


async def parse(channel: TeamsChannel, callback: BuiltCallback) -> object:
    request = callback.request()
    await channel.prepare_callback(request)
    return channel.parse_callback(request, 0.0)


async def refused(channel: TeamsChannel, callback: BuiltCallback) -> tuple[int, str]:
    with pytest.raises(CallbackRejected) as caught:
        await parse(channel, callback)
    return caught.value.status, caught.value.reason


async def test_the_card_shows_the_call_with_secrets_masked_and_execute_buttons(
        teams: FakeTeams) -> None:
    channel, activity = await sent(teams)
    assert activity.card is not None
    shown = card_texts(activity.card)
    assert "Approval required: wire_transfer" in shown and "ACME GmbH" in shown
    assert "sk-live-123" not in shown
    executes = [a for a in activity.card["actions"] if a["type"] == "Action.Execute"]
    assert [(a["verb"], a["data"]) for a in executes] == [
        ("approve", {"request_id": RID}), ("reject", {"request_id": RID})]
    await channel.aclose()
    assert teams.violations == []


async def test_an_invoke_with_a_valid_connector_token_is_a_decision_by_the_aad_user(
        teams: FakeTeams) -> None:
    channel, activity = await sent(teams)
    action = await parse(channel, teams.invoke(activity.activity_id, "reject", "aad-bob",
                                               activity_id="f:1"))
    assert (action.kind, action.request_id, action.decision,  # type: ignore[attr-defined]
            action.platform_user_id, action.dedupe_key) == (  # type: ignore[attr-defined]
        "decision", RID, "reject", "aad-bob", "activity:f:1")
    await channel.aclose()


async def test_forged_expired_and_misaddressed_connector_tokens_are_refused_with_401(
        teams: FakeTeams) -> None:
    channel, activity = await sent(teams)
    aid = activity.activity_id
    cases = {
        "no token": teams.invoke(aid, "approve", "aad-alice", authorized=False),
        "signed by another key": teams.invoke(aid, "approve", "aad-alice",
                                              token=teams.token(key=new_key())),
        "unknown key id": teams.invoke(aid, "approve", "aad-alice",
                                       token=teams.token(kid="not-published")),
        "expired": teams.invoke(aid, "approve", "aad-alice",
                                token=teams.token(exp=int(datetime.now(UTC).timestamp())
                                                  - 600)),
        "another app": teams.invoke(aid, "approve", "aad-alice",
                                    token=teams.token(aud="another-app-id")),
        "another issuer": teams.invoke(aid, "approve", "aad-alice",
                                       token=teams.token(iss="https://sts.windows.net/x/")),
        "no serviceUrl claim": teams.invoke(aid, "approve", "aad-alice",
                                            token=teams.token(serviceUrl=None)),
        "serviceUrl mismatch": teams.invoke(aid, "approve", "aad-alice",
                                            service_url="https://evil.example/"),
        "channel not endorsed": teams.invoke(aid, "approve", "aad-alice",
                                             channel_id="slack"),
        "unsigned token": teams.invoke(aid, "approve", "aad-alice", token=__import__(
            "jwt").encode({"iss": "https://api.botframework.com", "aud": teams.app_id,
                           "exp": 9999999999, "serviceUrl": teams.service_url}, key="",
                          algorithm="none", headers={"kid": teams.kid})),
    }
    statuses = {what: (await refused(channel, callback))[0] for what, callback in
                cases.items()}
    assert statuses == dict.fromkeys(cases, 401)
    assert "expired" in (await refused(channel, cases["expired"]))[1]
    await channel.aclose()


async def test_the_keys_are_fetched_once_and_an_unreachable_key_service_refuses(
        teams: FakeTeams) -> None:
    channel, activity = await sent(teams)
    for _ in range(3):
        await parse(channel, teams.invoke(activity.activity_id, "approve", "aad-alice"))
    assert len(teams.requests_to("/v1/.well-known/keys")) == 1
    await channel.aclose()
    cold = TeamsChannel("ops-teams", "acme", teams.channel_config(
        openid_metadata_url="http://127.0.0.1:9/nothing"))
    status, _ = await refused(cold, teams.invoke(activity.activity_id, "approve", "aad-a"))
    assert status == 503
    await cold.aclose()


async def test_the_invoke_answer_is_the_decided_card_or_a_message(teams: FakeTeams) -> None:
    channel, activity = await sent(teams)
    callback = teams.invoke(activity.activity_id, "approve", "aad-alice")
    action = await parse(channel, callback)
    outcome = CardOutcome(RID, "approved", decided_by="alice", via="teams",
                          decided_at=datetime(2025, 3, 1, 9, 0, tzinfo=UTC))
    decided = json.loads(channel.reply(callback.request(), action,  # type: ignore[arg-type]
                                       outcome=outcome, message="Approved").body)
    assert decided["statusCode"] == 200
    assert decided["type"] == "application/vnd.microsoft.card.adaptive"
    assert "Approved by alice via Teams" in card_texts(decided["value"])
    assert "actions" not in decided["value"]
    waiting = json.loads(channel.reply(callback.request(), action,  # type: ignore[arg-type]
                                       outcome=None, message="not allowed: x").body)
    assert waiting == {"statusCode": 200, "type": "application/vnd.microsoft.activity.message",
                       "value": "not allowed: x"}
    await channel.aclose()


async def test_the_card_is_replaced_after_the_decision_with_no_buttons(
        teams: FakeTeams) -> None:
    channel, activity = await sent(teams)
    outcome = CardOutcome(RID, "rejected", decided_by="bob", via="inbox", reason="no")
    await channel.update_card(DeliveredCard("ops-teams", {
        "activity_id": activity.activity_id, "tool": "wire_transfer"}), outcome)
    assert activity.card is not None and "actions" not in activity.card
    assert "Rejected by bob via the web inbox" in card_texts(activity.card)
    assert teams.token_requests == 1
    await channel.aclose()
    assert teams.violations == []
