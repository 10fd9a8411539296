"""The configured chat channels of a server, as the approval gate, callbacks and agents see
them: channels by id (disabled ones not handed out), the ``channel_notify`` tool bound to
them, and the summary posted when a run of a ``notify_on_completion`` agent ends."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace

from hookgate.agent import Agent
from hookgate.approvals.routing import resolve_channel
from hookgate.channels.base import Channel
from hookgate.channels.notify_tool import (
    ChannelFinder,
    channel_notify_tool,
    completion_summary,
    is_unbound,
)
from hookgate.channels.registry import create_channel
from hookgate.engines.state import RunState
from hookgate.runtime.channel_records import SecretsKey, store_channels
from hookgate.runtime.deployment import ChannelSpec
from hookgate.storage.database import Database
from hookgate.storage.runs import DatabaseRunStore


class ConfiguredChannels:
    """Channels by id, in configuration order; disabled ones are not handed out.

    Configs are stored encrypted, so channels need the secrets key: without one (argument
    or ``HOOKGATE_SECRETS_KEY``) construction raises SecretsKeyError and nothing starts.
    """

    def __init__(self, specs: list[ChannelSpec], *, secrets: SecretsKey | None = None) -> None:
        self.specs = {s.id: s for s in specs}
        self._order = [s.id for s in specs]
        self.secrets = secrets
        if specs and secrets is None:
            self.secrets = SecretsKey.from_environment()
        self._channels: dict[str, Channel] = {
            spec.id: create_channel(spec.id, spec.type, spec.org, spec.config) for spec in specs
        }

    def spec(self, channel_id: str) -> ChannelSpec | None:
        """The declaration of ``channel_id``, enabled or not."""
        return self.specs.get(channel_id)

    def get(self, channel_id: str) -> Channel | None:
        spec = self.specs.get(channel_id)
        if spec is None or not spec.enabled:
            return None
        return self._channels.get(channel_id)

    def longest_callback_lifetime_s(self) -> float:
        """The longest time a configured channel's callback stays valid (0: none says)."""
        return max((c.callback_lifetime_s or 0.0 for c in self._channels.values()), default=0.0)

    def first_active(self, org_id: str | None) -> Channel | None:
        for cid in self._order:
            spec = self.specs[cid]
            if spec.enabled and spec.org == org_id:
                return self._channels.get(cid)
        return None

    def for_agent(self, agent: Agent) -> Channel | None:
        """Where the agent's messages go: its approval channel, else its org's first."""
        return resolve_channel(agent, self)

    def with_notify_tool(self, agents: Mapping[str, Agent]) -> dict[str, Agent]:
        """The agents, each placeholder ``channel_notify`` replaced by one posting here."""
        bound: dict[str, Agent] = {}
        for agent_id, agent in agents.items():
            if any(is_unbound(t) for t in agent.tools):
                notify = channel_notify_tool(
                    self._finder(agent),
                    unavailable=f"no active chat channel for agent '{agent.id}' (its "
                                f"approval_channel_id, or a channel of org '{agent.org_id}')",
                )
                agent = replace(agent, tools=[notify if is_unbound(t) else t
                                              for t in agent.tools])
            bound[agent_id] = agent
        return bound

    def _finder(self, agent: Agent) -> ChannelFinder:
        return lambda: self.for_agent(agent)

    async def sync(self, db: Database) -> None:
        """Record the channels in the database (secrets encrypted at rest)."""
        if not self.specs or self.secrets is None:
            return
        await store_channels(db, list(self.specs.values()), self.secrets)

    async def aclose(self) -> None:
        for ch in self._channels.values():
            await ch.aclose()


class CompletionNotices:
    """Posts a summary to the agent's channel when a run of a ``notify_on_completion``
    agent ends (agent, outcome, duration, tools used, answer, link to the run)."""

    def __init__(self, channels: ConfiguredChannels, agents: Mapping[str, Agent],
                 runs: DatabaseRunStore, run_url: Callable[[str], str | None]) -> None:
        self.channels = channels
        self.agents = agents
        self.runs = runs
        self.run_url = run_url

    async def run_ended(self, state: RunState) -> None:
        agent = self.agents.get(state.agent_id)
        if agent is None or not agent.notify_on_completion:
            return
        channel = self.channels.for_agent(agent)
        if channel is None:
            return
        row = await self.runs.row(state.run_id)
        seconds = (row.updated_at - row.created_at).total_seconds() if row else None
        used = Counter(e.get("tool_name") for e in state.trace if e.get("type") == "tool_result")
        await channel.notify(completion_summary(
            agent_name=agent.name, agent_id=agent.id, status=state.status, seconds=seconds,
            tools_used=[(str(name), n) for name, n in used.items()],
            answer=state.answer, error=state.error, run_id=state.run_id,
            run_url=self.run_url(state.run_id),
        ))
