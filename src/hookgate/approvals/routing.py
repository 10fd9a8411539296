"""Where a request goes: the web inbox (inline) or chat channels, by confirmation_mode; and
which channels' clicks may decide it (the channels it was sent through).

An agent names its approval channels with ``approval_channel_id`` and, for a request that
goes to several chats at once, ``approval_channel_ids``; the request's own ``channel_id`` is
the first that resolves, the others are recorded with it (its context's ``channels``), so a
click in any of them is a click on a card of this request. The votes are the people's, not
the channels': one person clicking in two channels is one vote (approvals/quorum.py).
"""

from __future__ import annotations

from typing import Any, Protocol

from hookgate.agent import Agent
from hookgate.approvals.errors import RoutingError
from hookgate.approvals.records import ConfirmationRequest
from hookgate.channels.base import Channel

#: The request context's key listing every channel the request was routed to, in order.
ROUTED_CHANNELS = "channels"


class ChannelDirectory(Protocol):
    """The configured channels, as the gate sees them."""

    def get(self, channel_id: str) -> Channel | None:
        """The channel if it exists and is enabled."""
        ...

    def first_active(self, org_id: str | None) -> Channel | None:
        """The org's first enabled channel, in configuration order."""
        ...


def wanted_channels(agent: Agent) -> list[str]:
    """The channel ids the agent names for its approvals, in order, once each."""
    named = [agent.approval_channel_id, *agent.approval_channel_ids]
    out: list[str] = []
    for channel_id in named:
        if channel_id and channel_id not in out:
            out.append(channel_id)
    return out


def resolve_channels(agent: Agent, channels: ChannelDirectory | None) -> list[Channel]:
    """The agent's named approval channels that are enabled and of its org, else the org's
    first active channel (none: [])."""
    if channels is None:
        return []
    chosen: list[Channel] = []
    for channel_id in wanted_channels(agent):
        channel = channels.get(channel_id)
        if channel is not None and channel.org_id == agent.org_id:
            chosen.append(channel)
    if chosen:
        return chosen
    first = channels.first_active(agent.org_id)
    return [first] if first is not None else []


def resolve_channel(agent: Agent, channels: ChannelDirectory | None) -> Channel | None:
    """The agent's first approval channel, else the org's first active channel."""
    found = resolve_channels(agent, channels)
    return found[0] if found else None


def route(agent: Agent, channels: ChannelDirectory | None) -> tuple[str, list[Channel]]:
    """(mode, channels) for a new request; channel_only with no channel fails closed."""
    if agent.confirmation_mode == "inline_only":
        return "inline", []
    found = resolve_channels(agent, channels)
    if found:
        return "channel", found
    if agent.confirmation_mode == "channel_only":
        named = wanted_channels(agent)
        if len(named) == 1:
            wanted = f"channel '{named[0]}' is not available"
        elif named:
            wanted = ("none of its approval channels ("
                      + ", ".join(f"'{c}'" for c in named) + ") is available")
        else:
            wanted = f"no active channel of org '{agent.org_id}' is available"
        raise RoutingError(
            f"agent '{agent.id}' is channel_only but {wanted}, so no approver can be reached"
        )
    return "inline", []


def routed_context(context: dict[str, Any], found: list[Channel]) -> dict[str, Any]:
    """``context`` recording the channels a request goes to, when there are several."""
    if len(found) > 1:
        return {**context, ROUTED_CHANNELS: [c.id for c in found]}
    return context


def routed_channels(request: ConfirmationRequest) -> list[str]:
    """The channels the request's own cards go to: its ``channel_id`` first."""
    out = [request.channel_id] if request.channel_id else []
    listed = (request.context or {}).get(ROUTED_CHANNELS)
    if isinstance(listed, list):
        out += [c for c in listed if isinstance(c, str) and c not in out]
    return out


def sent_through(request: ConfirmationRequest) -> list[str]:
    """Every channel a card of the request went to (or is going to): the routed channels,
    then the escalation's. A click from any other channel may not decide it."""
    out = routed_channels(request)
    for ref in request.escalation_refs:
        channel_id = (ref or {}).get("channel_id")
        if isinstance(channel_id, str) and channel_id not in out:
            out.append(channel_id)
    return out
