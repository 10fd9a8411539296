"""Channels without the gate: an agent posts to its team's chat with ``channel_notify`` (a
tool like any other, so its hooks decide), and a run's end can be announced there."""

from __future__ import annotations

import httpx

from hookgate import Agent, ReActEngine, ScriptedLLM
from hookgate.channels.notify_tool import UNBOUND_CHANNEL_NOTIFY
from hookgate.runtime.deployment import ChannelSpec
from tests.channels.world import (
    PUBLIC_URL,
    eventually,
    finished_run,
    start_run,
    waiting_run,
    world,
)
from tests.fakes.feishu import FakeFeishu
from tests.fakes.slack import FakeSlack
from tests.fakes.wecom import FakeWeCom
from tests.live_server import live_server


def notify(text: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "channel_notify", "args": {"text": text}}]}


async def test_an_agent_posts_to_its_channel_and_its_hooks_still_decide(
        database_url: str, feishu: FakeFeishu, secrets_key: str) -> None:
    turns = [notify("Paying ACME 60,000 today."), notify("Use key sk-live-123 for it."),
             {"answer": "Told the team."}]
    channels = [ChannelSpec("ops-feishu", "feishu", "acme", feishu.channel_config())]
    deployment, _ = world(database_url, channels, approval_channel_id="ops-feishu",
                          turns=turns)
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            run = await finished_run(client, await start_run(client))

    assert run["status"] == "completed"
    posted = [e for e in run["trace"] if e["type"] == "tool_result"]
    blocked = [e for e in run["trace"] if e["type"] == "tool_blocked"]
    assert posted[0]["observation"] == "posted to channel 'ops-feishu'"
    assert blocked[0]["observation"] == "Blocked: that message contains a key."
    assert feishu.texts() == ["Paying ACME 60,000 today."]  # the blocked one never went out
    assert feishu.violations == []


async def test_without_an_approval_channel_the_orgs_first_active_channel_is_used(
        database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    channels = [ChannelSpec("paused", "slack", "acme", slack.channel_config(), enabled=False),
                ChannelSpec("elsewhere", "slack", "other", slack.channel_config()),
                ChannelSpec("team", "slack", "acme", slack.channel_config())]
    deployment, _ = world(database_url, channels, turns=[notify("hello team"),
                                                         {"answer": "done"}])
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            run = await finished_run(client, await start_run(client))

    posted = [e for e in run["trace"] if e["type"] == "tool_result"]
    assert posted[0]["observation"] == "posted to channel 'team'"
    assert [m.text for m in slack.messages.values()] == ["hello team"]


async def test_a_finished_run_is_announced_with_its_outcome_tools_answer_and_link(
        database_url: str, wecom: FakeWeCom, secrets_key: str) -> None:
    channels = [ChannelSpec("ops-wecom", "wecom", "acme", wecom.channel_config())]
    async with waiting_run(database_url, channels, "ops-wecom", lambda: wecom.cards,
                           notify_on_completion=True) as scene:
        reply = await scene.send(wecom.card_click(scene.request_id, "approve", "alice"))
        assert reply.status_code == 200
        await scene.finished()
        [summary] = await eventually(lambda: wecom.texts, "the completion summary")

    lines = summary.splitlines()
    assert lines[0] == "Run completed: Purchasing agent (buyer)"
    assert lines[1].startswith("Duration: ") and lines[1].endswith(" s")
    assert lines[2:] == ["Tools used: wire_transfer ×1", "Answer: Paid ACME GMBH.",
                         f"Run: {PUBLIC_URL}/#/runs/{scene.run_id}"]


async def test_only_agents_that_ask_announce_their_runs_and_links_need_a_public_url(
        database_url: str, slack: FakeSlack, secrets_key: str) -> None:
    channels = [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
    quiet, _ = world(database_url, channels, approval_channel_id="ops-slack",
                     turns=[{"answer": "nothing to do"}])
    with live_server(quiet) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            await finished_run(client, await start_run(client))
    assert slack.messages == {}

    async with waiting_run(database_url, channels, "ops-slack", lambda: slack.messages,
                           notify_on_completion=True, public_url=None) as scene:
        await scene.decide_in_inbox("reject")
        await scene.finished()
        summaries = await eventually(
            lambda: [m.text for m in slack.messages.values() if m.blocks is None],
            "the completion summary")

    assert summaries[0].startswith("Run completed: Purchasing agent (buyer)")
    assert "Tools used: none" in summaries[0]  # the rejected call never ran
    assert summaries[0].endswith(f"Run: {scene.run_id}")  # no public_url, no link


async def test_outside_a_server_channel_notify_says_it_has_no_channel() -> None:
    agent = Agent(id="solo", name="Solo", instructions="", tools=[UNBOUND_CHANNEL_NOTIFY])
    engine = ReActEngine(llm=ScriptedLLM([notify("hi"), {"answer": "ok"}]))

    result = await engine.run(agent, "go", user_id="alice")

    [event] = [e for e in result.trace if e["type"] == "tool_result"]
    assert "posts through the channels of a hookgate server" in event["observation"]
