"""Nothing waits for nobody, end to end through the server on each chat platform: reminders
reach every channel the request's cards went to, escalation makes a second set of approvers
eligible and sends them the card, and an unanswered request is rejected by the timeout
fallback; on SQLite (a timer of the process) and PostgreSQL (procrastinate jobs)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import httpx
import pytest

import tests.channels.world as world_module
from hookgate.escalation_policy import EscalationPolicy
from hookgate.runtime.deployment import ChannelSpec, Deployment
from tests.channels.world import (
    TOKENS,
    Bank,
    auth,
    delivered_request,
    eventually,
    finished_run,
    run_without_delivery,
    start_run,
    world,
)
from tests.fakes.feishu import FakeFeishu, card_text
from tests.fakes.slack import FakeSlack, block_texts
from tests.fakes.wecom import FakeWeCom
from tests.live_server import LiveServer, live_server

pytestmark = pytest.mark.both_databases


@pytest.fixture(autouse=True)
def patient(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL a follow-up is a scheduled procrastinate job, which a worker picks up
    on its polling round (world.WORKER.poll_s): wait longer there."""
    if database_url.startswith("postgresql"):
        monkeypatch.setattr(world_module, "WAIT_S", 40.0)


def later(database_url: str, seconds: float) -> float:
    """``seconds`` on SQLite; on PostgreSQL past the worker's polling round."""
    return (seconds + world_module.WORKER.poll_s if database_url.startswith("postgresql")
            else seconds)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    env.update(COLUMNS="200", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def with_followup(deployment: Deployment, timeout_s: float = 60.0,
                  **policy: Any) -> Deployment:
    """The deployment with the buyer following up by ``policy``."""
    agent = deployment.agents["buyer"]
    agent = dataclasses.replace(agent, confirmation_timeout_s=timeout_s,
                                followup=EscalationPolicy(**policy))
    return dataclasses.replace(deployment, agents={"buyer": agent})


@asynccontextmanager
async def serving(deployment: Deployment) -> AsyncIterator[tuple[LiveServer, httpx.AsyncClient]]:
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            yield srv, client


async def record(client: httpx.AsyncClient, request_id: str, user: str = "alice"
                 ) -> dict[str, Any]:
    r = await client.get(f"/api/confirmations/{request_id}", headers=auth(user))
    assert r.status_code == 200, r.text
    return dict(r.json())


async def respond(client: httpx.AsyncClient, request_id: str, user: str,
                  decision: str = "approve") -> httpx.Response:
    return await client.post(f"/api/confirmations/{request_id}/respond",
                             json={"decision": decision, "via": "inbox"}, headers=auth(user))


def slack_world(database_url: str, slack: FakeSlack, **policy: Any) -> tuple[Deployment, Bank]:
    deployment, bank = world(database_url,
                             [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())],
                             approval_channel_id="ops-slack")
    return with_followup(deployment, **policy), bank


