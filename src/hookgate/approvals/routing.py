"""Where a request goes: the web inbox (inline) or a chat channel, by confirmation_mode."""

from __future__ import annotations

from typing import Protocol

from hookgate.agent import Agent
from hookgate.approvals.errors import RoutingError
from hookgate.channels.base import Channel


class ChannelDirectory(Protocol):
    """The configured channels, as the gate sees them."""

    def get(self, channel_id: str) -> Channel | None:
        """The channel if it exists and is enabled."""
        ...

    def first_active(self, org_id: str | None) -> Channel | None:
        """The org's first enabled channel, in configuration order."""
        ...


def resolve_channel(agent: Agent, channels: ChannelDirectory | None) -> Channel | None:
    """The agent's approval_channel_id, else the org's first active channel."""
    if channels is None:
        return None
    if agent.approval_channel_id:
        chosen = channels.get(agent.approval_channel_id)
        if chosen is not None and chosen.org_id == agent.org_id:
            return chosen
    return channels.first_active(agent.org_id)


def route(agent: Agent, channels: ChannelDirectory | None) -> tuple[str, Channel | None]:
    """(mode, channel) for a new request; channel_only with no channel fails closed."""
    if agent.confirmation_mode == "inline_only":
        return "inline", None
    channel = resolve_channel(agent, channels)
    if channel is not None:
        return "channel", channel
    if agent.confirmation_mode == "channel_only":
        wanted = (f"channel '{agent.approval_channel_id}'" if agent.approval_channel_id
                  else f"an active channel of org '{agent.org_id}'")
        raise RoutingError(
            f"agent '{agent.id}' is channel_only but {wanted} is not available, "
            "so no approver can be reached"
        )
    return "inline", None
