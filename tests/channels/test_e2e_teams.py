"""Microsoft Teams end to end: a real server on loopback, the fake Bot Connector, Entra ID
and key service, and adaptiveCard/action invokes posted to the server as the Connector posts
them, each with a JWT the fake signs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import httpx
import pytest

from hookgate.approvals.quorum import QuorumRule
from hookgate.channels.teams.cards import card_texts
from hookgate.runtime.deployment import ChannelSpec
from tests.channels.world import API_TOKEN, CONTEXT, TEAMS, auth, waiting_run
from tests.fakes.teams import FakeTeams, TeamsActivity, new_key

pytestmark = pytest.mark.both_databases

QUORUM = {"allow_self_approval": False,
          "approval_quorum": (QuorumRule.parse("wire_transfer", "args.amount > 50000", 2,
                                               None),)}


def ops_teams(fake: FakeTeams) -> list[ChannelSpec]:
    return [ChannelSpec("ops-teams", "teams", "acme", fake.channel_config())]


def the_card(fake: FakeTeams) -> TeamsActivity:
    [activity] = fake.activities.values()
    return activity


def said(reply: httpx.Response) -> str:
    """The invoke's message answer (the card stays as it is)."""
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["type"] == "application/vnd.microsoft.activity.message", body
    return str(body["value"])


async def updated(fake: FakeTeams, activity: TeamsActivity) -> None:
    await asyncio.to_thread(fake.wait_for_update, activity)


async def test_a_click_in_teams_approves_once_and_the_card_is_refreshed(
        database_url: str, teams: FakeTeams, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_teams(teams), "ops-teams",
                           lambda: teams.activities) as scene:
        activity = the_card(teams)
        assert activity.card is not None
        shown = card_texts(activity.card)
        assert "wire_transfer" in shown and "ACME GMBH" in shown
        assert all(line in shown for line in CONTEXT), shown
        assert API_TOKEN not in shown

        click = teams.invoke(activity.activity_id, "approve", TEAMS["alice"])
        reply = await scene.send(click)
        assert reply.status_code == 200, reply.text
        refreshed = reply.json()
        assert refreshed["type"] == "application/vnd.microsoft.card.adaptive"
        assert "Approved by alice via Teams" in card_texts(refreshed["value"])
        assert "actions" not in refreshed["value"]

        assert (await scene.finished())["status"] == "completed"
        assert scene.bank.transfers == [{"amount": 60000.0, "vendor": "ACME GMBH"}]
        await updated(teams, activity)
        assert "Approved by alice via Teams" in card_texts(activity.card)
        record = await scene.record()
        assert record["decision"]["channel_identity"] == f"teams:{TEAMS['alice']}"
        assert record["decision"]["via"] == "teams"
        assert (await scene.send(click)).status_code == 401  # the same invoke again
        assert len(scene.bank.transfers) == 1
    assert teams.violations == []


async def test_a_decision_in_the_inbox_replaces_the_teams_card(
        database_url: str, teams: FakeTeams, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_teams(teams), "ops-teams",
                           lambda: teams.activities) as scene:
        await scene.decide_in_inbox("reject", "not this quarter")
        activity = the_card(teams)
        await updated(teams, activity)
        assert activity.card is not None and "actions" not in activity.card
        assert "Rejected by alice via the web inbox" in card_texts(activity.card)
        assert scene.bank.transfers == []
    assert teams.violations == []


async def test_forged_expired_replayed_and_foreign_teams_clicks_change_nothing(
        database_url: str, teams: FakeTeams, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_teams(teams), "ops-teams",
                           lambda: teams.activities) as scene:
        aid, alice = the_card(teams).activity_id, TEAMS["alice"]
        past = int(datetime.now(UTC).timestamp()) - 600
        forged = {
            "no token": teams.invoke(aid, "approve", alice, authorized=False),
            "another key": teams.invoke(aid, "approve", alice, token=teams.token(key=new_key())),
            "expired": teams.invoke(aid, "approve", alice, token=teams.token(exp=past)),
            "another app": teams.invoke(aid, "approve", alice, token=teams.token(aud="x")),
            "serviceUrl mismatch": teams.invoke(aid, "approve", alice,
                                                service_url="https://evil.example/"),
        }
        statuses = {what: (await scene.send(c)).status_code for what, c in forged.items()}
        assert statuses == dict.fromkeys(forged, 401)

        not_allowed = {
            "unknown user": teams.invoke(aid, "approve", "aad-nobody"),
            "user of another org": teams.invoke(aid, "approve", TEAMS["mallory"]),
            "not the initiator": teams.invoke(aid, "approve", TEAMS["bob"]),
            "another request": teams.invoke(aid, "approve", alice,
                                            request_id="cr_ffffffffffffffffffffffff"),
        }
        for what, click in not_allowed.items():
            assert said(await scene.send(click)).startswith("not allowed"), what
        await scene.untouched()
        assert the_card(teams).updates == []
        await scene.approve_for_real(teams.invoke(aid, "approve", alice))
    assert teams.violations == []


async def test_four_eyes_and_quorum_count_a_person_once_across_teams_and_the_inbox(
        database_url: str, teams: FakeTeams, secrets_key: str) -> None:
    async with waiting_run(database_url, ops_teams(teams), "ops-teams",
                           lambda: teams.activities, agent_options=QUORUM,
                           scope="org_members") as scene:
        aid = the_card(teams).activity_id
        assert "four eyes" in said(await scene.send(teams.invoke(aid, "approve",
                                                                 TEAMS["alice"])))
        assert said(await scene.send(teams.invoke(aid, "approve", TEAMS["bob"]))) == (
            "Approval recorded: 1 of 2 approvals (bob); waiting for more")
        again = await scene.client.post(
            f"/api/confirmations/{scene.request_id}/respond",
            json={"decision": "approve", "via": "inbox"}, headers=auth("bob"))
        assert again.status_code != 200
        record = await scene.record()
        assert (record["status"], record["approvals"]["count"]) == ("pending", 1)

        last = await scene.send(teams.invoke(aid, "approve", TEAMS["olivia"]))
        assert "Approved by olivia via Teams" in card_texts(last.json()["value"])
        assert (await scene.finished())["status"] == "completed"
        assert len(scene.bank.transfers) == 1
    assert teams.violations == []