async def test_slack_reminds_twice_then_escalates_to_bob_who_approves_on_the_new_card(
        database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    deployment, bank = slack_world(database_url, slack, remind_after_s=0.6, max_reminders=2,
                                   # Time enough to see bob refused first, even under load.
                                   escalate_after_s=5.0, escalate_to=("bob",))
    async with serving(deployment) as (srv, client):
        run_id = await start_run(client)
        request = await delivered_request(srv, client)
        # Before the escalation bob is not an approver of alice's run.
        assert (await respond(client, request["id"], "bob")).status_code == 403
        assert (await record(client, request["id"], "bob"))["can_decide"] is False

        def reminders() -> list[str]:
            return [m.text for m in slack.messages.values()
                    if m.blocks is None and m.text.startswith("Reminder:")]

        if database_url.startswith("postgresql"):
            # A polling round of the worker that comes after both reminders were due
            # sends one message, which counts for both (no burst after a delay).
            await eventually(lambda: reminders(), "a reminder on Slack")
        else:
            await eventually(lambda: len(reminders()) == 2, "two reminders on Slack")
        assert all(request["id"] in text and "wire_transfer" in text
                   and "alice" in text for text in reminders())
        assert "Decide: https://gate.example/#/confirmations/" in reminders()[0]

        def cards() -> list[Any]:
            return [m for m in slack.messages.values() if m.blocks is not None]

        await eventually(lambda: len(cards()) == 2, "the escalation card")
        escalation = cards()[1]
        assert "Escalated to bob (no decision in" in block_texts(
            escalation.blocks or [])
        seen = await record(client, request["id"], "bob")
        assert seen["can_decide"] is True
        assert seen["followup"]["escalated_to"] == ["bob"]
        sent = seen["followup"]["reminders_sent"]
        # On PostgreSQL the worker's polling rounds decide whether the second reminder came
        # before the escalation; either way no more went out than were counted.
        assert sent == 2 if not database_url.startswith("postgresql") else 1 <= sent <= 2
        assert len(reminders()) <= sent

        reply = await slack.block_action(request["id"], "approve", "U_BOB",
                                         message_ts=escalation.ts).send(
            client, "/api/channels/ops-slack/callback")
        assert reply.status_code == 200, reply.text
        run = await finished_run(client, run_id)
        assert run["status"] == "completed"
        assert bank.transfers == [{"amount": 60000.0, "vendor": "ACME GMBH"}]
        decided = await record(client, request["id"])
        assert (decided["decision"]["responded_by"], decided["decision"]["via"]) == (
            "bob", "slack")
        # Both cards show the decision and lose their buttons.
        await eventually(lambda: all(m.updates for m in cards()), "both cards updated")
        assert all("Approved by bob via Slack" in block_texts(m.blocks or [])
                   for m in cards())
        # No reminder after the decision (by the database's clock).
        assert (datetime.fromisoformat(decided["followup"]["last_reminded_at"])
                < datetime.fromisoformat(decided["decision"]["responded_at"]))
    assert slack.violations == []


async def test_feishu_reminds_and_the_timeout_fallback_rejects_and_updates_the_card(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    deployment, bank = world(database_url, [ChannelSpec("ops-feishu", "feishu", "acme",
                                                        feishu.channel_config())],
                             approval_channel_id="ops-feishu")
    deployment = with_followup(deployment, timeout_s=later(database_url, 2.5),
                               remind_after_s=0.8)
    async with serving(deployment) as (srv, client):
        run_id = await start_run(client)
        request = await delivered_request(srv, client)
        await eventually(lambda: any(t.startswith("Reminder:") for t in feishu.texts()),
                         "the reminder on Feishu")
        [reminder] = [t for t in feishu.texts() if t.startswith("Reminder:")]
        assert request["id"] in reminder
        run = await finished_run(client, run_id)
        assert bank.transfers == []
        blocked = [e for e in run["trace"] if e["type"] == "tool_blocked"]
        assert len(blocked) == 1 and "timeout fallback" in blocked[0]["observation"]
        decided = await record(client, request["id"])
        assert decided["status"] == "rejected"
        assert decided["decision"]["via"] == "timeout"
        assert decided["decision"]["responded_by"] is None
        assert decided["followup"]["on_timeout"] == "reject"
        [card] = [m for m in feishu.messages.values() if m.msg_type == "interactive"]
        await eventually(lambda: card.patches, "the card's update")
        assert "Rejected via the timeout fallback" in card_text(card.content)
    assert feishu.violations == []


async def test_wecom_reminds_escalates_to_the_admins_and_the_escalation_card_decides(
        database_url: str, wecom: FakeWeCom, secrets_key: str) -> None:
    deployment, bank = world(database_url, [ChannelSpec("ops-wecom", "wecom", "acme",
                                                        wecom.channel_config())],
                             approval_channel_id="ops-wecom", scope="agent_owner")
    deployment = with_followup(deployment, remind_after_s=0.5, escalate_after_s=1.2,
                               escalate_to=("admins",))
    async with serving(deployment) as (srv, client):
        run_id = await start_run(client)
        request = await delivered_request(srv, client)
        await eventually(lambda: any(t.startswith("Reminder:") for t in wecom.texts),
                         "the reminder on WeCom")
        await eventually(lambda: len(wecom.cards) == 2, "the escalation card")
        first, second = wecom.cards.values()
        assert first.task_id != second.task_id
        assert second.card["main_title"]["desc"].startswith("Escalated to alice")
        # alice is the org's admin: the escalation made her an approver of olivia's agent.
        reply = await wecom.card_click(request["id"], "approve", "alice",
                                       task_id=second.task_id).send(
            client, "/api/channels/ops-wecom/callback")
        assert reply.status_code == 200, reply.text
        assert (await finished_run(client, run_id))["status"] == "completed"
        assert len(bank.transfers) == 1
        await eventually(lambda: first.updates and second.updates, "both cards updated")
    assert wecom.violations == []


async def test_a_request_nobody_can_decide_is_flagged_in_the_api_and_the_cli(
        database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    deployment, _ = slack_world(database_url, slack)
    agent = dataclasses.replace(deployment.agents["buyer"], owner_user_id=None,
                                confirmation_approver_scope="agent_owner")
    deployment = dataclasses.replace(deployment, agents={"buyer": agent})
    async with serving(deployment) as (srv, client):
        await start_run(client)
        request = await delivered_request(srv, client)

        async def flagged() -> str | None:
            return (await record(client, request["id"]))["unreachable"]

        reason = await eventually(flagged, "the unreachable flag")
        assert reason == "no approver: agent 'buyer' has no owner"
        listed = (await client.get("/api/confirmations", params={"status": "pending"},
                                   headers=auth("alice"))).json()
        assert listed[0]["unreachable"] == reason
        shown = await asyncio.to_thread(cli, "approvals", "list", "--url", srv.url,
                                        "--token", TOKENS["alice"])
        assert shown.returncode == 0, shown.stderr
        assert f"UNREACHABLE: {reason}" in shown.stdout
        # Nobody may decide it, not even the org's admin.
        assert (await respond(client, request["id"], "alice", "reject")).status_code == 403


async def test_an_escalation_that_finds_an_approver_clears_the_flag(
        database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    deployment, _ = slack_world(database_url, slack, escalate_after_s=0.5,
                                escalate_to=("bob",))
    agent = dataclasses.replace(deployment.agents["buyer"], owner_user_id=None,
                                confirmation_approver_scope="agent_owner")
    deployment = dataclasses.replace(deployment, agents={"buyer": agent})
    async with serving(deployment) as (srv, client):
        run_id = await start_run(client)
        request = await delivered_request(srv, client)

        async def cleared() -> bool:
            seen = await record(client, request["id"])
            return seen["unreachable"] is None and seen["followup"]["escalated_to"] == ["bob"]

        await eventually(cleared, "the escalation to clear the flag")
        assert (await respond(client, request["id"], "bob", "reject")).status_code == 200
        assert (await finished_run(client, run_id))["status"] == "completed"
    assert slack.violations == []


async def test_a_reminder_due_while_the_server_was_down_goes_out_after_the_restart(
        database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    # Due after the first server stopped, even on a loaded machine.
    deployment, bank = slack_world(database_url, slack,
                                   remind_after_s=later(database_url, 4.0))

    def reminders() -> list[str]:
        return [m.text for m in slack.messages.values() if m.text.startswith("Reminder:")]

    async with serving(deployment) as (srv, client):
        run_id = await start_run(client)
        request = await delivered_request(srv, client)
    assert reminders() == []  # stopped before it was due

    async with serving(deployment) as (srv, client):
        await eventually(reminders, "the reminder after the restart")
        assert (await respond(client, request["id"], "alice")).status_code == 200
        assert (await finished_run(client, run_id))["status"] == "completed"
        assert len(bank.transfers) == 1
        assert len(reminders()) == 1
    assert slack.violations == []


async def test_a_card_no_platform_took_flags_the_request_unreachable(
        database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    slack.fail_next("/api/chat.postMessage", status=503, times=1000)
    blocked, request, bank = await run_without_delivery(
        database_url, [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())],
        "ops-slack")
    assert "approval card delivery failed" in blocked["observation"]
    assert request["status"] == "cancelled" and bank.transfers == []
    assert request["unreachable"].startswith(
        "delivery failed: the approval card could not be sent: slack: POST")
    assert "HTTP 503" in request["unreachable"]


async def test_escalated_to_another_platform_the_reminder_reaches_both_and_a_click_ends_both(
        database_url: str, feishu: FakeFeishu, slack: FakeSlack, secrets_key: str) -> None:
    channels = [ChannelSpec("ops-feishu", "feishu", "acme", feishu.channel_config()),
                ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
    deployment, bank = world(database_url, channels, approval_channel_id="ops-feishu")
    deployment = with_followup(deployment, escalate_after_s=0.5, escalate_to=("bob",),
                               escalation_channel_id="ops-slack",
                               remind_after_s=later(database_url, 1.5))
    async with serving(deployment) as (srv, client):
        run_id = await start_run(client)
        request = await delivered_request(srv, client)
        [feishu_card] = [m for m in feishu.messages.values() if m.msg_type == "interactive"]

        def slack_cards() -> list[Any]:
            return [m for m in slack.messages.values() if m.blocks is not None]

        await eventually(slack_cards, "the escalation card on Slack")
        assert "Escalated to bob" in block_texts(slack_cards()[0].blocks or [])
        await eventually(lambda: any(t.startswith("Reminder:") for t in feishu.texts())
                         and any(m.text.startswith("Reminder:")
                                 for m in slack.messages.values()),
                         "the reminder on Feishu and on Slack")

        # bob, made an approver by the escalation, approves on the original Feishu card.
        reply = await feishu.card_click(request["id"], "approve", "ou_bob",
                                        message_id=feishu_card.message_id).send(
            client, "/api/channels/ops-feishu/callback")
        assert reply.status_code == 200, reply.text
        assert (await finished_run(client, run_id))["status"] == "completed"
        assert len(bank.transfers) == 1
        await eventually(lambda: feishu_card.patches and slack_cards()[0].updates,
                         "both platforms' cards updated")
        assert "Approved by bob via Feishu" in block_texts(slack_cards()[0].blocks or [])
    assert feishu.violations == [] and slack.violations == []


async def test_a_click_on_the_escalation_card_in_its_own_channel_decides(
        database_url: str, feishu: FakeFeishu, slack: FakeSlack, secrets_key: str) -> None:
    # The escalation card went to Slack, not to the request's own Feishu chat: a click on it
    # is a click on a card of this request (approvals/routing.py's sent_through).
    channels = [ChannelSpec("ops-feishu", "feishu", "acme", feishu.channel_config()),
                ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
    deployment, bank = world(database_url, channels, approval_channel_id="ops-feishu")
    deployment = with_followup(deployment, escalate_after_s=0.5, escalate_to=("bob",),
                               escalation_channel_id="ops-slack")
    async with serving(deployment) as (srv, client):
        run_id = await start_run(client)
        request = await delivered_request(srv, client)
        [feishu_card] = [m for m in feishu.messages.values() if m.msg_type == "interactive"]

        def slack_cards() -> list[Any]:
            return [m for m in slack.messages.values() if m.blocks is not None]

        await eventually(slack_cards, "the escalation card on Slack")
        await eventually(lambda: srv.call(srv.runtime.approvals.store.get(request["id"]))
                         .escalation_refs, "the escalation card's record")
        reply = await slack.block_action(request["id"], "approve", "U_BOB").send(
            client, "/api/channels/ops-slack/callback")
        assert reply.status_code == 200, reply.text
        assert "not allowed" not in reply.text
        assert (await finished_run(client, run_id))["status"] == "completed"
        assert len(bank.transfers) == 1
        await eventually(lambda: feishu_card.patches, "the Feishu card updated")
    assert feishu.violations == [] and slack.violations == []
